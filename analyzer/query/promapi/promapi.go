// Package promapi answers the analyzer's queries through the Prometheus HTTP
// API, which Prometheus, Thanos, Mimir and VictoriaMetrics all serve: queries
// are decoded as they arrive (see answer), series listings through
// client_golang's api/prometheus/v1.
package promapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/secret"
)

// Options configure the client.
type Options struct {
	// Timeout bounds one query, both on the server (the timeout parameter)
	// and on the client (the request context). Default 2 minutes.
	Timeout time.Duration
	// RoundTripper for TLS or auth; nil takes api.DefaultRoundTripper.
	RoundTripper http.RoundTripper
	Logger       *slog.Logger
	// AllowWarnings accepts answers that carry warnings. By default they are
	// an error: Thanos and Mimir report partial responses (a store or an
	// ingester missing) as warnings, and a GPU whose series are missing must
	// read as unknown, never as idle.
	AllowWarnings bool
	// Compression asks the server to gzip its answers. Off by default:
	// Prometheus compresses a week of hourly figures for 10,000 GPUs (tens
	// of MB of JSON per query) at a few tens of MB per second of its CPU,
	// more than the transfer saves on any link of a gigabit or faster, and
	// the client spends more again to inflate it. Turn it on for a server
	// reached over a slow link.
	Compression bool
}

// Client queries one Prometheus-compatible endpoint.
type Client struct {
	url     string
	api     v1.API // series listings
	http    *http.Client
	rt      http.RoundTripper
	timeout time.Duration
	logger  *slog.Logger
	allow   bool
	// noRemoteRead is set once the server has said it has no remote read.
	noRemoteRead atomic.Bool
}

var (
	_ query.Querier      = (*Client)(nil)
	_ query.SeriesLister = (*Client)(nil)
)

// New builds a client for the API at url (e.g. http://prometheus:9090).
func New(url string, o Options) (*Client, error) {
	if url == "" {
		return nil, fmt.Errorf("prometheus url is empty")
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("prometheus url %s: want http:// or https://", configfile.URLOrigin(url))
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rt := o.RoundTripper
	if rt == nil {
		rt = api.DefaultRoundTripper
	}
	if !o.Compression {
		rt = identity{rt}
	}
	c, err := api.NewClient(api.Config{Address: url, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client %s: %w", configfile.URLOrigin(url), secret.Error(err))
	}
	return &Client{url: url, api: v1.NewAPI(c), http: &http.Client{Transport: rt}, rt: o.RoundTripper, timeout: o.Timeout, logger: o.Logger, allow: o.AllowWarnings}, nil
}

// identity asks for answers without a content coding: net/http's transport
// asks for gzip unless the request names an encoding itself.
type identity struct{ next http.RoundTripper }

func (t identity) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Accept-Encoding") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Accept-Encoding", "identity")
	}
	return t.next.RoundTrip(r)
}

// Query runs an instant query at ts.
func (c *Client) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	v, err := c.query(ctx, "query", expr, url.Values{"time": {formatTime(ts)}})
	if err != nil {
		return nil, fmt.Errorf("query %s %q: %w", c.url, expr, err)
	}
	return v, nil
}

// QueryRange runs a range query.
func (c *Client) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	v, err := c.query(ctx, "query_range", expr, url.Values{"start": {formatTime(r.Start)}, "end": {formatTime(r.End)},
		"step": {strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64)}})
	if err != nil {
		return nil, fmt.Errorf("range query %s %q: %w", c.url, expr, err)
	}
	return v, nil
}

// query asks endpoint (query or query_range) for expr with the parameters
// in form, as a POST form, or as a GET where the server refuses POST (as
// client_golang does), and decodes the answer as it arrives.
func (c *Client) query(ctx context.Context, endpoint, expr string, form url.Values) (model.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	form.Set("query", expr)
	form.Set("timeout", model.Duration(c.timeout).String())
	u := strings.TrimRight(c.url, "/") + "/api/v1/" + endpoint
	a, err := c.post(ctx, u, form)
	if err != nil {
		return nil, err
	}
	if a.status != "success" {
		return nil, fmt.Errorf("%s: %s", a.errorType, oneLine(a.error))
	}
	if err := c.warn(expr, a.warnings); err != nil {
		return nil, err
	}
	if a.value == nil {
		return nil, errors.New("the answer holds no result")
	}
	return a.value, nil
}

// post sends form to u and decodes the answer.
func (c *Client) post(ctx context.Context, u string, form url.Values) (*answer, error) {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented {
		drain(resp)
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+body, nil); err != nil {
			return nil, err
		}
		if resp, err = c.http.Do(req); err != nil {
			return nil, err
		}
	}
	defer drain(resp)
	r := &limited{r: resp.Body, n: MaxAnswerBytes}
	ok := resp.StatusCode/100 == 2
	if !ok && !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		b, _ := io.ReadAll(io.LimitReader(r, 4<<10))
		return nil, fmt.Errorf("server answered %s: %s", resp.Status, snippet(b))
	}
	a, err := decodeAnswer(r)
	switch {
	case r.over:
		return nil, fmt.Errorf("the answer is larger than %d MiB: narrow the query", MaxAnswerBytes>>20)
	case err != nil && !ok:
		return nil, fmt.Errorf("server answered %s: %w", resp.Status, err)
	case err != nil:
		return nil, err
	case !ok && a.status == "success":
		return nil, fmt.Errorf("server answered %s", resp.Status)
	}
	return a, nil
}

// drain reads what is left of a body (a bounded amount) and closes it, so
// that the connection is kept for the next query.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

// limited is an io.LimitReader that remembers it hit the limit.
type limited struct {
	r    io.Reader
	n    int64
	over bool
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		l.over = true
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// formatTime is a time as the API takes it: seconds since the epoch.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.Unix())+float64(t.Nanosecond())/1e9, 'f', -1, 64)
}

// Series lists the series matching selector with samples in [start, end].
func (c *Client) Series(ctx context.Context, selector string, start, end time.Time) ([]model.LabelSet, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ls, warns, _, err := c.api.Series(ctx, []string{selector}, start, end)
	if err != nil {
		return nil, fmt.Errorf("series %s %q: %w", c.url, selector, err)
	}
	if err := c.warn(selector, warns); err != nil {
		return nil, err
	}
	return ls, nil
}

// warn logs server warnings and, unless allowed, turns them into an error.
func (c *Client) warn(expr string, warns []string) error {
	for _, w := range warns {
		c.logger.Warn("prometheus query warning", "url", c.url, "query", expr, "warning", w)
	}
	if len(warns) > 0 && !c.allow {
		return fmt.Errorf("query %s %q: partial or degraded answer: %s", c.url, expr, strings.Join(warns, "; "))
	}
	return nil
}
