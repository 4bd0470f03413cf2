#!/bin/sh
# build.sh builds kube-apiserver and kube-controller-manager (and kwok) from
# the Go module proxy into a cache outside the repository, keyed by version,
# and prints the folder that holds them. A second run finds them there.
#
# k8s.io/kubernetes is not meant to be a dependency: its go.mod replaces
# every k8s.io/X staging module with ./staging/src/k8s.io/X, a folder the
# module zip leaves out, and it builds in workspace mode. So the module is
# copied out of the module cache, its go.work, go.work.sum and vendor/ are
# deleted and each replace points at the proxy's published staging module
# (k8s.io/X vMAJOR-less 0.MINOR.PATCH), then built with -mod=mod. The -X
# flags give the server its version: without them it reports v0.0.0 and Helm
# refuses a chart's kubeVersion.
#
# Environment (all optional):
#   GPUWATCH_KUBE_VERSION  versions to try in order (default "v1.37.2 v1.34.4")
#   GPUWATCH_KUBE_CACHE    cache folder (default $HOME/.cache/gpuwatch/kubernetes)
#   GPUWATCH_KWOK_VERSION  kwok's version (default v0.8.0)
set -eu

say() { printf 'build.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

versions=${GPUWATCH_KUBE_VERSION:-v1.37.2 v1.34.4}
cache=${GPUWATCH_KUBE_CACHE:-${HOME:-/root}/.cache/gpuwatch/kubernetes}
kwok_version=${GPUWATCH_KWOK_VERSION:-v0.8.0}
command -v go >/dev/null 2>&1 || die "go not found"
mkdir -p "$cache"

# kwok, and its stages: the kwok binary has no default ones (kwokctl
# brings them), so the module's own are kept beside it. pod-complete is left
# out: it finishes a Job's pods at once, where a training Job runs.
build_kwok() {
	out=$cache/kwok-$kwok_version
	[ -x "$out/kwok" ] && [ -s "$out/stages.yaml" ] && return 0
	say "building kwok $kwok_version"
	rm -rf "$out.tmp"
	mkdir -p "$out.tmp"
	GOBIN=$out.tmp GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kwok/cmd/kwok@$kwok_version" >&2 || return 1
	kdir=$(go mod download -json "sigs.k8s.io/kwok@$kwok_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	st=$kdir/kustomize/stage
	for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml; do
		[ -s "$st/$f" ] || { say "kwok's stage $f not found in $kdir"; return 1; }
		cat "$st/$f"
		printf '\n---\n'
	done >"$out.tmp/stages.yaml"
	rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kube() {
	v=$1
	out=$cache/$v
	if [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/kube-controller-manager" ]; then
		return 0
	fi
	say "building kube-apiserver and kube-controller-manager $v (once: 18 min on 2 cores with a cold Go build cache, about 1 min with a warm one)"
	staging=v0.${v#v1.}
	minor=${v#v1.}
	minor=${minor%%.*}
	src=$out/src
	rm -rf "$out"
	mkdir -p "$out/bin"
	go mod download "k8s.io/kubernetes@$v" >&2 || return 1
	dir=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || return 1
	cp -r "$dir" "$src"
	chmod -R u+w "$src"
	rm -rf "$src/go.work" "$src/go.work.sum" "$src/vendor"
	# replace k8s.io/X => ./staging/src/k8s.io/X  becomes  k8s.io/X => k8s.io/X vSTAGING
	sed -i "s#^\([[:space:]]*\)\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*#\1\2 => \2 $staging#" "$src/go.mod"
	if grep -q '=> ./staging' "$src/go.mod"; then
		say "go.mod still replaces with ./staging"
		return 1
	fi
	ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
	(cd "$src" && GOWORK=off GOFLAGS=-buildvcs=false go build -mod=mod -trimpath -ldflags "$ld" \
		-o "$out/bin/" ./cmd/kube-apiserver ./cmd/kube-controller-manager) >&2 || return 1
	# The sources are 100s of MB and no longer needed; the binaries stay.
	rm -rf "$src"
}

for v in $versions; do
	if build_kube "$v"; then
		build_kwok || die "kwok $kwok_version did not build"
		printf 'GPUWATCH_KUBE_BIN=%s\nGPUWATCH_KUBE_VERSION=%s\nGPUWATCH_KWOK=%s\n' "$cache/$v/bin" "$v" "$cache/kwok-$kwok_version/kwok"
		exit 0
	fi
	say "$v did not build; trying the next version"
	rm -rf "$cache/$v"
done
die "no version of $versions built"
