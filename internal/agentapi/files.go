package agentapi

import "io"

// Skipper drops the first Skip bytes written to it and writes the rest to
// W: a stream from an offset, made by a writer that can only make it from
// its start (the agent's tar of a job's files; an agent older than
// get-files --offset, whose whole stream the reader then skips).
type Skipper struct {
	W io.Writer
	// Skip is how many bytes are still to be dropped.
	Skip int64
}

// Write implements io.Writer: it takes all of p, and writes to W what is
// past the bytes to drop.
func (s *Skipper) Write(p []byte) (int, error) {
	n := len(p)
	drop := min(s.Skip, int64(n))
	s.Skip -= drop
	if rest := p[drop:]; len(rest) > 0 {
		if _, err := s.W.Write(rest); err != nil {
			return 0, err
		}
	}
	return n, nil
}
