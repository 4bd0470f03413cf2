// Package server serves the exporter over HTTP: /metrics (the latest
// collection, copied from memory), /healthz (200 while collections are fresh,
// 503 with the reason when stale) and / (a landing page listing the devices
// and the telemetry sources each has). TLS and basic auth come from
// exporter-toolkit's web config.
package server

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

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
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			_, _ = w.Write(e.Gzipped())
			return
		}
		_, _ = w.Write(e.Text)
	})
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

// Serve runs the HTTP server with exporter-toolkit's flags (listen addresses,
// web config for TLS and basic auth) until ctx ends.
func Serve(ctx context.Context, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	return serve(ctx, h, logger, func(srv *http.Server) error { return web.ListenAndServe(srv, flags, logger) })
}

// ServeListener is Serve on a listener the caller opened (tests, socket
// activation): TLS and basic auth still come from the web config in flags.
func ServeListener(ctx context.Context, l net.Listener, h http.Handler, flags *web.FlagConfig, logger *slog.Logger) error {
	return serve(ctx, h, logger, func(srv *http.Server) error { return web.Serve(l, srv, flags, logger) })
}

func serve(ctx context.Context, h http.Handler, logger *slog.Logger, run func(*http.Server) error) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
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
