package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ParseCIDRs parses a comma-separated list of CIDRs (a flag's value); an
// empty one is none.
func ParseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", s, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("CIDR %q has host bits set: %s?", s, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// Merge is the smallest sorted list of prefixes that covers the same
// addresses as prefixes: those inside another go, and two halves of one
// prefix become that prefix. IPv4-mapped IPv6 addresses count as IPv4.
func Merge(prefixes []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		if p.Addr().Is4In6() {
			bits := max(p.Bits()-96, 0)
			p = netip.PrefixFrom(p.Addr().Unmap(), bits)
		}
		out = append(out, p.Masked())
	}
	for {
		slices.SortFunc(out, comparePrefixes)
		merged := out[:0]
		changed := false
		for _, p := range out {
			if len(merged) == 0 {
				merged = append(merged, p)
				continue
			}
			last := merged[len(merged)-1]
			switch {
			case last.Overlaps(p):
				// Sorted by address, then by length: last holds p.
				changed = changed || last != p
			case siblings(last, p):
				merged[len(merged)-1] = netip.PrefixFrom(last.Addr(), last.Bits()-1)
				changed = true
			default:
				merged = append(merged, p)
			}
		}
		out = merged
		if !changed {
			return out
		}
	}
}

// siblings tells whether a and b are the lower and the upper half of one
// prefix.
func siblings(a, b netip.Prefix) bool {
	if a.Bits() != b.Bits() || a.Bits() == 0 || a.Addr().BitLen() != b.Addr().BitLen() {
		return false
	}
	parent := netip.PrefixFrom(a.Addr(), a.Bits()-1).Masked()
	return parent.Addr() == a.Addr() && parent.Contains(b.Addr())
}

// comparePrefixes orders IPv4 before IPv6, then by address, then the
// shorter prefix first.
func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
