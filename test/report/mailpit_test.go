package report_test

import (
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// mailpit is testtool's real SMTP server with an HTTP API.
type (
	mailpit = testtool.Mailpit
	summary = testtool.MailSummary
)

func startMailpit(t *testing.T, smtpPort int, args ...string) *mailpit {
	t.Helper()
	return testtool.StartMailpit(t, smtpPort, args...)
}
