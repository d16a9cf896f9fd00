package chart_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"shelljob.dev/shelljob/internal/metrics"
)

const dashboard = chartDir + "/dashboards/shelljob.json"

var (
	// shelljobName is any name of the operator's own metrics.
	shelljobName = regexp.MustCompile(`\bshelljob_[a-z0-9_]+`)
	// selector is a metric name that a vector selector or a range selects:
	// the name before `{` or `[`.
	selector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]`)
)

type panelTarget struct {
	Expr string `json:"expr"`
}

// queries collects the PromQL of a Grafana dashboard: the panels' exprs
// and the variables' queries.
func queries(v any, key string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			queries(e, k, out)
		}
	case []any:
		for _, e := range v {
			queries(e, key, out)
		}
	case string:
		if key == "expr" || key == "query" || key == "definition" {
			*out = append(*out, v)
		}
	}
}

// TestDashboardMetrics: the Grafana dashboard queries only metrics that
// the operator registers (internal/metrics), each of them, and every
// panel has a query: a renamed metric fails here, not on a blank graph.
func TestDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type    string        `json:"type"`
			Title   string        `json:"title"`
			Targets []panelTarget `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	for _, p := range d.Panels {
		if p.Type != "row" && !slices.ContainsFunc(p.Targets, func(q panelTarget) bool { return q.Expr != "" }) {
			t.Errorf("panel %q has no query", p.Title)
		}
	}

	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	queries(tree, "", &exprs)
	if len(exprs) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names := shelljobName.FindAllString(e, -1)
		for _, m := range selector.FindAllStringSubmatch(e, -1) {
			names = append(names, m[1])
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			name := registered(n)
			if name == "" {
				t.Errorf("the dashboard queries %s, which the operator does not register: %s", n, e)
				continue
			}
			used[name] = true
		}
	}
	for _, n := range metrics.Names() {
		if !used[n] {
			t.Errorf("no panel of the dashboard shows %s", n)
		}
	}
}

// registered is the registered metric that the series name n belongs to,
// "" if none: a histogram's series add _bucket, _sum and _count.
func registered(n string) string {
	if slices.Contains(metrics.Names(), n) {
		return n
	}
	for _, h := range metrics.Histograms() {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if n == h+suffix {
				return h
			}
		}
	}
	return ""
}
