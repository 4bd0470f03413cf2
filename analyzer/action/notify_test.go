package action

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/schema"
)

func warnReq() *Request {
	return &Request{Step: StepWarn, Tier: "dev", NextStep: "reclaim", NextStepAt: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC),
		Finding: finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Job: "42", User: "bob", Team: "vision",
			Hostname: "n1", WastedGPUHours: 3.5}}
}

func TestWebhook(t *testing.T) {
	var got WebhookPayload
	var ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	if _, err := (&Webhook{URL: srv.URL + "/hook?token=secret"}).Act(context.Background(), warnReq()); err != nil {
		t.Fatal(err)
	}
	if ctype != "application/json" || got.Step != "warn" || got.Next == nil || got.Next.Step != "reclaim" ||
		!strings.Contains(got.Summary, "job 42 of bob (vision)") {
		t.Fatalf("payload = %+v", got)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusBadGateway)
	}))
	defer bad.Close()
	_, err := (&Webhook{URL: bad.URL + "/hook?token=secret"}).Act(context.Background(), warnReq())
	if err == nil || !strings.Contains(err.Error(), "502") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err = %v (must report the status, never the URL's token)", err)
	}
}

func TestAlertmanagerPayload(t *testing.T) {
	var alerts []amAlert
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&alerts)
	}))
	defer srv.Close()
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	a := &Alertmanager{URL: srv.URL, Duration: 2 * time.Hour, Now: func() time.Time { return now }}
	if _, err := a.Act(context.Background(), warnReq()); err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 {
		t.Fatalf("alerts = %+v", alerts)
	}
	l := alerts[0].Labels
	for k, v := range map[string]string{"alertname": AlertName, "job": "42", "user": "bob", "team": "vision", "pattern": "cpu_only", "severity": "warning"} {
		if l[k] != v {
			t.Errorf("label %s = %q, want %q", k, l[k], v)
		}
	}
	if !alerts[0].EndsAt.Equal(now.Add(2 * time.Hour)) {
		t.Errorf("endsAt = %v", alerts[0].EndsAt)
	}
}

type fakeSender struct {
	msgs []mail.Message
	err  error
}

func (f *fakeSender) Send(_ context.Context, m mail.Message) error {
	f.msgs = append(f.msgs, m)
	return f.err
}

func TestEmail(t *testing.T) {
	s := &fakeSender{}
	e := &Email{Mailer: s, Domain: "example.org", To: []string{"ops@example.org"}}
	if _, err := e.Act(context.Background(), warnReq()); err != nil {
		t.Fatal(err)
	}
	if len(s.msgs) != 1 || strings.Join(s.msgs[0].To, ",") != "ops@example.org,bob@example.org" ||
		!strings.Contains(s.msgs[0].Text, "Next step: reclaim") {
		t.Fatalf("messages = %+v", s.msgs)
	}
	r := warnReq()
	r.Finding.User = "bob@evil.org\r\nBcc: x"
	e.To = nil
	if _, err := e.Act(context.Background(), r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("hostile user name: err = %v", err)
	}
	s.err = errors.New("421 try later")
	if _, err := (&Email{Mailer: s, To: []string{"ops@example.org"}}).Act(context.Background(), warnReq()); err == nil {
		t.Fatal("send error swallowed")
	}
}
