package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

func TestHealthFollowsCycles(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	fail := errors.New("prometheus: connection refused")
	var srcErr error
	now := r.start
	d := &Daemon{Escalator: r.esc, Now: func() time.Time { return now },
		Source: SourceFunc(func(context.Context, time.Time) ([]finding.Finding, error) { return nil, srcErr })}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		d.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusOK || !strings.Contains(body, "no cycle yet") {
		t.Errorf("before any cycle: %d %q", code, body)
	}
	if _, err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	srcErr = fail
	now = now.Add(5 * time.Minute)
	if _, err := d.RunOnce(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("want the source's error, got %v", err)
	}
	code, body := get()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") || !strings.Contains(body, "last good cycle 2026-03-01T10:00:00Z") {
		t.Errorf("after a failed cycle: %d %q", code, body)
	}
	srcErr = nil
	now = now.Add(5 * time.Minute)
	if _, err := d.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusOK || !strings.Contains(body, "10:10:00Z") {
		t.Errorf("after recovery: %d %q", code, body)
	}
}
