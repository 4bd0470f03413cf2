package action

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// The webhook's body is gpuwatch's own JSON (WebhookPayload), or the
// documented incoming-webhook body of a chat service (the policy's
// channels.webhook.format names it), so that a notify or warn step posts
// straight into a channel:
//   - slack: {"text", "blocks"} (Slack incoming webhooks)
//   - mattermost: {"text", "username"} (Mattermost incoming webhooks)
//   - msteams: a message with one Adaptive Card attachment (Microsoft Teams
//     Workflows' "when a Teams webhook request is received")
const (
	WebhookGpuwatch   = "gpuwatch"
	WebhookSlack      = "slack"
	WebhookMattermost = "mattermost"
	WebhookMSTeams    = "msteams"
)

// WebhookFormats are the accepted values of channels.webhook.format.
var WebhookFormats = []string{WebhookGpuwatch, WebhookSlack, WebhookMattermost, WebhookMSTeams}

// SlackPayload is the body of a Slack incoming webhook: text is the
// notification's fallback, blocks what the channel shows.
type SlackPayload struct {
	Text   string       `json:"text"`
	Blocks []SlackBlock `json:"blocks"`
}

// SlackBlock is a section block with mrkdwn text.
type SlackBlock struct {
	Type string    `json:"type"`
	Text SlackText `json:"text"`
}

// SlackText is a Slack text object.
type SlackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MattermostPayload is the body of a Mattermost incoming webhook.
type MattermostPayload struct {
	Text     string `json:"text"`
	Username string `json:"username,omitempty"`
}

// TeamsMessage is the body a Microsoft Teams "post to a channel when a
// webhook request is received" workflow accepts: a message whose one
// attachment is an Adaptive Card.
type TeamsMessage struct {
	Type        string            `json:"type"`
	Attachments []TeamsAttachment `json:"attachments"`
}

// TeamsAttachment carries the card.
type TeamsAttachment struct {
	ContentType string    `json:"contentType"`
	Content     TeamsCard `json:"content"`
}

// TeamsCard is an Adaptive Card of text blocks.
type TeamsCard struct {
	Type    string      `json:"type"`
	Version string      `json:"version"`
	Body    []TeamsText `json:"body"`
}

// TeamsText is an Adaptive Card TextBlock.
type TeamsText struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Wrap   bool   `json:"wrap"`
	Weight string `json:"weight,omitempty"`
}

// maxChatText bounds one field of a chat message after escaping: Slack
// refuses a section block over 3,000 characters, and a job's name of a
// megabyte would otherwise be posted whole.
const maxChatText = 2900

// Someone else's text (a job's name, a user's, advice naming a process's
// command line) is made inert for the format that shows it: it can neither
// mention a channel or a person, nor forge a link, a heading or emphasis.
var (
	// Slack's mrkdwn reserves &, < and > (<!channel>, <https://x|text>,
	// <@U123>); a plain @here notifies nobody in an incoming webhook's
	// message, but a zero-width space after @ keeps it so if link_names is
	// on. Slack has no escape for *bold* or _italic_: emphasis stays, and
	// it can neither link nor mention.
	slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "@", "@\u200b")
	// Mattermost renders CommonMark, where a backslash makes any ASCII
	// punctuation literal, and notifies on @channel, @all, @here and
	// @username: a zero-width space after @ breaks every mention.
	mattermostEscaper = strings.NewReplacer(markdownPairs("@", "@\u200b")...)
	// A Teams Adaptive Card TextBlock renders a Markdown subset (emphasis,
	// links, lists) with CommonMark's backslash escapes; a mention needs an
	// entity in the card, which we never send, and @ is broken all the same
	// so that a reader is not told the channel was called.
	teamsEscaper = strings.NewReplacer(markdownPairs("@", "@\u200b")...)
)

// markdownPairs are the replacements that make CommonMark punctuation
// literal, plus extra pairs. "." and "-" stay: they only start a list at
// the start of a line, and chatText keeps someone else's text on one line.
func markdownPairs(extra ...string) []string {
	var p []string
	for _, c := range "\\`*_~[]()<>|#!{}" {
		p = append(p, string(c), "\\"+string(c))
	}
	return append(p, extra...)
}

// chatText is s for one field of a chat message in format: on one line
// (control characters become spaces, so nothing starts a heading or a
// list), escaped, and bounded at maxChatText once escaped.
func chatText(format, s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, s)
	esc := map[string]*strings.Replacer{WebhookSlack: slackEscaper, WebhookMattermost: mattermostEscaper, WebhookMSTeams: teamsEscaper}[format]
	for n := maxChatText; ; n /= 2 {
		out := esc.Replace(termsafe.Bound(s, n))
		if len(out) <= maxChatText || n < 64 {
			return out
		}
	}
}

// chatPayload is the body for format, for a request's summary (one line)
// and description (a paragraph).
func chatPayload(format string, req *Request) (any, error) {
	if !slices.Contains(WebhookFormats, format) || format == WebhookGpuwatch {
		return nil, fmt.Errorf("unknown webhook format %q (one of %s)", format, strings.Join(WebhookFormats, ", "))
	}
	title := chatText(format, fmt.Sprintf("gpuwatch %s: %s", req.Step, Summary(req)))
	text := chatText(format, Description(req))
	switch format {
	case WebhookSlack:
		return SlackPayload{Text: title, Blocks: []SlackBlock{{Type: "section",
			Text: SlackText{Type: "mrkdwn", Text: "*" + title + "*\n" + text}}}}, nil
	case WebhookMattermost:
		return MattermostPayload{Text: "**" + title + "**\n" + text, Username: "gpuwatch"}, nil
	default: // WebhookMSTeams
		return TeamsMessage{Type: "message", Attachments: []TeamsAttachment{{
			ContentType: "application/vnd.microsoft.card.adaptive",
			Content: TeamsCard{Type: "AdaptiveCard", Version: "1.4", Body: []TeamsText{
				{Type: "TextBlock", Text: title, Wrap: true, Weight: "Bolder"},
				{Type: "TextBlock", Text: text, Wrap: true}}},
		}}}, nil
	}
}
