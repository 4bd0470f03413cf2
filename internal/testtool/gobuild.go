package testtool

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the import paths pkg builds from (go list -deps), so a test
// can hold a binary to the dependencies it is meant to have.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// Forbidden returns the entries of deps that start with any of prefixes.
func Forbidden(deps []string, prefixes ...string) []string {
	var bad []string
	for _, d := range deps {
		for _, p := range prefixes {
			if strings.HasPrefix(d, p) {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}
