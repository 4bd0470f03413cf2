// Package release holds the test of the release process
// (scripts/tag-release.sh): it tags a version from CHANGELOG.md's Unreleased
// section, and refuses what would make a wrong release.
package release
