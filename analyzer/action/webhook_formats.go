package action

import (
	"fmt"
	"strings"
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

// slackEscape escapes the three characters Slack's mrkdwn reserves, so that
// a job name cannot mention a channel or forge a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// chatPayload is the body for format, for a request's summary (one line)
// and description (a paragraph).
func chatPayload(format string, req *Request) (any, error) {
	title := fmt.Sprintf("gpuwatch %s: %s", req.Step, Summary(req))
	text := Description(req)
	switch format {
	case WebhookSlack:
		return SlackPayload{Text: slackEscape(title), Blocks: []SlackBlock{{Type: "section",
			Text: SlackText{Type: "mrkdwn", Text: "*" + slackEscape(title) + "*\n" + slackEscape(text)}}}}, nil
	case WebhookMattermost:
		return MattermostPayload{Text: "**" + title + "**\n" + text, Username: "gpuwatch"}, nil
	case WebhookMSTeams:
		return TeamsMessage{Type: "message", Attachments: []TeamsAttachment{{
			ContentType: "application/vnd.microsoft.card.adaptive",
			Content: TeamsCard{Type: "AdaptiveCard", Version: "1.4", Body: []TeamsText{
				{Type: "TextBlock", Text: title, Wrap: true, Weight: "Bolder"},
				{Type: "TextBlock", Text: text, Wrap: true}}},
		}}}, nil
	}
	return nil, fmt.Errorf("unknown webhook format %q (one of %s)", format, strings.Join(WebhookFormats, ", "))
}
