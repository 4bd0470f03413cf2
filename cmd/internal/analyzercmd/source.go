package analyzercmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// tsdbPathHelp is --tsdb.path's help where it is read: the folder the agent
// writes, or the data folder above it, which is what an operator has at hand.
const tsdbPathHelp = "Folder of an embedded telemetry store to read instead of Prometheus: the --tsdb.path of `gpuwatch agent`, " +
	"or a folder holding it as tsdb/ (the agent's data folder, the demo's --out). Not the state database, which is --storage.path."

// SourceFlags say where telemetry is read: --prometheus.url, or --tsdb.path
// in a binary with the embedded store.
type SourceFlags struct {
	command, promURL, tsdb, stateDB string
	openStore                       OpenStore
}

// RegisterSourceFlags adds --prometheus.url and, when open is not nil,
// --tsdb.path to cmd. --storage.path is the state database in every
// command; these commands read none, and it once named the telemetry folder
// here, so it stays as a hidden flag whose use says where that went.
func RegisterSourceFlags(cmd *kingpin.CmdClause, open OpenStore) *SourceFlags {
	s := &SourceFlags{command: cmd.FullCommand(), openStore: open}
	cmd.Flag("prometheus.url", "Prometheus-compatible API to read telemetry from (Prometheus, Thanos, Mimir, VictoriaMetrics).").StringVar(&s.promURL)
	tsdb := cmd.Flag("tsdb.path", tsdbPathHelp)
	if open == nil {
		tsdb = tsdb.Hidden() // only for its message: this binary has no embedded store
	}
	tsdb.StringVar(&s.tsdb)
	cmd.Flag("storage.path", "Not read here: the state database of analyzer, report and audit.").Hidden().StringVar(&s.stateDB)
	return s
}

// OpenUnchecked is the querier without the first query to Prometheus: for
// `gpuwatch job`, for which a Prometheus that is away is a case it handles
// (the summary in AdminComment, or a note with --summary), not a wrong flag.
func (s *SourceFlags) OpenUnchecked(logger *slog.Logger, timeout time.Duration) (query.Querier, func(), error) {
	return s.open(logger, timeout, query.Limits{}, false)
}

// check refuses the flags that name no source, or the wrong kind of one,
// each with the flag that fixes it.
func (s *SourceFlags) check() error {
	switch {
	case s.stateDB != "" && s.openStore == nil:
		return &clikit.UsageError{Err: fmt.Errorf("--storage.path names the state database (a SQLite file for analyzer, report and audit); %s reads telemetry from --prometheus.url", s.command)}
	case s.stateDB != "":
		return &clikit.UsageError{Err: fmt.Errorf("--storage.path names the state database (a SQLite file for analyzer, report and audit); %s reads an embedded telemetry store from --tsdb.path=%s", s.command, s.stateDB)}
	case s.tsdb != "" && s.openStore == nil:
		return &clikit.UsageError{Err: errors.New("--tsdb.path: this binary has no embedded telemetry store; give --prometheus.url, or run `gpuwatch " + s.command + " --tsdb.path=...`")}
	case s.openStore == nil && s.promURL == "":
		return &clikit.UsageError{Err: errors.New("--prometheus.url is required")}
	case (s.promURL == "") == (s.tsdb == ""):
		return &clikit.UsageError{Err: errors.New("set exactly one of --prometheus.url and --tsdb.path")}
	}
	return nil
}

func (s *SourceFlags) open(logger *slog.Logger, timeout time.Duration, lim query.Limits, ping bool) (query.Querier, func(), error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	if s.promURL != "" {
		return openPrometheus(logger, s.promURL, timeout, lim, ping)
	}
	dir, err := TSDBDir(s.tsdb, true)
	if err != nil {
		return nil, nil, err
	}
	db, closer, err := s.openStore(dir, timeout, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is a gpuwatch agent holding it? query its data through Prometheus instead)", err)
	}
	return db, func() { closer.Close() }, nil
}

// openPrometheus is the Prometheus API client at url; with ping, one trivial
// query first, so that a wrong URL is one line naming the flag, the URL and
// the cause, not a failed analysis query.
func openPrometheus(logger *slog.Logger, url string, timeout time.Duration, lim query.Limits, ping bool) (query.Querier, func(), error) {
	c, err := promapi.New(url, promapi.Options{Timeout: timeout, Logger: logger, Limits: lim})
	if err != nil {
		return nil, nil, &clikit.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
	}
	if !ping {
		return c, func() {}, nil
	}
	if err := c.Ping(context.Background()); err != nil {
		err = fmt.Errorf("--prometheus.url: %w", err)
		var pe *promapi.PingError
		if errors.As(err, &pe) && pe.Answered {
			return nil, nil, &clikit.UsageError{Err: err}
		}
		return nil, nil, err
	}
	return c, func() {}, nil
}

// TSDBDir is the embedded store's folder that --tsdb.path path names: path
// itself, or path/tsdb when path is a data folder holding one (the agent's
// default layout, the demo's --out). A file is refused with what it
// probably is: a state database given where telemetry was meant. A path
// that does not exist is an error when mustExist (a reader), else the
// folder to create (the agent).
func TSDBDir(path string, mustExist bool) (string, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil && (mustExist || !errors.Is(err, fs.ErrNotExist)):
		return "", &clikit.UsageError{Err: fmt.Errorf("--tsdb.path: %w", err)}
	case err != nil:
		return path, nil
	}
	if !fi.IsDir() {
		if isSQLite(path) {
			return "", &clikit.UsageError{Err: fmt.Errorf("--tsdb.path %s is a SQLite file, a state database: that goes in --storage.path; --tsdb.path is the embedded telemetry store's folder (the agent's tsdb/, or the demo's --out folder)", path)}
		}
		return "", &clikit.UsageError{Err: fmt.Errorf("--tsdb.path %s is a file; it must be the embedded telemetry store's folder (the agent's tsdb/, or the demo's --out folder)", path)}
	}
	if fi, err := os.Stat(filepath.Join(path, "tsdb")); err == nil && fi.IsDir() {
		return filepath.Join(path, "tsdb"), nil
	}
	return path, nil
}

// sqliteMagic opens every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// isSQLite reports whether the file at path starts as a SQLite database.
func isSQLite(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return bytes.Equal(head, sqliteMagic)
}
