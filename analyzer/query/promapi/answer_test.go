package promapi

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

func TestDecodeAnswer(t *testing.T) {
	for _, c := range []struct {
		name, body string
		check      func(t *testing.T, v model.Value)
		err        string
	}{
		{name: "matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"__name__":"up","UUID":"GPU-1"},"values":[[1767225600,"1"],[1767225600.5,"NaN"],[1767225601.25,"+Inf"]]}]}}`,
			check: func(t *testing.T, v model.Value) {
				m := v.(model.Matrix)
				if len(m) != 1 || m[0].Metric["UUID"] != "GPU-1" || len(m[0].Values) != 3 {
					t.Fatalf("got %v", m)
				}
				p := m[0].Values
				if p[0].Timestamp != 1767225600000 || p[1].Timestamp != 1767225600500 || p[2].Timestamp != 1767225601250 {
					t.Errorf("timestamps %v %v %v", p[0].Timestamp, p[1].Timestamp, p[2].Timestamp)
				}
				if p[0].Value != 1 || !math.IsNaN(float64(p[1].Value)) || !math.IsInf(float64(p[2].Value), 1) {
					t.Errorf("values %v", p)
				}
			}},
		{name: "result before its type", body: `{"data":{"result":[{"value":[1767225600,"7"],"metric":{"a":"b"}}],"resultType":"vector"},"status":"success"}`,
			check: func(t *testing.T, v model.Value) {
				vec := v.(model.Vector)
				if len(vec) != 1 || vec[0].Value != 7 || vec[0].Metric["a"] != "b" {
					t.Fatalf("got %v", vec)
				}
			}},
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1767225600.001,"2.5"]}}`,
			check: func(t *testing.T, v model.Value) {
				if s := v.(*model.Scalar); s.Value != 2.5 || s.Timestamp != 1767225600001 {
					t.Fatalf("got %v", s)
				}
			}},
		{name: "error", body: `{"status":"error","errorType":"bad_data","error":"parse error"}`, err: "bad_data: parse error"},
		{name: "warnings refused", body: `{"status":"success","warnings":["partial response"],"data":{"resultType":"vector","result":[]}}`, err: "partial response"},
		{name: "bad value", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`, err: `"x" is not a number`},
		{name: "histogram", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}}`, err: "native histograms"},
		{name: "truncated", body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],`, err: "decode answer"},
		{name: "not the API", body: `<html>hello</html>`, err: "decode answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if strings.Contains(c.body, `"status":"error"`) {
					w.WriteHeader(http.StatusBadRequest)
				}
				_, _ = w.Write([]byte(c.body))
			}))
			defer s.Close()
			cl, err := New(s.URL, Options{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			v, err := cl.Query(context.Background(), "up", time.Unix(1767225600, 0))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, v)
		})
	}
}

// TestNonJSONError: a proxy's error page is one line with the status.
func TestNonJSONError(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>\n<body>upstream down</body>\n</html>"))
	}))
	defer s.Close()
	cl, _ := New(s.URL, Options{Timeout: 5 * time.Second})
	_, err := cl.QueryRange(context.Background(), "up", rangeOf())
	if err == nil || !strings.Contains(err.Error(), "502") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q, want one line naming 502", err)
	}
}

// TestGetFallback: a server that refuses POST is asked by GET.
func TestGetFallback(t *testing.T) {
	var methods []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Query().Get("query") != "up" || r.URL.Query().Get("step") != "300" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[]}}`))
	}))
	defer s.Close()
	cl, _ := New(s.URL, Options{Timeout: 5 * time.Second})
	if _, err := cl.QueryRange(context.Background(), "up", rangeOf()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(methods, ",") != "POST,GET" {
		t.Errorf("methods %v, want POST then GET", methods)
	}
}

func rangeOf() query.Range {
	return query.Range{Start: time.Unix(1767225600, 0), End: time.Unix(1767225900, 0), Step: 5 * time.Minute}
}
