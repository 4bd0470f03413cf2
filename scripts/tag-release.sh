#!/usr/bin/env bash
# Cut a release: turn CHANGELOG.md's "## [Unreleased]" section into
# "## [VERSION] - DATE", commit that, and make an annotated tag VERSION whose
# message is the section. Then build it with scripts/release.sh VERSION, which
# stamps VERSION and the commit into every binary (--version,
# gpuwatch_build_info) and every package.
#
#   scripts/tag-release.sh VERSION        e.g. scripts/tag-release.sh v0.1.0
#
# It refuses a version that is not vMAJOR.MINOR.PATCH (with an optional
# -prerelease), a tag that exists, a tree with uncommitted changes and an
# empty Unreleased section. RELEASE_DATE (YYYY-MM-DD) overrides today's date.
# Exit codes: 0 tagged; 1 refused (the message says why); 2 bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "tag-release: $*" >&2; exit 1; }
[[ $# -eq 1 ]] || { echo "usage: scripts/tag-release.sh VERSION (e.g. v0.1.0)" >&2; exit 2; }
version="$1"
[[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
	die "$version is not a semantic version such as v0.1.0 (Go modules need the leading v)"
git rev-parse -q --verify "refs/tags/$version" >/dev/null && die "tag $version exists already"
[[ -z "$(git status --porcelain)" ]] || die "the work tree has uncommitted changes: commit or stash them first"
date="${RELEASE_DATE:-$(date -u +%Y-%m-%d)}"
[[ "$date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "RELEASE_DATE=$date is not YYYY-MM-DD"
grep -q '^## \[Unreleased\]' CHANGELOG.md || die "CHANGELOG.md has no '## [Unreleased]' section to release"
# The Unreleased section's body: from its heading to the next "## ".
notes="$(awk '/^## \[Unreleased\]/{on=1; next} /^## /{on=0} on' CHANGELOG.md | sed -e '/./,$!d')"
[[ -n "${notes//[[:space:]]/}" ]] || die "CHANGELOG.md's Unreleased section is empty: say what $version changes"
# A fresh, empty Unreleased section above the released one.
awk -v v="$version" -v d="$date" '
	/^## \[Unreleased\]/ && !done { print; print ""; print "## [" v "] - " d; done=1; next }
	{ print }' CHANGELOG.md >CHANGELOG.md.new
mv CHANGELOG.md.new CHANGELOG.md
git add CHANGELOG.md
git commit -q -m "Release $version"
git tag -a "$version" -m "gpuwatch $version" -m "$notes"
echo "tagged $version at $(git rev-parse --short HEAD); build it with: scripts/release.sh $version"
