#!/usr/bin/env bash
# Exporter footprint: RSS and CPU while serving 20 scrapes/s for 60 s at a 1 s
# collect interval on the first node (8 GPUs) of the built-in simulated fleet (targets: < 40 MiB RSS, < 2% of a core).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/gpuwatch-exporter" ./cmd/gpuwatch-exporter
go build -o "$bin/soak" ./scripts/soak
"$bin/soak" -addr 127.0.0.1:19400 -rate "${RATE:-20}" -duration "${DURATION:-60s}" -- \
	"$bin/gpuwatch-exporter" --source=sim \
	--collect-interval=1s --web.listen-address=127.0.0.1:19400 --log.level=warn
