// Package quickstart is the end-to-end test of docs/quickstart.md's
// Prometheus: a real Prometheus (on PATH) runs the quickstart's scrape config
// and rule files against `gpuwatch-exporter --source=sim` and two
// `gpuwatch-analyzer analyzer` daemons, one as the quickstart starts it and
// one behind the web config the quickstart shows, scraped with the password
// job it shows; then every query of every dashboard panel must return data,
// but for an explicit, justified allow-list. It takes about two minutes.
package quickstart
