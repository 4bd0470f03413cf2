package testkube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A KUBECONFIG outside start.sh's folder (a developer's own cluster) is
// never used, and neither is a folder without a KUBECONFIG.
func TestConfigRefusesOtherClusters(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(other, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, kc, want string }{
		{dir, other, "refusing to test on it"},
		{dir, "", "not both set"},
		{"", other, "not both set"},
	} {
		t.Setenv(EnvDir, c.dir)
		t.Setenv("KUBECONFIG", c.kc)
		if _, err := config(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dir %q KUBECONFIG %q: %v, want %q", c.dir, c.kc, err, c.want)
		}
	}
}
