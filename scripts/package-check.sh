#!/usr/bin/env bash
# Installs the .deb packages scripts/release.sh built (dist/) on this machine,
# as an administrator would, and checks them: dpkg -i, systemd-analyze verify
# of the installed units, the exporter started from its installed path with
# the installed /etc/default/gpuwatch-exporter (only --source switched to sim:
# CI has no GPU) answering /metrics, the analyzer's binary answering --version,
# the end-of-job summary reaching the gpuwatch package's job command, then
# dpkg --purge. Run as root on Debian (scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
arch="$(dpkg --print-architecture)"
exporter_deb="$(ls dist/gpuwatch-exporter_*_"$arch".deb)"
analyzer_deb="$(ls dist/gpuwatch-analyzer_*_"$arch".deb)"
cli_deb="$(ls dist/gpuwatch_*_"$arch".deb)"

cleanup() {
	[[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	dpkg --purge gpuwatch-exporter gpuwatch-analyzer gpuwatch >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "==> dpkg -i $exporter_deb $analyzer_deb $cli_deb"
dpkg -i "$exporter_deb" "$analyzer_deb" "$cli_deb"
dpkg -s gpuwatch-exporter gpuwatch-analyzer gpuwatch | grep -E '^(Package|Status|Version):'
test -d /run/gpuwatch/job-mapping                  # tmpfiles.d, created by the postinst
getent passwd gpuwatch >/dev/null                  # sysusers.d, created by the postinst
test "$(stat -c %a /etc/gpuwatch/teams.yml)" = 644

echo "==> systemd-analyze verify (installed units, and the reports drop-in)"
mkdir -p /etc/systemd/system/gpuwatch-analyzer.service.d
cp /usr/share/gpuwatch/gpuwatch-analyzer-reports.conf /etc/systemd/system/gpuwatch-analyzer.service.d/reports.conf
out="$(systemd-analyze verify /usr/lib/systemd/system/gpuwatch-exporter.service /usr/lib/systemd/system/gpuwatch-analyzer.service 2>&1)" || { echo "$out"; exit 1; }
rm -r /etc/systemd/system/gpuwatch-analyzer.service.d
if grep -q gpuwatch <<<"$out"; then echo "$out"; exit 1; fi

echo "==> /usr/bin/gpuwatch-exporter with /etc/default/gpuwatch-exporter"
# shellcheck source=/dev/null
. /etc/default/gpuwatch-exporter
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
args=()
for a in $GPUWATCH_EXPORTER_ARGS; do
	case "$a" in
	--source=*) args+=(--source=sim) ;;
	--web.listen-address=*) args+=(--web.listen-address="127.0.0.1:$port") ;;
	*) args+=("$a") ;;
	esac
done
/usr/bin/gpuwatch-exporter "${args[@]}" &
pid=$!
for _ in $(seq 1 100); do
	if curl -fsS "http://127.0.0.1:$port/metrics" -o /tmp/gpuwatch-package-metrics 2>/dev/null; then break; fi
	kill -0 "$pid" || { echo "gpuwatch-exporter exited"; exit 1; }
	sleep 0.2
done
grep -q '^DCGM_FI_DEV_GPU_UTIL{' /tmp/gpuwatch-package-metrics
grep -q '^gpuwatch_exporter_' /tmp/gpuwatch-package-metrics
kill "$pid" && wait "$pid" || true
pid=

echo "==> /usr/bin/gpuwatch-analyzer --version"
/usr/bin/gpuwatch-analyzer --version
/usr/bin/gpuwatch-analyzer check-config --policy.file /etc/gpuwatch/policy.yml --analyzer.config /etc/gpuwatch/analyzer.yml
echo "==> /usr/libexec/gpuwatch/job-summary runs /usr/bin/gpuwatch job"
/usr/bin/gpuwatch job --help >/dev/null
# No Prometheus and no such job here: the summary fails, but in gpuwatch's
# own words, not with "not found".
summary="$(env -u SLURM_CONF GPUWATCH_PROMETHEUS_URL=http://127.0.0.1:1 GPUWATCH_SUMMARY_TIMEOUT=8 SLURM_JOB_ID=4242 /usr/libexec/gpuwatch/job-summary 2>&1)" && { echo "job-summary succeeded without Slurm: $summary"; exit 1; }
grep -q 'no summary: gpuwatch job:' <<<"$summary" || { echo "job-summary: $summary"; exit 1; }
echo "==> packages install, verify and start"
