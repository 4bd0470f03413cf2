package testtool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Mailpit is a real SMTP server with an HTTP API, started per test.
type Mailpit struct {
	SMTPPort int
	API      string
}

// StartMailpit runs mailpit on smtpPort (0: any free port) with extra flags.
func StartMailpit(t *testing.T, smtpPort int, args ...string) *Mailpit {
	t.Helper()
	bin := Need(t, "mailpit", "/usr/local/bin/mailpit", filepath.Join(os.Getenv("HOME"), "go/bin/mailpit"))
	if smtpPort == 0 {
		smtpPort = FreePort(t)
	}
	httpPort := FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	all := append([]string{"--smtp", "127.0.0.1:" + strconv.Itoa(smtpPort), "--listen", "127.0.0.1:" + strconv.Itoa(httpPort),
		"--disable-version-check", "--smtp-disable-rdns", "--database", filepath.Join(t.TempDir(), "mailpit.db")}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	logf, err := os.Create(filepath.Join(t.TempDir(), "mailpit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mailpit: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("mailpit log:\n%s", b)
		}
	})
	m := &Mailpit{SMTPPort: smtpPort, API: "http://127.0.0.1:" + strconv.Itoa(httpPort)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(m.API + "/api/v1/messages")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(smtpPort)); err == nil {
				c.Close()
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MailAddress is an address in mailpit's API.
type MailAddress struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// MailSummary is one message in mailpit's list.
type MailSummary struct {
	ID      string        `json:"ID"`
	To      []MailAddress `json:"To"`
	Subject string        `json:"Subject"`
}

// MailPart is one MIME part of a message.
type MailPart struct {
	PartID      string `json:"PartID"`
	FileName    string `json:"FileName"`
	ContentType string `json:"ContentType"`
	ContentID   string `json:"ContentID"`
}

// MailMessage is one message with its parts.
type MailMessage struct {
	ID          string        `json:"ID"`
	From        MailAddress   `json:"From"`
	To          []MailAddress `json:"To"`
	Subject     string        `json:"Subject"`
	Text        string        `json:"Text"`
	HTML        string        `json:"HTML"`
	Inline      []MailPart    `json:"Inline"`
	Attachments []MailPart    `json:"Attachments"`
}

// Get reads path from mailpit's API, into into when not nil.
func (m *Mailpit) Get(t *testing.T, path string, into any) []byte {
	t.Helper()
	resp, err := http.Get(m.API + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return b
}

// Messages lists every captured message (newest first, as mailpit does).
func (m *Mailpit) Messages(t *testing.T) []MailSummary {
	t.Helper()
	var out struct {
		Total    int           `json:"total"`
		Messages []MailSummary `json:"messages"`
	}
	m.Get(t, "/api/v1/messages?limit=1000", &out)
	if out.Total != len(out.Messages) {
		t.Fatalf("mailpit holds %d messages, listed %d", out.Total, len(out.Messages))
	}
	return out.Messages
}

// Message reads one message with its parts.
func (m *Mailpit) Message(t *testing.T, id string) MailMessage {
	t.Helper()
	var out MailMessage
	m.Get(t, "/api/v1/message/"+id, &out)
	return out
}

// Part reads the bytes of one MIME part.
func (m *Mailpit) Part(t *testing.T, id, partID string) []byte {
	t.Helper()
	return m.Get(t, fmt.Sprintf("/api/v1/message/%s/part/%s", id, partID), nil)
}

// DeleteAll empties the mailbox.
func (m *Mailpit) DeleteAll(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, m.API+"/api/v1/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
