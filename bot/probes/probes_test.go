package probes

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	var h Health
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if get("/healthz") != http.StatusOK || get("/readyz") != http.StatusServiceUnavailable {
		t.Fatalf("before Ready: healthz %d, readyz %d", get("/healthz"), get("/readyz"))
	}
	h.Ready()
	if get("/readyz") != http.StatusOK {
		t.Fatalf("after Ready: readyz %d", get("/readyz"))
	}
}

func TestMetricsHasRSS(t *testing.T) {
	rec := httptest.NewRecorder()
	Metrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "process_resident_memory_bytes ") {
		t.Fatalf("no process_resident_memory_bytes in:\n%.500s", rec.Body.String())
	}
}
