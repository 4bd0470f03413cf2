package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/serve"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

type staticSource struct{ snap *source.Snapshot }

func (s staticSource) Name() string { return "static" }
func (s staticSource) Close() error { return nil }
func (s staticSource) Collect(context.Context) (*source.Snapshot, error) {
	cp := *s.snap
	return &cp, nil
}

func testCollector(t testing.TB) *collector.Collector {
	t.Helper()
	snap := &source.Snapshot{Hostname: "n1", Devices: []source.Device{{Index: 0, UUID: "GPU-1", PCIBusID: "00000000:10:00.0",
		Model: "NVIDIA H100", Up: true, Capabilities: []string{"nvml", "gpm"},
		Samples: []source.Sample{{Metric: schema.GPUUtil, Value: 42}}}}}
	c, err := collector.New(collector.Options{Source: staticSource{snap}, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CollectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	cert := testtool.SelfSigned(t)
	certFile, keyFile, pool := cert.CertFile, cert.KeyFile, cert.Pool
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "web.yml")
	body := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n", certFile, keyFile, hash)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	flags := &web.FlagConfig{WebListenAddresses: &[]string{l.Addr().String()}, WebSystemdSocket: new(bool), WebConfigFile: &cfg}
	go func() {
		done <- serve.ServeListener(ctx, l, Handler(testCollector(t), "test"), flags, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + l.Addr().String() + "/metrics"
	for _, tc := range []struct {
		name       string
		user, pass string
		want       int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "prometheus", "nope", http.StatusUnauthorized},
		{"good credentials", "prometheus", "s3cret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			if tc.user != "" {
				req.SetBasicAuth(tc.user, tc.pass)
			}
			var resp *http.Response
			var err error
			for i := 0; i < 50; i++ { // the server starts in the background
				if resp, err = client.Do(req); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusOK && !strings.Contains(string(b), "DCGM_FI_DEV_GPU_UTIL{") {
				t.Errorf("body lacks GPU series: %.200s", b)
			}
		})
	}
	// Plain HTTP against the TLS listener is refused.
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + l.Addr().String() + "/metrics")
	if err == nil && resp.StatusCode == http.StatusOK {
		t.Error("plain HTTP served metrics on a TLS listener")
	}
}

func TestEndpoints(t *testing.T) {
	h := Handler(testCollector(t), "v1.2.3")
	for _, tc := range []struct {
		path, enc  string
		want       int
		contains   string
		ctype      string
		encodingOK string
	}{
		{path: "/metrics", want: 200, contains: `DCGM_FI_DEV_GPU_UTIL{gpu="0"`, ctype: ContentType},
		{path: "/metrics", enc: "gzip", want: 200, encodingOK: "gzip"},
		{path: "/healthz", want: 200, contains: "ok"},
		{path: "/", want: 200, contains: "gpm", ctype: "text/html; charset=utf-8"},
		{path: "/nope", want: 404},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.enc != "" {
			req.Header.Set("Accept-Encoding", tc.enc)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.path, rec.Code, tc.want)
		}
		if tc.contains != "" && !strings.Contains(rec.Body.String(), tc.contains) {
			t.Errorf("%s: body lacks %q", tc.path, tc.contains)
		}
		if tc.ctype != "" && rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("%s: content type %q", tc.path, rec.Header().Get("Content-Type"))
		}
		if tc.encodingOK != "" && rec.Header().Get("Content-Encoding") != tc.encodingOK {
			t.Errorf("%s: encoding %q", tc.path, rec.Header().Get("Content-Encoding"))
		}
	}
}

func TestHealthzStaleIs503(t *testing.T) {
	c, err := collector.New(collector.Options{Source: staticSource{&source.Snapshot{}}, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	Handler(c, "x").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no successful collection") {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Handler(c, "x").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("metrics before first collection: %d", rec.Code)
	}
}
