#!/bin/sh
# gpuwatch-exporter package: before removal (deb: "remove"; rpm: 0 packages left).
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now gpuwatch-exporter.service || true
	fi
	;;
esac
