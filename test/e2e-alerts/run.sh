#!/usr/bin/env bash
# End-to-end test of rules/ and dashboards/ on a real Prometheus and
# Alertmanager (Debian packages `prometheus` and `prometheus-alertmanager`).
# Builds gpuwatch, starts the exporter on a simulated fleet, Prometheus,
# Alertmanager and a webhook receiver on loopback ports, and stops them all on
# exit. Takes about a minute. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CI="${CI:-1}"   # a missing prometheus or alertmanager binary fails instead of skipping
exec go test -count=1 -timeout 6m -run 'TestAlertsEndToEnd' -v ./test/e2e-alerts/ "$@"
