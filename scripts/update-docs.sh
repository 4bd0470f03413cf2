#!/usr/bin/env bash
# Regenerates every file the repository generates from its code, each by the
# test that otherwise checks it (UPDATE_DOCS=1 is how those tests are told
# to write instead of compare): the CLI references, the metrics catalogue,
# the NVML reads table, the query page of docs/scaling.md, the threshold
# sensitivity page (every row of every table, which the suite checks),
# the Prometheus rules and the Grafana dashboards. Commit what it changes.
#
#   bash scripts/update-docs.sh
#
# The sensitivity page replays the simulator's corpus week and analyzes it
# under every threshold moved 25 % each way: about 5 minutes on 2 cores, nearly
# all of it the replay (each configuration re-runs only the detectors).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
export UPDATE_DOCS=1
go test -count=1 ./cmd/gpuwatch ./cmd/gpuwatch-analyzer ./schema ./exporter/nvml ./docs
go test -count=1 -run '^TestGeneratedUpToDate$' ./rules -update
go test -count=1 ./dashboards -update
go test -count=1 -timeout 45m -run '^TestCorpusSensitivity$' ./analyzer/engine
git status --short
