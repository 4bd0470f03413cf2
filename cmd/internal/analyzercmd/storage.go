package analyzercmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/secret"
)

// storageURLEnv lets the chart pass the database URL, password and all,
// from a Secret instead of the command line.
const storageURLEnv = "GPUWATCH_STORAGE_URL"

const storageURLHelp = "The state database as a URL: postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=... (PostgreSQL, shared by replicas) instead of the SQLite file of --storage.path, which it overrides; also read from $" + storageURLEnv + " or --storage.url-file, which keep the password out of the process list."

const storageURLFileHelp = "File holding --storage.url (one line, mode 0600 or a root-owned 0640): the password never appears in the process list."

// storageFlags are --storage.path, --storage.url and --storage.url-file.
type storageFlags struct {
	Path, URL, URLFile string
	urlOnArgs          bool
}

// registerStorageFlags adds the storage flags to cmd; urlExtra is added to
// --storage.url's help.
func registerStorageFlags(cmd *kingpin.CmdClause, pathHelp, urlExtra string) *storageFlags {
	s := &storageFlags{}
	cmd.Flag("storage.path", pathHelp).Default("gpuwatch.db").StringVar(&s.Path)
	cmd.Flag("storage.url", storageURLHelp+urlExtra).Envar(storageURLEnv).IsSetByUser(&s.urlOnArgs).StringVar(&s.URL)
	cmd.Flag("storage.url-file", storageURLFileHelp).StringVar(&s.URLFile)
	return s
}

// target is what store.OpenURL opens: the URL when one is given (by flag,
// environment or file), else the SQLite file, which must exist when
// mustExist. The URL's password is taught to the process-wide redaction,
// and a password given on the command line is warned about once.
func (s *storageFlags) target(logger *slog.Logger, mustExist bool) (string, error) {
	if s.URLFile != "" {
		if s.urlOnArgs {
			return "", &clikit.UsageError{Err: errors.New("--storage.url and --storage.url-file: give one")}
		}
		v, err := secret.ReadFile(s.URLFile, nil)
		if err != nil {
			return "", &clikit.UsageError{Err: fmt.Errorf("--storage.url-file: %w", err)}
		}
		s.URL = v
	}
	if s.URL == "" {
		fi, err := os.Stat(s.Path)
		switch {
		case err != nil && mustExist:
			return "", &clikit.UsageError{Err: fmt.Errorf("--storage.path: %w", err)}
		case err == nil && fi.IsDir():
			return "", &clikit.UsageError{Err: folderGivenAsStateDB(s.Path)}
		}
		return s.Path, nil
	}
	pw := registerPassword(s.URL)
	if !store.IsPostgresURL(s.URL) {
		return "", &clikit.UsageError{Err: errors.New("--storage.url: want postgres:// or postgresql://; a SQLite file goes in --storage.path")}
	}
	if pw && s.urlOnArgs && logger != nil {
		logger.Warn("--storage.url holds a password, which every user of this host can read in the process list: give it through $" + storageURLEnv + " or --storage.url-file")
	}
	return s.URL, nil
}

// folderGivenAsStateDB is the error for a folder where the state database
// (a SQLite file) belongs: most often the agent's or the demo's data
// folder, which holds the database (named when it is there) and the
// embedded telemetry store.
func folderGivenAsStateDB(dir string) error {
	hint := ""
	if db := filepath.Join(dir, stateDBName); isSQLite(db) {
		hint = fmt.Sprintf(" (here: --storage.path=%s)", db)
	}
	return fmt.Errorf("--storage.path %s is a folder; it names the state database, a SQLite file%s; the embedded telemetry store goes in --tsdb.path", dir, hint)
}

// CheckStatePath refuses a folder as --storage.path, for a command that
// opens the state database itself (the agent).
func CheckStatePath(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return &clikit.UsageError{Err: folderGivenAsStateDB(path)}
	}
	return nil
}

// stateDBName is the state database's file name in the agent's and the
// demo's data folders.
const stateDBName = "gpuwatch.db"

// registerPassword teaches the redaction the password of u (and u itself,
// for a URL too malformed to parse) and reports whether it had one.
func registerPassword(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		secret.Register(u)
		return true
	}
	if pw, ok := p.User.Password(); ok && pw != "" {
		secret.Register(pw, url.PathEscape(pw), url.QueryEscape(pw))
		return true
	}
	if pw := p.Query().Get("password"); pw != "" {
		secret.Register(pw)
		return true
	}
	return false
}
