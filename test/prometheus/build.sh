#!/bin/sh
# build.sh builds Prometheus and promtool from the Go module proxy into a
# cache outside the repository, keyed by version, and prints the folder
# that holds them. A second run finds them there.
#
# The version is the one go.mod pins for the TSDB and PromQL libraries the
# product links (github.com/prometheus/prometheus v0.3MM.P is Prometheus
# 3.MM.P), so the server the tests run against and the library that writes
# their blocks are one release. Debian's package is Prometheus 2.42 (2023),
# a major version behind what users run. Service discovery is left out
# (-tags remove_all_sd): the tests scrape nothing through it, and it is most
# of the build. The -X flag gives the binaries their version, which the
# performance rows print.
#
# Environment (all optional):
#   GPUWATCH_PROMETHEUS_CACHE  cache folder (default $HOME/.cache/gpuwatch/prometheus)
set -eu

say() { printf 'build.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

command -v go >/dev/null 2>&1 || die "go not found"
root=$(cd "$(dirname "$0")/../.." && pwd)
module=github.com/prometheus/prometheus
v=$(cd "$root" && go list -m -f '{{.Version}}' "$module") || die "go.mod names no $module"
case $v in
v0.[0-9][0-9][0-9].*) ;;
*) die "$module $v: want v0.MMM.P (Prometheus M.MM.P)" ;;
esac
minor=${v#v0.}
patch=${minor#*.}
minor=${minor%%.*}
release=${minor%??}.$(echo "${minor#?}" | sed 's/^0*\([0-9]\)/\1/').$patch
cache=${GPUWATCH_PROMETHEUS_CACHE:-${HOME:-/root}/.cache/gpuwatch/prometheus}
out=$cache/$release
if [ ! -x "$out/prometheus" ] || [ ! -x "$out/promtool" ]; then
	say "building prometheus and promtool $release ($module $v; once: about 5 min on 2 cores with a cold Go build cache)"
	rm -rf "$out.tmp"
	mkdir -p "$out.tmp"
	GOBIN=$out.tmp go install -tags remove_all_sd -ldflags "-X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=$v" \
		"$module/cmd/prometheus@$v" "$module/cmd/promtool@$v" >&2 || die "go install $module $v failed"
	rm -rf "$out" && mv "$out.tmp" "$out"
fi
"$out/prometheus" --version 2>&1 | head -1 | grep -q "version $release" || die "$out/prometheus does not report version $release"
echo "$out"
