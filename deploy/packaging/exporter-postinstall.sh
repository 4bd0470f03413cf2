#!/bin/sh
# gpuwatch-exporter package: after install or upgrade (deb and rpm).
set -e
if command -v systemd-tmpfiles >/dev/null 2>&1; then
	systemd-tmpfiles --create gpuwatch-exporter.conf || true
else
	mkdir -p /run/gpuwatch/job-mapping
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# An upgrade restarts a running exporter on the new binary.
	systemctl try-restart gpuwatch-exporter.service || true
fi
# The Slurm epilog's end-of-job summary runs `gpuwatch job`, which is not in
# this package: say so at install time rather than in a log nobody reads.
if ! command -v gpuwatch >/dev/null 2>&1; then
	echo "gpuwatch-exporter: the end-of-job summary (/usr/libexec/gpuwatch/job-summary) needs the gpuwatch package (its job command), which is not installed"
fi
echo "gpuwatch-exporter: edit /etc/gpuwatch/teams.yml and /etc/default/gpuwatch-exporter, then: systemctl enable --now gpuwatch-exporter"
