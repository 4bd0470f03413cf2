// Package testpg gives tests a real PostgreSQL database of their own: a
// fresh database on the server test/postgres/start.sh runs on loopback
// (Debian's postgresql), dropped when the test ends. It reads the server's
// URL from GPUWATCH_TEST_POSTGRES_URL (scripts/test.sh exports it), and
// without it starts the server itself through start.sh. Where PostgreSQL
// is not installed the test is skipped, and fails under CI=true.
package testpg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// EnvURL names the variable that holds the server's URL.
const EnvURL = "GPUWATCH_TEST_POSTGRES_URL"

var (
	once      sync.Once
	serverURL string
	startErr  error
)

// URL returns the URL of a new, empty database, dropped at the test's end.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() { serverURL, startErr = server() })
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true: %v", startErr)
		}
		t.Skipf("no PostgreSQL (install the Debian package postgresql): %v", startErr)
	}
	admin, err := openDB(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gwtest_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := openDB(serverURL)
		if err != nil {
			return
		}
		defer admin.Close()
		admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`) //nolint:errcheck // best effort
	})
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func openDB(u string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

// server returns the running server's URL, starting one with start.sh
// (under a lock, as test packages run in parallel) when none is given.
func server() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, ping(u)
	}
	script, err := startScript()
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "gpuwatch-postgres.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	out, err := exec.Command("sh", script).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("%s: %s", script, msg)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "export "+EnvURL+"="); ok {
			u := strings.Trim(v, "'")
			return u, ping(u)
		}
	}
	return "", fmt.Errorf("%s printed no %s", script, EnvURL)
}

func ping(u string) error {
	db, err := openDB(u)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// startScript finds test/postgres/start.sh above the test's folder.
func startScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "test", "postgres", "start.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("test/postgres/start.sh not found above the test")
		}
		dir = parent
	}
}
