// Command artifacts packages a built gpuwatch binary: .deb and .rpm packages
// (nFPM) and an OCI image layout (go-containerregistry), with no container
// engine. scripts/release.sh runs it for each binary and architecture.
//
//	(cd build && go run ./artifacts) --kind=exporter --binary=dist/linux-amd64/gpuwatch-exporter \
//	  --version=v0.1.0 --revision=$(git rev-parse HEAD) --arch=amd64 --out=dist
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"

	"github.com/gpuwatch/gpuwatch/build/oci"
	"github.com/gpuwatch/gpuwatch/build/packages"
)

func main() {
	kind := flag.String("kind", "", "exporter (gpuwatch-exporter), analyzer (gpuwatch-analyzer) or cli (gpuwatch: packages only, no image)")
	binary := flag.String("binary", "", "the built binary: gpuwatch-exporter for --kind=exporter, gpuwatch-analyzer for analyzer, gpuwatch for cli")
	version := flag.String("version", "", "release version, e.g. v0.1.0")
	revision := flag.String("revision", "unknown", "source revision (git commit)")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the binary")
	formats := flag.String("formats", "deb,rpm,oci", "comma-separated: deb, rpm, oci (oci only for this machine's architecture: the image carries this machine's glibc)")
	out := flag.String("out", "dist", "output folder")
	repo := flag.String("repo", ".", "the repository's root")
	epoch := flag.Int64("source-date-epoch", 0, "timestamp of every file and of the image (default $SOURCE_DATE_EPOCH, else now)")
	flag.Parse()
	if err := run(*kind, *binary, *version, *revision, *arch, *formats, *out, *repo, *epoch); err != nil {
		fmt.Fprintln(os.Stderr, "artifacts:", err)
		os.Exit(2)
	}
}

func run(kind, binary, version, revision, arch, formats, out, repo string, epoch int64) error {
	pkg, ok := packageOf[kind]
	if !ok {
		return fmt.Errorf("--kind %q: want exporter, analyzer or cli", kind)
	}
	if binary == "" || version == "" {
		return errors.New("--binary and --version are required")
	}
	if epoch == 0 {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			if _, err := fmt.Sscan(s, &epoch); err != nil {
				return fmt.Errorf("$SOURCE_DATE_EPOCH %q: %w", s, err)
			}
		} else {
			epoch = time.Now().Unix()
		}
	}
	mtime := time.Unix(epoch, 0).UTC()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range strings.Split(formats, ",") {
		switch f {
		case "deb", "rpm":
			b := packages.Build{Repo: repo, Binary: binary, Version: version, Arch: arch, MTime: mtime, Format: f}
			if err := writePackage(b, pkg(b), out); err != nil {
				return err
			}
		case "oci":
			if kind == "cli" {
				return errors.New("--formats oci: the cli kind (gpuwatch) has no image; the images are the exporter's and the analyzer's")
			}
			if arch != runtime.GOARCH {
				return fmt.Errorf("--formats oci for %s on a %s machine: the image takes its glibc from this machine; build it on %s", arch, runtime.GOARCH, arch)
			}
			bi := oci.BuildInfo{Version: version, Revision: revision, Created: mtime, Arch: arch}
			spec := oci.ExporterImage(binary, bi)
			if kind == "analyzer" {
				spec = oci.AnalyzerImage(binary, repo, bi)
			}
			img, err := oci.Build(spec)
			if err != nil {
				return err
			}
			dir := filepath.Join(out, "oci", "gpuwatch-"+kind+"-"+arch)
			if err := oci.WriteLayout(dir, "ghcr.io/gpuwatch/gpuwatch-"+kind+":"+version, img); err != nil {
				return err
			}
			fmt.Println(dir)
		default:
			return fmt.Errorf("--formats: unknown format %q", f)
		}
	}
	return nil
}

// packageOf maps --kind to the package it builds.
var packageOf = map[string]func(packages.Build) *nfpm.Info{
	"exporter": packages.Exporter,
	"analyzer": packages.Analyzer,
	"cli":      packages.CLI,
}

func writePackage(b packages.Build, in *nfpm.Info, out string) error {
	tmp, err := os.CreateTemp(out, ".package-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := packages.Write(b, in, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	dst := filepath.Join(out, in.Target)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	if err := os.Chmod(dst, 0o644); err != nil {
		return err
	}
	fmt.Println(dst)
	return nil
}
