package action

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/schema"
)

func post(ctx context.Context, client *http.Client, url string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("post: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(r)
	if err != nil {
		// The URL may carry a token: report the host only.
		return fmt.Errorf("post to %s: %w", r.URL.Host, unwrapURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post to %s: %s: %s", r.URL.Host, resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}

func unwrapURL(err error) error {
	type wrapper interface{ Unwrap() error }
	if w, ok := err.(wrapper); ok && w.Unwrap() != nil {
		return w.Unwrap()
	}
	return err
}

// Webhook posts each notify or warn step as JSON.
type Webhook struct {
	URL string
	// Format is the body's shape: gpuwatch's WebhookPayload (empty or
	// "gpuwatch"), or a chat service's incoming-webhook body ("slack",
	// "mattermost", "msteams": WebhookFormats).
	Format string
	Client *http.Client
}

// WebhookPayload is the JSON body a webhook receives.
type WebhookPayload struct {
	Version string   `json:"version"`
	Step    string   `json:"step"`
	Tier    string   `json:"tier"`
	DryRun  bool     `json:"dry_run"`
	Summary string   `json:"summary"`
	Text    string   `json:"text"`
	Finding any      `json:"finding"`
	Next    *NextRef `json:"next,omitempty"`
}

// NextRef says which step comes next and when.
type NextRef struct {
	Step string    `json:"step"`
	At   time.Time `json:"at"`
}

// Name implements Actuator.
func (w *Webhook) Name() string { return "webhook" }

// Act implements Actuator.
func (w *Webhook) Act(ctx context.Context, req *Request) (string, error) {
	p := WebhookPayload{Version: "1", Step: req.Step, Tier: req.Tier, DryRun: req.DryRun,
		Summary: Summary(req), Text: Description(req), Finding: &req.Finding}
	if req.NextStep != "" {
		p.Next = &NextRef{Step: req.NextStep, At: req.NextStepAt.UTC()}
	}
	var body any = p
	if w.Format != "" && w.Format != WebhookGpuwatch {
		var err error
		if body, err = chatPayload(w.Format, req); err != nil {
			return "", fmt.Errorf("webhook: %w", err)
		}
	}
	registerURLSecrets(w.URL)
	if err := post(ctx, w.Client, w.URL, body); err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return "webhook delivered", nil
}

// registerURLSecrets teaches the process-wide redaction what of a chat
// webhook's URL is its credential: the path (Slack's /services/T/B/token,
// Mattermost's /hooks/id), the query (Teams' sig=), the password. A
// receiver that echoes its request in an error body, or a proxy that names
// the URL, then leaks none of it into the audit log or the log.
func registerURLSecrets(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		secret.Register(raw)
		return
	}
	if pw, ok := u.User.Password(); ok {
		secret.Register(pw)
	}
	if len(u.Path) > 1 {
		secret.Register(u.Path, u.EscapedPath())
	}
	if u.RawQuery != "" {
		secret.Register(u.RawQuery)
		// A value long enough to be a key (sig=…, token=…); a short one
		// (api-version=1) masked everywhere would blank ordinary text.
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= minURLSecret {
					secret.Register(v)
				}
			}
		}
	}
}

// minURLSecret is the shortest query value taken for a credential.
const minURLSecret = 8

// Alertmanager posts warnings as alerts (POST /api/v2/alerts), so the team's
// routes decide where they go. Alerts end after Duration unless renewed.
type Alertmanager struct {
	URL      string // base URL, e.g. http://alertmanager:9093
	Duration time.Duration
	Client   *http.Client
	Now      func() time.Time
	// GeneratorURL links back to the analyzer.
	GeneratorURL string
}

// AlertName is the alertname of gpuwatch's warnings.
const AlertName = "GPUWasteWarning"

type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Name implements Actuator.
func (a *Alertmanager) Name() string { return "alertmanager" }

// Act implements Actuator.
func (a *Alertmanager) Act(ctx context.Context, req *Request) (string, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	d := a.Duration
	if d <= 0 {
		d = time.Hour
	}
	f := &req.Finding
	sev := string(f.Severity)
	if sev == "" {
		sev = string(schema.SeverityWarning)
	}
	labels := map[string]string{"alertname": AlertName, "job": f.Job, "user": f.User, "team": f.Team,
		"pattern": string(f.Pattern), "severity": sev, "hostname": f.Hostname, "step": req.Step, "tier": req.Tier}
	for k, v := range labels {
		if v == "" {
			delete(labels, k) // Alertmanager rejects empty label values
		}
	}
	t := now().UTC()
	alert := amAlert{Labels: labels, StartsAt: t, EndsAt: t.Add(d), GeneratorURL: a.GeneratorURL,
		Annotations: map[string]string{"summary": Summary(req), "description": Description(req)}}
	if err := post(ctx, a.Client, a.URL+"/api/v2/alerts", []amAlert{alert}); err != nil {
		return "", fmt.Errorf("alertmanager: %w", err)
	}
	return "alert sent", nil
}

// Email mails the allocation's user (user@Domain) and fixed recipients.
type Email struct {
	Mailer mail.Sender
	Domain string
	To     []string
}

// Name implements Actuator.
func (e *Email) Name() string { return "email" }

// Act implements Actuator.
func (e *Email) Act(ctx context.Context, req *Request) (string, error) {
	to := append([]string(nil), e.To...)
	if e.Domain != "" && userName.MatchString(req.Finding.User) {
		to = append(to, req.Finding.User+"@"+e.Domain)
	}
	if len(to) == 0 {
		return "", fmt.Errorf("email: no recipient for user %q: %w", req.Finding.User, ErrInvalid)
	}
	msg := mail.Message{To: to, Subject: mail.SanitizeHeader("[gpuwatch] " + Summary(req)), Text: Description(req) + "\n"}
	if err := e.Mailer.Send(ctx, msg); err != nil {
		return "", fmt.Errorf("email: %w", err)
	}
	return fmt.Sprintf("mailed %d recipient(s)", len(to)), nil
}
