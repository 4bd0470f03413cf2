package promapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/api"
)

// PingTimeout bounds Ping: a server that answers the trivial query slower
// than this is not one the analyzer can use.
const PingTimeout = 10 * time.Second

// PingError is Ping's error. Answered says the server answered, but not as
// the API: the URL is wrong, not the server's state.
type PingError struct {
	Answered bool
	msg      string
}

func (e *PingError) Error() string { return e.msg }

func unreachable(format string, a ...any) error {
	return &PingError{msg: fmt.Sprintf(format, a...)}
}

func wrong(format string, a ...any) error {
	return &PingError{Answered: true, msg: fmt.Sprintf(format, a...)}
}

// Ping asks the server the trivial instant query "1" and, when the answer is
// not the Prometheus API's, returns an error whose text says in one line what
// is wrong and what to check: nothing listening, a host that does not
// resolve, a timeout, TLS, credentials, a path that is not the API's base
// (404), or a server that answers something else.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	u, err := url.Parse(strings.TrimRight(c.url, "/") + "/api/v1/query")
	if err != nil {
		return wrong("%s is not a URL: %v", c.url, err)
	}
	u.RawQuery = url.Values{"query": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return wrong("%s is not a URL: %v", c.url, err)
	}
	rt := c.rt
	if rt == nil {
		rt = api.DefaultRoundTripper
	}
	resp, err := (&http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		return unreachable("cannot reach %s: %s", c.url, cause(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	path := u.Path
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return wrong("%s answered 404 Not Found for %s: give the server's base URL (such as http://prometheus:9090, or Thanos' or Mimir's query prefix), not a page or an /api/v1 path", c.url, path)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return wrong("%s refused the query with %s: it wants credentials the analyzer does not send", c.url, resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return wrong("%s redirects %s to %s: give the URL it redirects to", c.url, path, resp.Header.Get("Location"))
	}
	var answer struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Status == "" {
		return wrong("%s answered %s for %s with a page, not the Prometheus API's JSON: is it a Prometheus-compatible server's base URL?", c.url, resp.Status, path)
	}
	if answer.Status != "success" {
		return wrong("%s answered %s for the query \"1\": %s: %s", c.url, resp.Status, answer.ErrorType, oneLine(answer.Error))
	}
	return nil
}

// cause names why a request failed, in words an operator acts on.
func cause(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (nothing listens on that host and port: is the server running, and is the port right?)"
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("host %q not found (check the host name)", dnsErr.Name)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("no answer within %s (a firewall, or the wrong host?)", PingTimeout)
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host (check the address and the network)"
	case errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr):
		return "its TLS certificate is not trusted here: " + oneLine(err.Error())
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "it speaks plain HTTP: use http://, not https://"
	case strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return "it speaks plain HTTP: use http://, not https://"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return oneLine(opErr.Err.Error())
	}
	return oneLine(err.Error())
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
