#!/usr/bin/env bash
# Scrape cost against the floor: serving /metrics for 8 GPUs × 4 processes
# versus writing the same bytes from a prepared buffer, in one `go test`
# run. Prints the median of each and their ratio (target: at most 3×).
set -euo pipefail
cd "$(dirname "$0")/.."
count="${COUNT:-7}"
out="$(go test ./exporter/server -run '^$' -bench '^(BenchmarkScrape|BenchmarkPreparedBuffer|BenchmarkCollectAndRender)$' -benchmem -count "$count")"
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
/^Benchmark/ {
	name=$1; sub(/-[0-9]+$/, "", name)
	for (i = 2; i <= NF; i++) if ($(i+1) == "ns/op") { v[name] = v[name] " " $i }
}
function median(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	s = median(v["BenchmarkScrape"]); p = median(v["BenchmarkPreparedBuffer"]); c = median(v["BenchmarkCollectAndRender"])
	printf "median scrape %.0f ns/op, prepared buffer %.0f ns/op, ratio %.2fx (target <= 3x)\n", s, p, s / p
	printf "median collect+render cycle (8 GPUs x 4 procs) %.0f ns/op\n", c
	if (s / p > 3) exit 1
}'
