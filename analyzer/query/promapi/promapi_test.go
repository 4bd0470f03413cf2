package promapi

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

func TestNewValidatesURL(t *testing.T) {
	for _, u := range []string{"", "prometheus:9090", "ftp://x"} {
		if _, err := New(u, Options{}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func server(t *testing.T, warnings string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("query") == "" || r.Form.Get("timeout") == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success",%s"data":{"resultType":"matrix","result":[
			{"metric":{"UUID":"GPU-1"},"values":[[1767225600,"42"],[1767225900,"43"]]}]}}`, warnings)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestQueryRange(t *testing.T) {
	r := query.Range{Start: time.Unix(1767225600, 0), End: time.Unix(1767225900, 0), Step: 5 * time.Minute}
	for _, c := range []struct {
		name, warnings string
		allow          bool
		err            string
	}{
		{"clean", "", false, ""},
		{"partial refused", `"warnings":["partial response"],`, false, "partial response"},
		{"partial allowed", `"warnings":["partial response"],`, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := New(server(t, c.warnings).URL, Options{AllowWarnings: c.allow, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			v, err := cl.QueryRange(context.Background(), "up", r)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), `"up"`) {
					t.Fatalf("error %v, want one naming %q and the query", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, ok := v.(model.Matrix)
			if !ok || len(m) != 1 || len(m[0].Values) != 2 || m[0].Values[1].Value != 43 {
				t.Fatalf("got %v", v)
			}
		})
	}
}

// TestCompression: answers come uncompressed unless Compression is set,
// and a gzipped answer (as Prometheus sends one when asked) still decodes.
func TestCompression(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprint("compression=", compress), func(t *testing.T) {
			var asked string
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked = r.Header.Get("Accept-Encoding")
				w.Header().Set("Content-Type", "application/json")
				body := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"UUID":"GPU-1"},"value":[1767225600,"7"]}]}}`
				if !strings.Contains(asked, "gzip") {
					fmt.Fprint(w, body)
					return
				}
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				fmt.Fprint(zw, body)
				_ = zw.Close()
			}))
			defer s.Close()
			cl, err := New(s.URL, Options{Compression: compress, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			v, err := cl.Query(context.Background(), "up", time.Unix(1767225600, 0))
			if err != nil {
				t.Fatal(err)
			}
			if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || vec[0].Value != 7 {
				t.Fatalf("got %v", v)
			}
			if want := map[bool]string{false: "identity", true: "gzip"}[compress]; asked != want {
				t.Errorf("Accept-Encoding %q, want %q", asked, want)
			}
		})
	}
}

// TestReadSamplesUnsupported: a server without remote read (a 404, or
// the 400 "unsupported path" of VictoriaMetrics single-node) or one that answers it with something other
// than streamed chunks says errors.ErrUnsupported, so the caller asks the
// query API; a server error stays an error.
func TestReadSamplesUnsupported(t *testing.T) {
	for _, tc := range []struct {
		status      int
		contentType string
		unsupported bool
	}{
		{http.StatusNotFound, "text/plain", true},
		{http.StatusBadRequest, "text/plain; charset=utf-8", true},
		{http.StatusOK, "application/x-protobuf", true},
		{http.StatusInternalServerError, "text/plain", false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/read" || r.Header.Get("Content-Encoding") != "snappy" {
				t.Errorf("asked %s with %q", r.URL.Path, r.Header.Get("Content-Encoding"))
			}
			w.Header().Set("Content-Type", tc.contentType)
			w.WriteHeader(tc.status)
		}))
		c, err := New(srv.URL, Options{})
		if err != nil {
			t.Fatal(err)
		}
		called := false
		read := func() error {
			return c.ReadSamples(context.Background(), "up", time.Unix(0, 0), time.Unix(3600, 0), func(model.Metric, []model.SamplePair) error {
				called = true
				return nil
			})
		}
		err = read()
		if err == nil || errors.Is(err, errors.ErrUnsupported) != tc.unsupported || called {
			t.Errorf("%d %s: err %v (unsupported want %v), series handed on %v", tc.status, tc.contentType, err, tc.unsupported, called)
		}
		// Unsupported is remembered: the server is not asked again.
		srv.Close()
		if err = read(); errors.Is(err, errors.ErrUnsupported) != tc.unsupported {
			t.Errorf("%d %s: asked again, err %v", tc.status, tc.contentType, err)
		}
	}
}
