package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// bcryptRE is a bcrypt hash as htpasswd and exporter-toolkit write it.
var bcryptRE = regexp.MustCompile(`\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53}`)

// guessable are passwords an example would use; a hash of one in a shipped
// file is a working credential for anyone who read the repository.
var guessable = []string{"change-me", "changeme", "password", "secret", "test", "admin", "prometheus", "gpuwatch", "example"}

// TestNoWorkingCredentials: no deployable file (deploy/, build/, scripts/)
// holds a bcrypt hash at all, so every install sets a password of its own;
// and no file anywhere, docs included, holds a hash of a guessable password.
func TestNoWorkingCredentials(t *testing.T) {
	// A hash found in several files is tried once: bcrypt is slow by design.
	guessed := map[string]string{} // hash -> the guessable password it hashes, or ""
	guess := func(h string) string {
		if p, ok := guessed[h]; ok {
			return p
		}
		guessed[h] = ""
		for _, p := range guessable {
			if bcrypt.CompareHashAndPassword([]byte(h), []byte(p)) == nil {
				guessed[h] = p
				break
			}
		}
		return guessed[h]
	}
	for _, f := range files(t) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range bcryptRE.FindAllString(string(b), -1) {
			if strings.HasPrefix(f, "deploy/") || strings.HasPrefix(f, "build/") || strings.HasPrefix(f, "scripts/") {
				t.Errorf("%s ships the bcrypt hash %s: leave a placeholder the operator replaces", f, h)
				continue
			}
			if p := guess(h); p != "" {
				t.Errorf("%s holds a hash of the password %q", f, p)
			}
		}
	}
}
