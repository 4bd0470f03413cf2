#!/usr/bin/env bash
# /metrics size and exporter memory against the number of jobs sharing each
# GPU: the real `gpuwatch exporter` (simulated fleet, 8 GPUs) reads a
# job-mapping folder with N jobs per GPU, for N = 50 and 500; the script
# scrapes /metrics over HTTP, reads the process' peak RSS (VmHWM), and prints
# both and their ratios. Holders grow 10x: a linear exposition grows about
# 10x (target: at most 12x), a quadratic one about 100x.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/gpuwatch" ./cmd/gpuwatch
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
declare -A bytes rss
for n in 50 500; do
	dir="$tmp/map-$n"
	mkdir -m 0755 "$dir"
	for gpu in 0 1 2 3 4 5 6 7; do
		for ((j = 1; j <= n; j++)); do
			printf '%d user=user%d uid=%d account=acct%d name=job%%20%d start=1732870000\n' $((gpu * 100000 + j)) "$j" $((1000 + j)) $((j % 7)) "$j"
		done >"$dir/$gpu"
	done
	"$tmp/gpuwatch" exporter --source=sim --hpc-job-mapping-dir="$dir" --web.listen-address="127.0.0.1:$port" --collect-interval=1s --log.level=error &
	pid=$!
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port/metrics" -o "$tmp/m" && grep -q '^gpuwatch_allocation_info' "$tmp/m" && break
		sleep 0.1
	done
	sleep 3 # a few collections, so the peak RSS includes steady state
	curl -sf "http://127.0.0.1:$port/metrics" -o "$tmp/m"
	bytes[$n]=$(wc -c <"$tmp/m")
	rss[$n]=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
	holders=$(grep -c '^gpuwatch_allocation_info' "$tmp/m")
	printf '%4d jobs/GPU: %6d allocation_info series, /metrics %9d bytes, exporter peak RSS %7d KiB\n' "$n" "$holders" "${bytes[$n]}" "${rss[$n]}"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
done
awk -v b50="${bytes[50]}" -v b500="${bytes[500]}" -v r50="${rss[50]}" -v r500="${rss[500]}" 'BEGIN {
	printf "ratio 500/50: /metrics %.2fx, peak RSS %.2fx (holders 10x; target /metrics <= 12x)\n", b500 / b50, r500 / r50
	if (b500 / b50 > 12) exit 1
}'
