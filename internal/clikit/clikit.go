// Package clikit is the command-line plumbing every gpuwatch command
// shares: the flag group flags are added to, the usage error that exits 2,
// the log flags and the check of the web config file before a listener
// starts.
package clikit

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

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
	var doc map[string]any
	d, err := configfile.Decode(*f.WebConfigFile, data, &doc)
	if err != nil {
		return &UsageError{Err: fmt.Errorf("--web.config.file: %w", err)}
	}
	if err := checkPasswordHashes(d, doc); err != nil {
		return &UsageError{Err: fmt.Errorf("--web.config.file: %w", err)}
	}
	if err := web.Validate(*f.WebConfigFile); err != nil {
		if keys := unknownKeys(*f.WebConfigFile, err); keys != "" {
			return &UsageError{Err: fmt.Errorf("--web.config.file: %s", keys)}
		}
		return &UsageError{Err: fmt.Errorf("--web.config.file %s: %w", *f.WebConfigFile, err)}
	}
	return nil
}

// unknownFieldRE is one line of exporter-toolkit's strict YAML decoder's
// "yaml: unmarshal errors:" list.
var unknownFieldRE = regexp.MustCompile(`line (\d+): field (\S+) not found in type \S+`)

// unknownKeys rewrites the decoder's multi-line list of unknown fields as
// one line of "file:line: key: unknown key" items; "" when err is not that.
func unknownKeys(file string, err error) string {
	var items []string
	for _, m := range unknownFieldRE.FindAllStringSubmatch(err.Error(), -1) {
		items = append(items, fmt.Sprintf("%s:%s: %s: unknown key", file, m[1], m[2]))
	}
	return strings.Join(items, "; ")
}

// htpasswdHint is how to make the bcrypt hash basic_auth_users wants.
const htpasswdHint = `htpasswd -nBC 10 "" | cut -d: -f2` // no backslash: termsafe would double it

// checkPasswordHashes refuses a basic_auth_users value that is not a bcrypt
// hash, with its file:line and how to make one: exporter-toolkit's own
// message for a password written in clear is bcrypt's "hashedSecret too
// short to be a bcrypted password", which says neither. The value itself
// is never repeated, since it is most likely the password.
func checkPasswordHashes(d *configfile.Doc, doc map[string]any) error {
	users, _ := doc["basic_auth_users"].(map[string]any)
	names := make([]string, 0, len(users))
	for name := range users {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs configfile.Errors
	for _, name := range names {
		v, _ := users[name].(string)
		if _, err := bcrypt.Cost([]byte(v)); err != nil {
			errs = append(errs, d.Errorf("basic_auth_users."+name,
				"not a bcrypt hash: the value must be the hash of the password, never the password itself; make one with "+htpasswdHint))
		}
	}
	return errs.Err()
}
