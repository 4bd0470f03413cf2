#!/bin/sh
# gpuwatch-analyzer package: after install or upgrade (deb and rpm).
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers gpuwatch-analyzer.conf
elif ! getent passwd gpuwatch >/dev/null; then
	useradd --system --home-dir /var/lib/gpuwatch --no-create-home --shell /usr/sbin/nologin gpuwatch
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	systemctl try-restart gpuwatch-analyzer.service || true
fi
echo "gpuwatch-analyzer: set --prometheus.url in /etc/default/gpuwatch-analyzer (the policy is dry-run), then: systemctl enable --now gpuwatch-analyzer"
