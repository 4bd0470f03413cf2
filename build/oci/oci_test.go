package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

var info = BuildInfo{Version: "v0.0.0-test", Revision: "0123456789abcdef", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Arch: runtime.GOARCH}

// buildAndReload writes the image to an OCI layout and reads it back, as a
// registry push or `skopeo copy oci:DIR` would.
func buildAndReload(t *testing.T, s Spec, ref string) v1.Image {
	t.Helper()
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, ref, img); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index %+v: %v", im, err)
	}
	if got := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != ref {
		t.Errorf("ref name %q, want %q", got, ref)
	}
	back, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := back.Digest()
	if d1 != d2 {
		t.Fatalf("digest %s read back as %s", d1, d2)
	}
	return back
}

func checkConfig(t *testing.T, img v1.Image, s Spec) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !reflect.DeepEqual(c.Entrypoint, s.Entrypoint) || !reflect.DeepEqual(c.Cmd, s.Cmd) {
		t.Errorf("entrypoint %q cmd %q, want %q %q", c.Entrypoint, c.Cmd, s.Entrypoint, s.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the non-root 65532:65532", c.User)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(info.Created) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	for _, k := range []string{"title", "version", "revision", "created", "source", "description"} {
		if c.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("no org.opencontainers.image.%s label (have %v)", k, c.Labels)
		}
	}
	if c.Labels["org.opencontainers.image.version"] != info.Version || c.Labels["org.opencontainers.image.revision"] != info.Revision {
		t.Errorf("labels %v do not name version %s and revision %s", c.Labels, info.Version, info.Revision)
	}
	return cf
}

// unpack extracts the image's file system into dir, keeping modes and owners.
func unpack(t *testing.T, img v1.Image, dir string) map[string]bool {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		seen["/"+strings.TrimSuffix(h.Name, "/")] = true
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, os.FileMode(h.Mode&0o777)|modeBits(h.Mode)); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seen
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// runAsImage starts the entrypoint the way a container runtime would: the
// image's file system as root (chroot), its user, its environment, its
// entrypoint and default arguments (or args in their place).
func runAsImage(t *testing.T, root string, cf *v1.ConfigFile, args []string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		testtool.Missing(t, "running an image's entrypoint needs root (chroot); scripts/test.sh runs as root")
	}
	argv := append(append([]string{}, cf.Config.Entrypoint...), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	// exec.Command looked argv[0] up on this machine; the runtime finds it in the image.
	cmd.Path = argv[0]
	cmd.Dir = "/"
	cmd.Env = cf.Config.Env
	var uid, gid uint32
	if _, err := fmt.Sscanf(cf.Config.User, "%d:%d", &uid, &gid); err != nil {
		t.Fatalf("user %q: %v", cf.Config.User, err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v in the image: %v", argv, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("output of %v:\n%s", argv, out.String())
		}
	})
	return cmd
}

// get polls url until it answers 200 and returns the body.
func get(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered 200 (last error %v)", url, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestExporterImage builds the exporter image, checks its configuration and
// files, and runs its entrypoint inside its own file system as its own user:
// a simulated node answers /metrics, so the binary and every library it needs
// are in the image.
func TestExporterImage(t *testing.T) {
	bin := testtool.Binary(t, "cmd/gpuwatch-exporter")
	s := ExporterImage(bin, info)
	img := buildAndReload(t, s, "ghcr.io/gpuwatch/gpuwatch-exporter:"+info.Version)
	cf := checkConfig(t, img, s)
	if _, ok := cf.Config.ExposedPorts["9400/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 9400/tcp", cf.Config.ExposedPorts)
	}
	root := t.TempDir()
	files := unpack(t, img, root)
	libs, err := SharedLibraries(bin)
	if err != nil || len(libs) == 0 {
		t.Fatalf("shared libraries of a cgo binary: %v %v", libs, err)
	}
	for _, f := range append(libs, "/usr/bin/gpuwatch-exporter", "/etc/passwd", "/tmp") {
		if !files[f] {
			t.Errorf("%s is not in the image", f)
		}
	}
	addr := testtool.FreeAddr(t)
	runAsImage(t, root, cf, []string{"--source=sim", "--web.listen-address=" + addr})
	body := get(t, "http://"+addr+"/metrics")
	if !strings.Contains(body, "DCGM_FI_DEV_GPU_UTIL{") {
		t.Fatalf("/metrics from the image has no GPU utilisation:\n%.2000s", body)
	}
}

// TestAnalyzerImage: the analyzer's image starts with its default arguments
// (the dry-run policy it carries, its state in /var/lib/gpuwatch owned by
// its user) and serves its own /metrics while Prometheus is unreachable.
func TestAnalyzerImage(t *testing.T) {
	bin := testtool.Binary(t, "cmd/gpuwatch-analyzer")
	s := AnalyzerImage(bin, "../..", info)
	img := buildAndReload(t, s, "ghcr.io/gpuwatch/gpuwatch-analyzer:"+info.Version)
	cf := checkConfig(t, img, s)
	root := t.TempDir()
	unpack(t, img, root)
	addr := testtool.FreeAddr(t)
	runAsImage(t, root, cf, append(append([]string{}, cf.Config.Cmd...),
		"--prometheus.url=http://127.0.0.1:1", "--web.listen-address="+addr))
	body := get(t, "http://"+addr+"/metrics")
	if !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics from the analyzer image:\n%.2000s", body)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/gpuwatch/gpuwatch.db")); err != nil {
		t.Errorf("the analyzer wrote no state in /var/lib/gpuwatch: %v", err)
	}
}

// TestBuildIsReproducible: the same inputs give the same image digest.
func TestBuildIsReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var digests []v1.Hash
	for range 2 {
		img, err := Build(ExporterImage(bin, info))
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Fatalf("digests %v differ", digests)
	}
}
