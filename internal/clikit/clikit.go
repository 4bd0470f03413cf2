// Package clikit is the command-line plumbing every gpuwatch command
// shares: the flag group flags are added to, the usage error that exits 2,
// the log flags and the check of the web config file before a listener
// starts.
package clikit

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// FlagGroup is a kingpin Application or CmdClause.
type FlagGroup interface {
	Flag(name, help string) *kingpin.FlagClause
}

// UsageError is a problem with flags or configuration files: the command
// exits 2 with its message.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ValidateWebConfig checks --web.config.file (TLS files, bcrypt hashes,
// unknown keys with their line) before a listener starts; every command that
// serves HTTP calls it, so a bad file is an exit 2 everywhere.
func ValidateWebConfig(f *web.FlagConfig) error {
	if f == nil || f.WebConfigFile == nil || *f.WebConfigFile == "" {
		return nil
	}
	// exporter-toolkit reads the file whole and ignores a second document:
	// bound it, refuse a FIFO or device, and refuse a second document first.
	data, err := configfile.ReadFile(*f.WebConfigFile)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("--web.config.file %s: %w", *f.WebConfigFile, err)}
	}
	var doc any
	if _, err := configfile.Decode(*f.WebConfigFile, data, &doc); err != nil {
		return &UsageError{Err: fmt.Errorf("--web.config.file: %w", err)}
	}
	if err := web.Validate(*f.WebConfigFile); err != nil {
		return &UsageError{Err: fmt.Errorf("--web.config.file %s: %w", *f.WebConfigFile, err)}
	}
	return nil
}
