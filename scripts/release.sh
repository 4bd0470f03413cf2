#!/usr/bin/env bash
# Release build: for each architecture, the lean exporter (gpuwatch-exporter)
# the lean analyzer (gpuwatch-analyzer: daemon, analyze, report, audit,
# check-config) and the full binary (gpuwatch: also agent, demo, plan, job), as
#   dist/gpuwatch_<version>_linux_<arch>.tar.gz     (binaries, units, examples, docs)
#   dist/gpuwatch-{exporter,analyzer}_<version>_<arch>.deb and .rpm, and
#   dist/gpuwatch_<version>_<arch>.deb and .rpm     (the full command line: job, plan, demo, ...)
#   dist/oci/gpuwatch-{exporter,analyzer}-<arch>/  (OCI image layouts; this machine's arch only)
#   dist/<binary>_<arch>.modules.txt                (`go version -m`: module versions, for SBOMs)
#   dist/SHA256SUMS
#
#   scripts/release.sh [VERSION] [ARCH...]     e.g. scripts/release.sh v0.1.0 amd64 arm64
#
# go-nvml is a cgo binding, so every build needs a C compiler for its target:
# gcc for this machine, aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu)
# for arm64 from amd64. CGO_ENABLED=0 does not build (go-nvml's Go files need
# cgo). The binaries link glibc dynamically; NVML itself is loaded at run
# time, so they start on machines without a driver.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}"
shift || true
arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64)
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
host="$(go env GOARCH)"
# -trimpath makes the binaries reproducible (no build paths in them);
# GPUWATCH_TRIMPATH=0 reuses the build cache of ordinary builds (CI does).
trimpath=(-trimpath)
[[ "${GPUWATCH_TRIMPATH:-1}" == 0 ]] && trimpath=()
out=dist
rm -rf "$out" && mkdir -p "$out"

cc_for() {
	case "$1" in
	"$host") echo gcc ;;
	arm64) echo aarch64-linux-gnu-gcc ;;
	amd64) echo x86_64-linux-gnu-gcc ;;
	*) echo "release: no C compiler known for $1" >&2; return 1 ;;
	esac
}

# The tools run on this machine, whatever the target.
# build/ is a module of its own (nFPM and go-containerregistry stay out of the product's).
artifacts="$(pwd)/$out/.artifacts"
[[ "$out" == /* ]] && artifacts="$out/.artifacts"
(cd build && go build -o "$artifacts" ./artifacts)

for arch in "${arches[@]}"; do
	cc="$(cc_for "$arch")"
	command -v "$cc" >/dev/null || { echo "release: $cc not found: it is needed to build for linux/$arch (cgo)" >&2; exit 1; }
	dir="$out/gpuwatch_${version}_linux_${arch}"
	mkdir -p "$dir"
	for cmd in gpuwatch-exporter gpuwatch-analyzer gpuwatch; do
		echo "==> $cmd linux/$arch"
		GOOS=linux GOARCH="$arch" CC="$cc" go build "${trimpath[@]}" \
			-ldflags "-s -w -X github.com/prometheus/common/version.Version=${version} -X github.com/prometheus/common/version.Revision=${revision}" -o "$dir/$cmd" "./cmd/$cmd"
		go version -m "$dir/$cmd" >"$out/${cmd}_${arch}.modules.txt"
	done
	cp -r deploy/systemd deploy/slurm deploy/packaging "$dir/"
	cp deploy/examples/policy.yaml "$dir/policy.example.yaml"
	cp analyzer/config/example.yaml "$dir/analyzer.example.yaml"
	cp README.md LICENSE CHANGELOG.md "$dir/"
	tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
		-C "$out" -czf "$dir.tar.gz" "$(basename "$dir")"
	formats=deb,rpm
	[[ "$arch" == "$host" ]] && formats=deb,rpm,oci
	"$out/.artifacts" --kind=exporter --binary="$dir/gpuwatch-exporter" --version="$version" --revision="$revision" --arch="$arch" --formats="$formats" --out="$out"
	"$out/.artifacts" --kind=analyzer --binary="$dir/gpuwatch-analyzer" --version="$version" --revision="$revision" --arch="$arch" --formats="$formats" --out="$out"
	# gpuwatch has no image: its package holds the job command the Slurm
	# end-of-job summary runs on GPU nodes, and the operators' tools.
	"$out/.artifacts" --kind=cli --binary="$dir/gpuwatch" --version="$version" --revision="$revision" --arch="$arch" --formats=deb,rpm --out="$out"
	rm -rf "$dir"
done
rm -f "$out/.artifacts"
(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs sha256sum >SHA256SUMS)
echo "==> $out"
ls -l "$out" "$out/oci" 2>/dev/null
