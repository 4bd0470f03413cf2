package analyzercmd

import (
	"errors"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// storageURLEnv lets the chart pass the database URL, password and all,
// from a Secret instead of the command line.
const storageURLEnv = "GPUWATCH_STORAGE_URL"

const storageURLHelp = "The state database as a URL: postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=... (PostgreSQL, shared by replicas) instead of the SQLite file of --storage.path, which it overrides; also read from $" + storageURLEnv + "."

// storageTarget is what store.OpenURL opens: the URL when given, else the
// SQLite file.
func storageTarget(path, url string) (string, error) {
	if url == "" {
		return path, nil
	}
	if !store.IsPostgresURL(url) {
		return "", &clikit.UsageError{Err: errors.New("--storage.url: want postgres:// or postgresql://; a SQLite file goes in --storage.path")}
	}
	return url, nil
}
