// Package promapi answers the analyzer's queries through the Prometheus HTTP
// API, which Prometheus, Thanos, Mimir and VictoriaMetrics all serve: queries
// and series listings are decoded as they arrive (see answer), counted
// against query.Limits.
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
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
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
	// Limits cap what an answer, and the answers of one cycle, may hold
	// while they are decoded (zero fields take query's defaults).
	Limits query.Limits
}

// Client queries one Prometheus-compatible endpoint.
type Client struct {
	url     string
	http    *http.Client
	rt      http.RoundTripper
	timeout time.Duration
	logger  *slog.Logger
	allow   bool
	limits  query.Limits
	// noRemoteRead is set once the server has said it has no remote read.
	noRemoteRead atomic.Bool
}

var (
	_ query.Querier      = (*Client)(nil)
	_ query.SeriesLister = (*Client)(nil)
	_ query.Streamer     = (*Client)(nil)
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
	return &Client{url: url, http: &http.Client{Transport: rt}, rt: o.RoundTripper, timeout: o.Timeout, logger: o.Logger, allow: o.AllowWarnings,
		limits: o.Limits.WithDefaults()}, nil
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
	v, err := c.query(ctx, "query", expr, instantForm(ts), nil)
	if err != nil {
		return nil, fmt.Errorf("query %s %q: %w", c.url, expr, err)
	}
	return v, nil
}

// QueryRange runs a range query.
func (c *Client) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	v, err := c.query(ctx, "query_range", expr, rangeForm(r), nil)
	if err != nil {
		return nil, fmt.Errorf("range query %s %q: %w", c.url, expr, err)
	}
	return v, nil
}

// QueryStream runs an instant query at ts and hands its samples on one at
// a time, as they are decoded.
func (c *Client) QueryStream(ctx context.Context, expr string, ts time.Time, each func(model.Value) error) error {
	if _, err := c.query(ctx, "query", expr, instantForm(ts), each); err != nil {
		return fmt.Errorf("query %s %q: %w", c.url, expr, err)
	}
	return nil
}

// QueryRangeStream runs a range query and hands its series on one at a
// time, as they are decoded.
func (c *Client) QueryRangeStream(ctx context.Context, expr string, r query.Range, each func(model.Value) error) error {
	if _, err := c.query(ctx, "query_range", expr, rangeForm(r), each); err != nil {
		return fmt.Errorf("range query %s %q: %w", c.url, expr, err)
	}
	return nil
}

func instantForm(ts time.Time) url.Values { return url.Values{"time": {formatTime(ts)}} }

func rangeForm(r query.Range) url.Values {
	return url.Values{"start": {formatTime(r.Start)}, "end": {formatTime(r.End)},
		"step": {strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64)}}
}

// query asks endpoint (query or query_range) for expr with the parameters
// in form, as a POST form, or as a GET where the server refuses POST (as
// client_golang does), and decodes the answer as it arrives, handing it on
// a part at a time to each when each is set. Past a cap of the client's
// Limits it stops reading and returns a *query.CapError naming its flag.
func (c *Client) query(ctx context.Context, endpoint, expr string, form url.Values, each func(model.Value) error) (model.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	form.Set("query", expr)
	form.Set("timeout", model.Duration(c.timeout).String())
	u := strings.TrimRight(c.url, "/") + "/api/v1/" + endpoint
	t := query.NewTally(ctx, c.limits)
	a, err := c.post(ctx, u, form, t, each)
	if err != nil {
		t.Done()
		return nil, err
	}
	if a.status != "success" {
		t.Done()
		return nil, fmt.Errorf("%s: %s", oneLine(a.errorType), a.error)
	}
	if err := c.warn(expr, a.warnings, a.firstWarning); err != nil {
		t.Done()
		return nil, err
	}
	if a.value == nil {
		return nil, errors.New("the answer holds no result")
	}
	return a.value, nil
}

// post sends form to u and decodes the answer.
func (c *Client) post(ctx context.Context, u string, form url.Values, t *query.Tally, each func(model.Value) error) (*answer, error) {
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
	r := &counted{r: resp.Body, n: MaxAnswerBytes}
	ok := resp.StatusCode/100 == 2
	if !ok && !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		b, _ := io.ReadAll(io.LimitReader(r, 4<<10))
		return nil, fmt.Errorf("server answered %s: %s", resp.Status, snippet(b))
	}
	if !ok {
		each = nil // an error's answer holds no result to hand on
	}
	a, err := decodeAnswer(r, t, each)
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

// formatTime is a time as the API takes it: seconds since the epoch.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.Unix())+float64(t.Nanosecond())/1e9, 'f', -1, 64)
}

// Series lists the series matching selector with samples in [start, end],
// counted against the client's Limits as they are decoded.
func (c *Client) Series(ctx context.Context, selector string, start, end time.Time) ([]model.LabelSet, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	form := url.Values{"match[]": {selector}, "start": {formatTime(start)}, "end": {formatTime(end)}}
	t := query.NewTally(ctx, c.limits)
	a, err := c.post(ctx, strings.TrimRight(c.url, "/")+"/api/v1/series", form, t, nil)
	if err == nil && a.status != "success" {
		err = fmt.Errorf("%s: %s", oneLine(a.errorType), a.error)
	}
	if err == nil {
		err = c.warn(selector, a.warnings, a.firstWarning)
	}
	if err != nil {
		t.Done()
		return nil, fmt.Errorf("series %s %q: %w", c.url, selector, err)
	}
	return a.sets, nil
}

// warn logs the server's warnings in one line, with their count and the
// first, and, unless they are allowed, turns them into an error.
func (c *Client) warn(expr string, n int, first string) error {
	if n == 0 {
		return nil
	}
	c.logger.Warn("prometheus query warnings", "url", c.url, "query", expr, "count", n, "first", first)
	if !c.allow {
		return fmt.Errorf("query %s %q: partial or degraded answer: %d warnings, the first: %s", c.url, expr, n, first)
	}
	return nil
}
