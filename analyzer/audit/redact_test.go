package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestActuatorErrorsStoredRedacted starts from a real actuator's error: a
// chat webhook whose receiver echoes the request (its URL's token in the
// path, the credentials a proxy added) in a 502 body. Written through
// Intend and Finish as the escalator and the drainer write it, no row of
// actions or audit_events holds a credential, the payload stays JSON that
// reconciliation can read, and names someone else chose are bounded.
func TestActuatorErrorsStoredRedacted(t *testing.T) {
	t.Parallel()
	const hookToken = "T0001/B0002/XyZhooksecret42"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "no route for %s; Authorization: Bearer proxy-cred-0123456789; password=hunter22", r.URL.Path)
	}))
	defer srv.Close()
	req := &action.Request{Step: "warn", Tier: "dev", Finding: finding.Finding{Pattern: schema.CPUOnly, Job: "42", User: "bob",
		Hostname: "n1", Advice: "python train.py --token=abcdefabcdef0123 --db=postgres://u:pgpass99@db/x"}}
	_, actErr := (&action.Webhook{URL: srv.URL + "/services/" + hookToken, Format: action.WebhookSlack}).Act(context.Background(), req)
	if actErr == nil || !strings.Contains(actErr.Error(), "502") {
		t.Fatalf("the receiver's 502 was not an error: %v", actErr)
	}
	payload, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := open(t, t.TempDir()+"/s.db")
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("p", 100_000)
	rec := Record{Key: Key("k", t0, "warn"), FindingKey: "k", Episode: t0, Step: "warn", Actuator: "webhook", Hostname: "n1", Job: long,
		User: "bob", Detail: "about to post to " + srv.URL + "/services/" + hookToken, Payload: string(payload)}
	if _, ok, err := l.Intend(ctx, rec, t0); err != nil || !ok {
		t.Fatalf("intend: %v %v", ok, err)
	}
	if err := l.Finish(ctx, rec.Key, Failed, actErr.Error(), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, q := range []string{`SELECT job || ' ' || detail || ' ' || payload FROM actions`, `SELECT job || ' ' || detail FROM audit_events`} {
		r, err := l.db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, s)
		}
		r.Close()
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 1 action and 2 events", len(rows))
	}
	for _, row := range rows {
		for _, leak := range []string{"XyZhooksecret42", "proxy-cred-0123456789", "hunter22", "abcdefabcdef0123", "pgpass99", strings.Repeat("p", termsafe.MaxName+1)} {
			if strings.Contains(row, leak) {
				t.Errorf("a stored row holds %.40q: %.400s", leak, row)
			}
		}
	}
	got, _, err := l.Get(ctx, rec.Key)
	if err != nil {
		t.Fatal(err)
	}
	var back action.Request
	if err := json.Unmarshal([]byte(got.Payload), &back); err != nil || back.Finding.Job != "42" || back.Finding.User != "bob" {
		t.Errorf("payload after redaction: %v %+v", err, back.Finding)
	}
	if !strings.Contains(got.Detail, "502") || !strings.Contains(got.Detail, "127.0.0.1") {
		t.Errorf("detail lost what happened: %q", got.Detail)
	}
}
