package testtool

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// BinDirEnv names a folder holding the repository's commands, built once
// per CI run (scripts/test.sh): tests run those instead of building them
// again, package by package.
const BinDirEnv = "GPUWATCH_BIN_DIR"

// rootModule is the module whose commands Binary builds.
const rootModule = "github.com/gpuwatch/gpuwatch"

var (
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

// Binary returns the path of the repository's command cmd ("cmd/gpuwatch"):
// the one in $GPUWATCH_BIN_DIR when set, else built once per test process
// from the repository's root module, whichever module the test is in.
func Binary(t testing.TB, cmd string) string {
	t.Helper()
	name := path.Base(cmd)
	if dir := os.Getenv(BinDirEnv); dir != "" {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is set but holds no %s: %v", BinDirEnv, name, err)
		}
		return bin
	}
	binMu.Lock()
	defer binMu.Unlock()
	if bin, ok := binBuilt[cmd]; ok {
		return bin
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gpuwatch-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	// -buildvcs=auto: the revision stamp even where GOFLAGS turns it off.
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "./"+cmd)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./%s: %v\n%s", cmd, err, out)
	}
	binBuilt[cmd] = bin
	return bin
}

// repoRoot is the folder of the root module's go.mod, above the test's
// working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+rootModule+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", rootModule)
		}
		dir = parent
	}
}
