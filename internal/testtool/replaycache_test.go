package testtool

import (
	"os"
	"path/filepath"
	"testing"
)

// A replay is built once per set of inputs: the second call with the same
// inputs is served from the cache (the same files, writable), a change in
// what generates it builds anew, only the two most recent entries are kept,
// and "off" always builds.
func TestCachedReplay(t *testing.T) {
	root := t.TempDir()
	t.Setenv(ReplayCacheEnv, root)
	builds := 0
	build := func(dir string) error {
		builds++
		return os.WriteFile(filepath.Join(dir, "store"), []byte("replayed"), 0o600)
	}
	r := Replay{Name: "unit", Packages: []string{"github.com/gpuwatch/gpuwatch/schema"}, Extra: "seed 1"}
	for i, want := range []struct {
		cached bool
		builds int
	}{{false, 1}, {true, 1}} {
		dir := t.TempDir()
		cached, err := CachedReplay(t, r, dir, build)
		if err != nil {
			t.Fatal(err)
		}
		if cached != want.cached || builds != want.builds {
			t.Fatalf("call %d: cached %v after %d builds, want %v after %d", i, cached, builds, want.cached, want.builds)
		}
		b, err := os.ReadFile(filepath.Join(dir, "store"))
		if err != nil || string(b) != "replayed" {
			t.Fatalf("call %d: store %q %v", i, b, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "store"), []byte("written by a test"), 0o600); err != nil {
			t.Fatal(err) // the copy is the caller's to write
		}
	}
	for _, extra := range []string{"seed 2", "seed 3"} {
		r.Extra = extra
		if cached, err := CachedReplay(t, r, t.TempDir(), build); err != nil || cached {
			t.Fatalf("%s: cached %v, err %v; want a new build", extra, cached, err)
		}
	}
	if builds != 3 {
		t.Errorf("%d builds, want 3", builds)
	}
	ents, _ := os.ReadDir(root)
	if len(ents) != keepReplays {
		t.Errorf("%d cache entries, want %d", len(ents), keepReplays)
	}
	t.Setenv(ReplayCacheEnv, "off")
	if cached, err := CachedReplay(t, r, t.TempDir(), build); err != nil || cached || builds != 4 {
		t.Errorf("off: cached %v err %v builds %d; want a build", cached, err, builds)
	}
}

// The key names a checkout's files by their path within it: two clones of
// the same code in different folders share entries (CI clones anew for
// every run, and a cache that missed on every clone would never serve),
// and a change in either's code still makes a new key.
func TestReplayKeyIgnoresCloneLocation(t *testing.T) {
	clone := func() string {
		root := t.TempDir()
		for name, body := range map[string]string{
			"go.mod":          "module " + rootModule + "\n\ngo 1.22\n",
			"go.sum":          "",
			"sim/sim.go":      "package sim\n\nconst Seed = 1\n",
			"scenario.yaml":   "nodes: 2\n",
			"sim/sim_test.go": "package sim\n",
		} {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	a, b := clone(), clone()
	r := Replay{Name: "unit", Packages: []string{rootModule + "/sim"}, Files: []string{"scenario.yaml"}, Extra: "seed 1"}
	key := func(root string) string {
		t.Helper()
		k, err := replayKeyAt(root, r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	ka, kb := key(a), key(b)
	if ka != kb {
		t.Errorf("two clones of the same code: keys %s and %s", ka[:12], kb[:12])
	}
	prev := kb
	for _, f := range []string{"sim/sim.go", "scenario.yaml"} {
		if err := os.WriteFile(filepath.Join(b, f), []byte("package sim\n\nconst Seed = 2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		k := key(b)
		if k == prev {
			t.Errorf("%s changed in one clone: the same key %s", f, k[:12])
		}
		prev = k
	}
}
