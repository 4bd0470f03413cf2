#!/usr/bin/env bash
# Checks gpuwatch's Prometheus rules and the Alertmanager example with the real
# tools: promtool check rules, promtool test rules (rules/tests/*.yml), amtool
# check-config and amtool config routes test (rules/tests/alertmanager_routes.txt).
# Needs promtool (scripts/test.sh builds it: test/prometheus/build.sh) and
# Debian's `prometheus-alertmanager` (amtool).
set -euo pipefail
cd "$(dirname "$0")"

for bin in promtool amtool; do
  command -v "$bin" >/dev/null || { echo "rules/test.sh: $bin not installed (promtool: sh test/prometheus/build.sh; amtool: apt-get install prometheus-alertmanager)" >&2; exit 1; }
done

promtool check rules gpuwatch-alerts.yml gpuwatch-recording.yml
promtool test rules tests/*.yml
amtool check-config alertmanager.example.yml

fail=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  want="$(echo "${line%%|*}" | tr -d ' ')"
  read -r -a labels <<<"${line#*|}"
  if ! out="$(amtool config routes test --config.file=alertmanager.example.yml --verify.receivers="$want" "${labels[@]}" 2>&1)"; then
    echo "FAIL route ${labels[*]}: want $want, got: $out" >&2
    fail=1
  else
    echo "ok   route ${labels[*]} -> $want"
  fi
done <tests/alertmanager_routes.txt
exit "$fail"
