package action

import (
	"context"
	"encoding/json"
	"fmt"
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

// markdownUnescape is how a CommonMark renderer shows text: a backslash
// before ASCII punctuation is dropped. It is the check's renderer for
// Mattermost and Teams.
func markdownUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescaped reports whether text holds c with no backslash before it (an
// even run of backslashes escapes themselves, not c).
func unescaped(text string, c byte) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != c {
			continue
		}
		n := 0
		for j := i - 1; j >= 0 && text[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
	}
	return false
}

// TestChatTextInjections: what a workload's author writes into a job's
// name, a user's name or a process's argv (which the advice quotes) reaches
// a chat channel only as text: no mention, no link, no heading, no
// emphasis, on one line, bounded; and people still read it as written.
func TestChatTextInjections(t *testing.T) {
	inputs := []string{
		"<!channel> wake up", "<!here|here>", "<!everyone>", "<@U024BE7LH>", "<#C024BE7LR|general>",
		"<https://evil.example|click me>", "<mailto:x@evil.example|mail>", "a & b < c > d",
		"@channel", "@here please", "@all", "hi @alice", "x@channel", "@\u200bchannel",
		"[click](https://evil.example)", "![img](https://evil.example/p.png)", "[x][1]\n[1]: https://evil.example",
		"**bold** __b__ *em* _em_ ~~s~~ `code`", "```\nfence\n```", "# Heading", "> quote", "| a | b |",
		"line1\nline2\n# h", "x\r\n- list", "tab\there", "\x1b[31mred", "\u202egnp.exe", "a\\]b", "\\",
		"{{template}}", "<at>General</at>", "<b>html</b>",
		strings.Repeat("&", 5000), strings.Repeat("[", 5000), strings.Repeat("é", 3000),
	}
	for _, format := range []string{WebhookSlack, WebhookMattermost, WebhookMSTeams} {
		for _, in := range inputs {
			out := chatText(format, in)
			name := fmt.Sprintf("%s %.30q", format, in)
			if len(out) > maxChatText {
				t.Errorf("%s: %d bytes, over %d", name, len(out), maxChatText)
			}
			if strings.ContainsAny(out, "\n\r\t\x1b\u202e") {
				t.Errorf("%s: control characters left: %q", name, out)
			}
			switch format {
			case WebhookSlack:
				rest := strings.NewReplacer("&amp;", "", "&lt;", "", "&gt;", "").Replace(out)
				if strings.ContainsAny(rest, "<>&") {
					t.Errorf("%s: Slack control sequence left: %q", name, out)
				}
				if strings.Contains(out, "@channel") || strings.Contains(out, "@here") {
					t.Errorf("%s: mention left: %q", name, out)
				}
			default:
				for _, c := range []byte("[]()*_`~#<>|!") {
					if unescaped(out, c) {
						t.Errorf("%s: %q unescaped in %q", name, c, out)
					}
				}
				shown := markdownUnescape(out)
				if strings.Contains(shown, "@channel") || strings.Contains(shown, "@here") || strings.Contains(shown, "@all") || strings.Contains(shown, "@alice") {
					t.Errorf("%s: mention left: %q", name, shown)
				}
				shown = strings.ReplaceAll(shown, "@\u200b", "@")
				// People read what was written (on one line, within the bound).
				want := strings.Map(func(r rune) rune {
					if r < 0x20 || r == 0x7f || r == '\u202e' || r == '\u200b' {
						return ' '
					}
					return r
				}, in)
				if len(in) < 1000 && shown != want {
					t.Errorf("%s: shown as %q, want %q", name, shown, want)
				}
			}
		}
	}
}

// TestChatPayloadEscapesTheFinding: a finding whose user, job and advice
// carry injections is posted, through a real webhook, escaped in every
// field the channel shows.
func TestChatPayloadEscapesTheFinding(t *testing.T) {
	for _, format := range []string{WebhookSlack, WebhookMattermost, WebhookMSTeams} {
		var raw []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { raw, _ = io.ReadAll(r.Body) }))
		req := warnReq()
		req.Finding.User = "@channel [bob](https://evil.example)"
		req.Finding.Job = "42\n# URGENT <!here>"
		req.Finding.Advice = "python train.py --name=**free-gpus** @all"
		if _, err := (&Webhook{URL: srv.URL, Format: format}).Act(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		var body any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		var texts []string
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				texts = append(texts, x)
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(body)
		all := strings.Join(texts, " ")
		bad := []string{"@channel", "@all", "<!here>", "\n# URGENT"}
		if format != WebhookSlack {
			// Slack's mrkdwn has no links of this form and no escape for
			// emphasis, which can neither link nor mention.
			bad = append(bad, "](https", "**free-gpus**")
		}
		for _, bad := range bad {
			if strings.Contains(all, bad) {
				t.Errorf("%s: %q reached the channel: %s", format, bad, all)
			}
		}
	}
}
