package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

// openQuerier opens the telemetry source of the one-shot commands: a
// Prometheus-compatible API, or the embedded store of a stopped agent.
func openQuerier(promURL, storage string, timeout time.Duration, logger *slog.Logger) (query.Querier, func(), error) {
	if (promURL == "") == (storage == "") {
		return nil, nil, &cli.UsageError{Err: errors.New("set exactly one of --prometheus.url and --storage.path")}
	}
	if promURL != "" {
		c, err := promapi.New(promURL, promapi.Options{Timeout: timeout, Logger: logger})
		if err != nil {
			return nil, nil, &cli.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
		}
		return c, func() {}, nil
	}
	if _, err := os.Stat(storage); err != nil {
		return nil, nil, &cli.UsageError{Err: fmt.Errorf("--storage.path: %w", err)}
	}
	// Accept the agent's --storage.path as well as its tsdb folder.
	if fi, err := os.Stat(filepath.Join(storage, "tsdb")); err == nil && fi.IsDir() {
		storage = filepath.Join(storage, "tsdb")
	}
	db, err := embedded.Open(storage, embedded.Options{Timeout: timeout, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is a gpuwatch agent holding it? query its data through Prometheus instead)", err)
	}
	return db, func() { db.Close() }, nil
}
