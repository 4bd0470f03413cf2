// Package server serves the exporter over HTTP: /metrics (the latest
// collection, copied from memory), /healthz (200 while collections are fresh,
// 503 with the reason when stale) and / (a landing page listing the devices
// and the telemetry sources each has). internal/serve runs it.
package server

import (
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

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
		body := e.Text
		if AcceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body = e.Gzipped()
		}
		// With its length known, net/http sends the body as it is, not in
		// chunks, and the client can size its buffer.
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
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
