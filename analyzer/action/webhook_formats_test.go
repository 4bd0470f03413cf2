package action

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each chat format is posted to a local receiver that checks the body
// against the service's documented incoming-webhook shape, read as plain
// JSON (not through gpuwatch's own types), the way the service reads it.
func TestWebhookChatFormats(t *testing.T) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	arr := func(v any) []any { a, _ := v.([]any); return a }
	for _, tc := range []struct {
		format string
		check  func(t *testing.T, body map[string]any) string // returns the visible text
	}{
		{WebhookSlack, func(t *testing.T, b map[string]any) string {
			// Slack: "text" (required; the notification), "blocks" of
			// section blocks whose text object is mrkdwn.
			if str(b, "text") == "" {
				t.Error("slack: no text")
			}
			blocks := arr(b["blocks"])
			if len(blocks) != 1 || str(obj(blocks[0]), "type") != "section" || str(obj(obj(blocks[0])["text"]), "type") != "mrkdwn" {
				t.Errorf("slack: blocks %v, want one section with mrkdwn text", b["blocks"])
			}
			return str(obj(obj(blocks[0])["text"]), "text")
		}},
		{WebhookMattermost, func(t *testing.T, b map[string]any) string {
			// Mattermost: "text" (required), optional "username".
			for k := range b {
				if k != "text" && k != "username" {
					t.Errorf("mattermost: key %q is not a documented field of ours", k)
				}
			}
			return str(b, "text")
		}},
		{WebhookMSTeams, func(t *testing.T, b map[string]any) string {
			// Teams workflow: {"type": "message", "attachments": [{"contentType":
			// "application/vnd.microsoft.card.adaptive", "content": AdaptiveCard}]}.
			att := arr(b["attachments"])
			if str(b, "type") != "message" || len(att) != 1 || str(obj(att[0]), "contentType") != "application/vnd.microsoft.card.adaptive" {
				t.Fatalf("msteams: %v is not a message with one Adaptive Card", b)
			}
			card := obj(obj(att[0])["content"])
			if str(card, "type") != "AdaptiveCard" || str(card, "version") == "" {
				t.Errorf("msteams: card %v", card)
			}
			var text []string
			for _, el := range arr(card["body"]) {
				if str(obj(el), "type") != "TextBlock" {
					t.Errorf("msteams: body element %v is not a TextBlock", el)
				}
				text = append(text, str(obj(el), "text"))
			}
			return strings.Join(text, "\n")
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var body map[string]any
			var ctype string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctype = r.Header.Get("Content-Type")
				b, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(b, &body); err != nil {
					t.Errorf("not JSON: %v: %s", err, b)
				}
				_, _ = io.WriteString(w, "ok") // Slack and Mattermost answer "ok"
			}))
			defer srv.Close()
			req := warnReq()
			req.Finding.User = "bob <!channel>"
			if _, err := (&Webhook{URL: srv.URL, Format: tc.format}).Act(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if ctype != "application/json" {
				t.Errorf("Content-Type %q", ctype)
			}
			text := tc.check(t, body)
			for _, want := range []string{"warn", "job 42", "vision", "cpu only", "3.5 GPU-hours", "Next step: reclaim"} {
				if !strings.Contains(text, want) {
					t.Errorf("text lacks %q: %s", want, text)
				}
			}
			if tc.format == WebhookSlack && strings.Contains(text, "<!channel>") {
				t.Errorf("slack: a user name mentions the channel: %s", text)
			}
		})
	}
	if _, err := (&Webhook{URL: "http://127.0.0.1:1", Format: "irc"}).Act(context.Background(), warnReq()); err == nil || !strings.Contains(err.Error(), "slack, mattermost, msteams") {
		t.Errorf("unknown format: %v", err)
	}
}
