package server

import (
	"compress/gzip"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"gzip, deflate, br", true},
		{"gzip;q=0", false},
		{"gzip; q=0.0, identity", false},
		{"identity;q=1, gzip;q=0.5", true},
		{"*", true},
		{"*;q=0", false},
		{"*, gzip;q=0", false},
		{"deflate", false},
		{"GZIP;Q=0.1", true},
		{"gzip;q=banana", false},
	} {
		if got := AcceptsGzip([]string{tc.header}); got != tc.want {
			t.Errorf("AcceptsGzip(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// TestMetricsGzipNegotiation: q=0 refuses gzip, and caches are told the
// body depends on Accept-Encoding.
func TestMetricsGzipNegotiation(t *testing.T) {
	h := MetricsHandler(testCollector(t))
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{{"gzip", true}, {"gzip;q=0", false}, {"", false}} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.accept != "" {
			r.Header.Set("Accept-Encoding", tc.accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get("Vary") != "Accept-Encoding" {
			t.Errorf("%q: Vary = %q", tc.accept, w.Header().Get("Vary"))
		}
		if got := w.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("%q: gzip = %v, want %v", tc.accept, got, tc.gzip)
		}
		body := w.Body.Bytes()
		if tc.gzip {
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if !strings.Contains(string(body), "DCGM_FI_DEV_GPU_UTIL") {
			t.Errorf("%q: body %.80q", tc.accept, body)
		}
	}
}
