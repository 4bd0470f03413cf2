// Package server serves the exporter over HTTP: /metrics (the latest
// collection, copied from memory), /healthz (200 while collections are fresh,
// 503 with the reason when stale) and / (a landing page listing the devices
// and the telemetry sources each has). TLS and basic auth come from
// exporter-toolkit's web config.
package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/net/netutil"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
)

// ContentType is the Prometheus text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler builds the exporter's HTTP handler.
func Handler(c *collector.Collector, version string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", MetricsHandler(c))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ok, reason := c.Health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(reason + "\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		landing(w, c, version)
	})
	return mux
}

// MetricsHandler serves the latest exposition. It never collects.
func MetricsHandler(c *collector.Collector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := c.Latest()
		if e == nil {
			_, reason := c.Health()
			http.Error(w, "no collection yet: "+reason, http.StatusServiceUnavailable)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Add("Vary", "Accept-Encoding")
		if AcceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			_, _ = w.Write(e.Gzipped())
			return
		}
		_, _ = w.Write(e.Text)
	})
}

// AcceptsGzip reads Accept-Encoding (RFC 9110 12.5.3): gzip is acceptable
// when it is listed with a q-value above zero, or when * is and gzip is not
// refused by name. "gzip;q=0" means "never gzip".
func AcceptsGzip(values []string) bool {
	gzip, star := -1.0, -1.0
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
					if err != nil || f < 0 || f > 1 {
						f = 0
					}
					q = f
				}
			}
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip", "x-gzip":
				gzip = max(gzip, q)
			case "*":
				star = max(star, q)
			}
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0
}

var landingTmpl = template.Must(template.New("landing").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>gpuwatch exporter</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style>
</head><body>
<h1>gpuwatch exporter</h1>
<p>Version {{.Version}}. <a href="/metrics">Metrics</a> · <a href="/healthz">Health</a>: {{.Health}}</p>
{{if .Time}}<p>Last collection {{.Time}} from source <b>{{.Source}}</b> on host <b>{{.Hostname}}</b>.</p>{{end}}
<table><tr><th>gpu</th><th>UUID</th><th>model</th><th>MIG</th><th>up</th><th>telemetry sources</th></tr>
{{range .Devices}}<tr><td>{{.Index}}</td><td>{{.UUID}}</td><td>{{.Model}}</td><td>{{if .MIG}}{{.MIG.Profile}} (GI {{.MIG.GIID}}){{end}}</td><td>{{.Up}}</td><td>{{range $i, $c := .Capabilities}}{{if $i}}, {{end}}{{$c}}{{end}}</td></tr>
{{end}}</table>
</body></html>
`))

func landing(w http.ResponseWriter, c *collector.Collector, version string) {
	_, health := c.Health()
	data := map[string]any{"Version": version, "Health": health}
	if e := c.Latest(); e != nil {
		data["Time"] = e.Time.UTC().Format(time.RFC3339)
		data["Hostname"] = e.Snapshot.Hostname
		data["Devices"] = e.Snapshot.Devices
		data["Source"] = e.Source
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = landingTmpl.Execute(w, data)
}

// Limits bound what clients can hold of a listener: a slow or idle client
// is cut off by the timeouts, and past MaxConnections a listener accepts no
// more until one closes (the kernel queues the rest), so a flood of slow
// connections cannot exhaust file descriptors or memory.
type Limits struct {
	ReadHeaderTimeout time.Duration // request line and headers
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // a keep-alive connection between requests
	MaxConnections    int           // open connections per listener
}

// DefaultLimits serve every gpuwatch listener. A scrape of a large node is
// written in well under a second; 512 connections is Prometheus' own
// default for --web.max-connections.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      60 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxConnections:    512,
}

// Serve runs the HTTP server with exporter-toolkit's flags (listen addresses,
// systemd socket activation, web config for TLS and basic auth) until ctx
// ends, every listener bounded by DefaultLimits.
func Serve(ctx context.Context, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	ls, err := listen(flags, logger)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	return serveLimited(ctx, ls, h, flags, logger, DefaultLimits)
}

// ServeListener is Serve on a listener the caller opened (tests, the demo):
// TLS and basic auth still come from the web config in flags.
func ServeListener(ctx context.Context, l net.Listener, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	return serveLimited(ctx, []net.Listener{l}, h, flags, logger, DefaultLimits)
}

func serveLimited(ctx context.Context, ls []net.Listener, h http.Handler, flags *web.FlagConfig, logger *slog.Logger, lim Limits) error {
	limited := make([]net.Listener, len(ls))
	for i, l := range ls {
		limited[i] = netutil.LimitListener(l, lim.MaxConnections)
	}
	return serve(ctx, h, logger, lim, func(srv *http.Server) error { return web.ServeMultiple(limited, srv, flags, logger) })
}

// listen opens the listeners exporter-toolkit's ListenAndServe would: the
// systemd-activated ones, or one per --web.listen-address (TCP or vsock://).
// They are opened here so that each can be bounded.
func listen(flags *web.FlagConfig, logger *slog.Logger) ([]net.Listener, error) {
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		ls, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return nil, errors.New("no socket activation file descriptors found")
		}
		return ls, nil
	}
	if flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 {
		return nil, errors.New("no --web.listen-address given")
	}
	var ls []net.Listener
	for _, addr := range *flags.WebListenAddresses {
		var l net.Listener
		var err error
		if rest, ok := strings.CutPrefix(addr, "vsock://"); ok {
			var port uint64
			if _, p, perr := net.SplitHostPort(rest); perr != nil {
				err = perr
			} else if port, err = strconv.ParseUint(p, 10, 32); err == nil {
				l, err = vsock.Listen(uint32(port), nil)
			}
		} else {
			l, err = net.Listen("tcp", addr)
		}
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func serve(ctx context.Context, h http.Handler, logger *slog.Logger, lim Limits, run func(*http.Server) error) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- run(srv) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
