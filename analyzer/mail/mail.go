// Package mail sends gpuwatch's email (weekly reports, notifications) over
// SMTP. Callers depend on the small Sender interface; SMTP is the real
// implementation, built on github.com/wneessen/go-mail, with a configurable
// TLS policy, AUTH, retries with backoff and sanitised headers.
package mail

import (
	"context"
	"strings"
	"unicode"
)

// Message is one email: a plain-text part, an optional HTML alternative and
// inline images that the HTML references as "cid:<CID>".
type Message struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Text    string   `json:"text"`
	HTML    string   `json:"html,omitempty"`
	Inline  []Inline `json:"inline,omitempty"`
}

// Inline is an image embedded in the message and referenced by Content-ID.
type Inline struct {
	CID         string `json:"cid"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"data"`
}

// Sender delivers messages. Implementations retry transient failures
// themselves; a returned error means the message was not delivered.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// SanitizeHeader makes s safe as a header value: CR, LF and other control
// characters would let a value (a team name, a job name from a user)
// inject headers or end the header block, so they become spaces.
func SanitizeHeader(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
