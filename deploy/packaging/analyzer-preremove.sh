#!/bin/sh
# gpuwatch-analyzer package: before removal (deb: "remove"; rpm: 0 packages left).
# The state in /var/lib/gpuwatch (the audit log) is kept.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now gpuwatch-analyzer.service || true
	fi
	;;
esac
