// Package promapi answers the analyzer's queries through the Prometheus HTTP
// API (client_golang api/prometheus/v1), which Prometheus, Thanos, Mimir and
// VictoriaMetrics all serve.
package promapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
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
}

// Client queries one Prometheus-compatible endpoint.
type Client struct {
	url     string
	api     v1.API
	rt      http.RoundTripper
	timeout time.Duration
	logger  *slog.Logger
	allow   bool
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
		return nil, fmt.Errorf("prometheus url %q: want http:// or https://", url)
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := api.NewClient(api.Config{Address: url, RoundTripper: o.RoundTripper})
	if err != nil {
		return nil, fmt.Errorf("prometheus client %s: %w", url, err)
	}
	return &Client{url: url, api: v1.NewAPI(c), rt: o.RoundTripper, timeout: o.Timeout, logger: o.Logger, allow: o.AllowWarnings}, nil
}

// Query runs an instant query at ts.
func (c *Client) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, warns, _, err := c.api.Query(ctx, expr, ts, v1.WithTimeout(c.timeout))
	if err != nil {
		return nil, fmt.Errorf("query %s %q: %w", c.url, expr, err)
	}
	if err := c.warn(expr, warns); err != nil {
		return nil, err
	}
	return v, nil
}

// QueryRange runs a range query.
func (c *Client) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, warns, _, err := c.api.QueryRange(ctx, expr, v1.Range{Start: r.Start, End: r.End, Step: r.Step}, v1.WithTimeout(c.timeout))
	if err != nil {
		return nil, fmt.Errorf("range query %s %q: %w", c.url, expr, err)
	}
	if err := c.warn(expr, warns); err != nil {
		return nil, err
	}
	return v, nil
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
func (c *Client) warn(expr string, warns v1.Warnings) error {
	for _, w := range warns {
		c.logger.Warn("prometheus query warning", "url", c.url, "query", expr, "warning", w)
	}
	if len(warns) > 0 && !c.allow {
		return fmt.Errorf("query %s %q: partial or degraded answer: %s", c.url, expr, strings.Join(warns, "; "))
	}
	return nil
}
