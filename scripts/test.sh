#!/usr/bin/env bash
# The test suite (the README's test command; CI runs the full one through
# .ci/run). It installs what the tests need, starts the real services the
# integration tests use (munge + Slurm with slurmdbd, PostgreSQL, a
# Kubernetes control plane; the tests start their own Prometheus,
# Alertmanager, VictoriaMetrics, JupyterHub and mailpit on loopback ports),
# then runs lint, unit, integration and end-to-end tests.
#
#   bash scripts/test.sh          the whole suite, scale targets and release build included
#   bash scripts/test.sh quick    gofmt, vet and staticcheck, and the tests of the packages changed
#                                 since the merge base with main (QUICK_BASE=<branch> to change it)
#                                 and of the packages that import them, without -race; no scale
#                                 steps, no corpus week; it leaves the services running for the
#                                 next quick run
#
# Every go test goes through scripts/testreport: the output is go test's
# own (a result line per package, the whole output of a test that failed),
# and the end of the run prints each step's wall time and how many tests ran
# and were skipped, with each skip's reason.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
mode="${1:-full}"
case "$mode" in
full | quick) ;;
-h | --help | help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "scripts/test.sh: unknown mode \"$mode\": full (the default) or quick; --help says more" >&2
	exit 2
	;;
esac
export CI="${CI:-true}"                                      # tests fail, not skip, when a tool is missing
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}" # go-nvml's deprecated C declarations
export PATH="$PATH:$(go env GOPATH)/bin:/usr/local/bin"

# Each step's wall time, printed at the end (and on failure) so that a slow
# CI run says where its minutes went; then the count of tests.
timings=()
step_name=""
step_start=$SECONDS
step_end() {
	if [[ -n $step_name ]]; then
		timings+=("$(printf '%6d s  %s' $((SECONDS - step_start)) "$step_name")")
	fi
	step_name=""
}
step() {
	step_end
	step_name="$*"
	step_start=$SECONDS
	printf '\n==> %s  [%d s]\n' "$*" "$SECONDS"
}
work="$(mktemp -d)"
tally="$work/tally"
summary() {
	step_end
	printf '\n==> wall time per step (%s)\n' "$mode"
	printf '%s\n' "${timings[@]}"
	printf '%6d s  in all\n' "$SECONDS"
	if [[ -s $tally && -x $work/testreport ]]; then
		printf '\n==> tests (subtests included)\n'
		"$work/testreport" -summary "$tally" || true
	fi
}
# The full suite stops the services it started; the quick tier leaves them
# running for the next quick run (start.sh finds them up and reuses them;
# test/*/stop.sh stops them).
services=()
stop_after() { if [[ $mode == full ]]; then services+=("$1"); fi; }
finish() {
	local rc=$?
	for s in "${services[@]}"; do $s >/dev/null 2>&1 || true; done
	summary
	rm -rf "$work"
	exit "$rc"
}
trap finish EXIT

# gotest STEP [-v] GO_TEST_ARGS...: go test -json through testreport, which
# prints the usual output (with -v, every test's) and tallies the step.
gotest() {
	local name="$1" v=()
	shift
	if [[ ${1:-} == -v ]]; then
		v=(-v)
		shift
	fi
	go test -json "$@" | "$work/testreport" "${v[@]}" -step "$name" -tally "$tally"
}

step "install test dependencies"
# The Kubernetes control plane and Prometheus are built from the module
# proxy once and cached by version (18 and 3 minutes on a cold machine,
# a second when cached): built in the background while apt-get installs.
sh test/kubernetes/build.sh >"$work/kube-build.out" 2>&1 &
kube_build=$!
sh test/prometheus/build.sh >"$work/prometheus-build.out" 2>"$work/prometheus-build.err" &
prometheus_build=$!
need_apt=()
command -v amtool >/dev/null || need_apt+=(prometheus-alertmanager)
command -v victoria-metrics >/dev/null || need_apt+=(victoria-metrics)   # the analyzer corpus through a real VictoriaMetrics
command -v slurmctld >/dev/null || need_apt+=(slurm-wlm)
command -v munged >/dev/null || need_apt+=(munge)
command -v slurmdbd >/dev/null || need_apt+=(slurmdbd)         # accounting: the Epilog's AdminComment goes through slurmdbd
command -v mariadbd >/dev/null || need_apt+=(mariadb-server)   # slurmdbd's database (test/slurm/start.sh runs a private one)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v jupyterhub >/dev/null || need_apt+=(jupyterhub)       # the JupyterHub actuator's tests (3.0.0)
command -v npm >/dev/null || need_apt+=(npm)                     # installs configurable-http-proxy below
command -v systemd-analyze >/dev/null || need_apt+=(systemd)   # systemd-analyze verify of deploy/systemd units
[[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || need_apt+=(fonts-dejavu-core) # text in screenshots
command -v aarch64-linux-gnu-gcc >/dev/null || need_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) # release.sh: cgo for linux/arm64
command -v dpkg-deb >/dev/null || need_apt+=(dpkg)             # the .deb checks (build/packages, package-check.sh)
command -v curl >/dev/null || need_apt+=(curl)                 # package-check.sh
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql) # the shared store (--storage.url); test/postgres/start.sh
command -v etcd >/dev/null || need_apt+=(etcd-server)           # the real Kubernetes control plane's store
if ((${#need_apt[@]})); then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
command -v mailpit >/dev/null || GOBIN=/usr/local/bin go install github.com/axllent/mailpit@v1.33.1
command -v staticcheck >/dev/null || GOBIN=/usr/local/bin go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Prometheus and promtool of the release go.mod pins for the TSDB and PromQL
# libraries (3.x; Debian's package is 2.42), built from the module proxy once
# and cached (test/prometheus/build.sh), first on PATH for every test.
wait "$prometheus_build" || { cat "$work/prometheus-build.err"; exit 1; }
prometheus_bin="$(cat "$work/prometheus-build.out")"
export PATH="$prometheus_bin:$PATH"
# Debian's node-configurable-http-proxy lacks a module: npm's, in its own prefix (actiontest.StartHub looks there).
[[ -x /opt/configurable-http-proxy/bin/configurable-http-proxy ]] || npm install -g --silent --prefix /opt/configurable-http-proxy configurable-http-proxy@5.3.0 >/dev/null

step "start a single-node Slurm (munge, slurmctld, slurmd, slurmdbd + MariaDB)"
# start.sh prints export lines (SLURM_CONF, GPUWATCH_SLURM_CONF, GPUWATCH_JOB_MAPPING_DIR, ...).
stop_after "bash $root/test/slurm/stop.sh"
eval "$(bash test/slurm/start.sh)"
step "start PostgreSQL on loopback (the shared store's tests)"
# start.sh prints GPUWATCH_TEST_POSTGRES_URL (internal/testpg makes a database per test on it).
stop_after "sh $root/test/postgres/stop.sh"
eval "$(sh test/postgres/start.sh)"
step "start a Kubernetes control plane on loopback (etcd, kube-apiserver, kube-controller-manager, kwok)"
# start.sh builds kube-apiserver and kube-controller-manager from the module
# proxy once (18 min on 2 cores with a cold Go build cache, 1 min with a
# warm one; the binaries are cached in ~/.cache/gpuwatch/kubernetes)
# and prints KUBECONFIG, GPUWATCH_KUBE_DIR and GPUWATCH_KUBE_NODES
# (internal/testkube reads them: a namespace per test, ServiceAccount tokens).
wait "$kube_build" || { cat "$work/kube-build.out"; exit 1; }
stop_after "sh $root/test/kubernetes/stop.sh"
eval "$(sh test/kubernetes/start.sh)"

step "build the commands once"
# Tests that run a command take it from here (testtool.Binary) instead of
# building it again in each package; stamped with the revision (--version
# prints it) even where GOFLAGS turns the stamp off.
export GPUWATCH_BIN_DIR="$work/bin"
go build -buildvcs=auto -o "$GPUWATCH_BIN_DIR/" ./cmd/...
go build -o "$work/testreport" ./scripts/testreport

# Tests that only the full suite runs, in its own steps: the corpus week and
# the bounded hostile Prometheus (without -race), the scale targets (alone).
full_only='^(TestCorpus|TestHostilePrometheusBounded$|TestBench|TestScaleEmbedded$|TestPrometheusFleetIndependent$|TestPrometheusScale|TestWeekJobUnderASecond$|TestAccountingIdentity$)'

if [[ $mode == quick ]]; then
	base="${QUICK_BASE:-main}"
	step "packages changed since the merge base with $base, and their importers"
	affected="$(go run ./scripts/affected -base "$base")"
	if [[ -z $affected ]]; then
		echo "nothing changed since the merge base with $base"
	else
		printf '%s\n' "$affected" | awk -F'\t' '{ n = split($2, p, " "); printf "%s: %d package(s)\n", $1, n }'
	fi
	step "gofmt, go vet, staticcheck"
	unformatted="$(gofmt -l $(git ls-files '*.go') $(git ls-files --others --exclude-standard '*.go'))"
	if [[ -n "$unformatted" ]]; then echo "not gofmt-ed: $unformatted"; exit 1; fi
	go vet ./...
	staticcheck ./...
	while IFS=$'\t' read -r dir pkgs; do
		[[ $dir == . || -z $dir ]] && continue
		(cd "$dir" && go vet ./... && staticcheck ./...)
	done <<<"$affected"
	step "go test of the changed packages and their importers (no scale steps, no -race)"
	# Without -race: the quick tier is the answer within five minutes while
	# changing code; the full suite, which CI runs, is the race check. The
	# scale targets and the corpus week are the full suite's own steps
	# (they run full size without -race), so they are left out here by name.
	while IFS=$'\t' read -r dir pkgs; do
		[[ -z $dir ]] && continue
		# shellcheck disable=SC2086 # pkgs is a list of import paths
		(cd "$dir" && gotest "go test ($dir)" -parallel 4 -timeout 30m -skip "$full_only" $pkgs)
	done <<<"$affected"
	exit 0
fi

step "gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [[ -n "$unformatted" ]]; then echo "not gofmt-ed: $unformatted"; exit 1; fi

# What is not timed runs side by side: on two cores the race tests keep
# about one and a quarter busy (their integration tests mostly wait on
# services), and the rest fills the other three quarters. Each job's output
# is printed whole, in this order, when all are done.
#
# The jobs run where `set -e` does not reach (a function called before
# `||`), so each one chains its commands with && or returns its status.
lint() {
	go vet ./... && staticcheck ./... || return 1
	# The packaging (build/) and the chart and manifest checks (deploy/)
	# are modules of their own: Helm, kustomize, nFPM and
	# go-containerregistry stay out of the product's build and test graph.
	for m in build deploy; do (cd "$m" && go vet ./... && staticcheck ./...) || return 1; done
}
# build/licenses is a module of its own (the classifier stays out of the
# product's build graph), so ./... does not reach it.
licences() {
	cd build/licenses && go vet ./... && staticcheck ./... && gotest "licences" -race -count=1 ./... &&
		go run . -C ../.. ./... && go run . -C .. ./... && go run . -C ../../deploy ./...
}
# -parallel 4: the tests that mark themselves parallel mostly wait (on the
# API server, Slurm, a lease, a browser), so four at a time in a package
# overlap their waits; packages run two at a time, which keeps the Slurm
# tests of two packages within the test cluster's 8 GPUs.
#
# The packages run in the order given (still two at a time): first those
# whose tests mostly wait (on Slurm, the control plane, JupyterHub, a
# browser, an alert firing; test/reclaim 2 1/2 minutes, most of it one
# test's jobs running), which ./...'s order put last (test/...), after the
# other jobs had ended and their CPU was free; here their waits overlap
# the other jobs' CPU work. Then the long CPU-bound ones while the other
# jobs end, then the rest, short ones filling the end.
race_first=(test/reclaim analyzer/daemon test/quickstart analyzer/jobview test/e2e-alerts analyzer/kube test/report
	analyzer/engine analyzer/plan cmd/gpuwatch analyzer/demo)
race_packages() {
	local mod p first=()
	mod="$(go list -m)" || return 1
	for p in "${race_first[@]}"; do first+=("$mod/$p"); done
	printf '%s\n' "${first[@]}"
	go list ./... | grep -vxF -f <(printf '%s\n' "${first[@]}")
}
race_tests() {
	local pkgs
	pkgs="$(race_packages)" || return 1
	# shellcheck disable=SC2086 # pkgs is a list of import paths
	gotest "go test -race" -race -count=1 -parallel 4 -timeout 60m $pkgs
}
# The chart and manifests (Helm's SDK) and the packaging, modules of their own.
module_tests() {
	local rc=0
	(cd deploy && gotest "go test -race (deploy)" -race -count=1 -parallel 4 -timeout 20m ./...) || rc=1
	(cd build && gotest "go test -race (build)" -race -count=1 -parallel 4 -timeout 20m ./...) || rc=1
	return "$rc"
}
# The labelled corpus week (TestCorpus*: precision and recall in every
# counter set and store, the field corpora, the threshold sensitivity)
# skips under -race, where it would take most of an hour on two cores, and
# runs here; nothing in it is timed.
# A hostile Prometheus' answers (hundreds of MB) against the analyzer's
# read bounds skip under -race too: the child process they bound is the
# test binary, and a race-instrumented one neither shows a true peak nor
# parses at a useful speed; here both the errors and the peak are checked.
# Two more kinds run here whole and only sampled (or not at all) under
# -race, where their concurrent paths are race-checked by other tests:
# the engine's window arithmetic over the demo's 12 hours (25 s and 17 s
# under -race), and the hostile-input tables, a process per case (every
# eighth case under -race, all of them here).
corpus_week() {
	gotest "corpus week and window arithmetic" -v -count=1 -timeout 45m \
		-run '^(TestCorpus|TestWindowAlignmentHoldsTheAnswer$|TestAnalyzeMatchesDaemonOnAWindow$)' ./analyzer/engine &&
		gotest "hostile Prometheus, bounded memory; the hostile tables whole" -count=1 -timeout 10m \
			-run '^(TestHostilePrometheusBounded|TestHostileInput|TestHostileTrustBoundary)$' ./cmd/gpuwatch
}
# GPUWATCH_TRIMPATH=0: reuse the build cache of the tests for amd64.
release() { GPUWATCH_TRIMPATH=0 bash scripts/release.sh v0.0.0-ci amd64 arm64 && bash scripts/package-check.sh; }

bg_names=()
bg_pids=()
# bg NAME FUNCTION: run FUNCTION in the background, its output and wall
# time kept in $work.
bg() {
	local i=${#bg_names[@]}
	bg_names+=("$1")
	(
		s=$SECONDS
		rc=0
		"$2" >"$work/bg-$i.out" 2>&1 || rc=$?
		echo $((SECONDS - s)) >"$work/bg-$i.time"
		exit "$rc"
	) &
	bg_pids+=($!)
}
step "side by side: vet and staticcheck; licences; go test -race; the deploy and build modules; the corpus week; the release build and .deb install check"
bg "go vet, staticcheck of the product, build and deploy modules" lint
bg "licences of every module the programs and tools link (build/licenses)" licences
bg "go test -race" race_tests
bg "go test -race of the deploy and build modules" module_tests
bg "without -race: the corpus week (TestCorpus*), the window arithmetic, a hostile Prometheus against the read bounds and the hostile tables" corpus_week
bg "release build (linux/amd64 and linux/arm64 tarballs, packages, images) and .deb install check" release
failed=()
for i in "${!bg_pids[@]}"; do wait "${bg_pids[$i]}" || failed+=("${bg_names[$i]}"); done
step_end # the jobs' own times follow the step's, marked ·
for i in "${!bg_names[@]}"; do
	took="$(cat "$work/bg-$i.time" 2>/dev/null || echo '?')"
	printf '\n==> %s  (%s s)\n' "${bg_names[$i]}" "$took"
	cat "$work/bg-$i.out"
	timings+=("$(printf '%6s s  · %s' "$took" "${bg_names[$i]}")")
done
if ((${#failed[@]})); then
	printf '\nfailed: %s\n' "${failed[@]}"
	exit 1
fi

# The scale targets (10,000 GPUs per cycle, a week of 1,000 GPUs, the
# planner's fleet, a week-long job's view) hold for the production build:
# under -race above they run small or skip their bound, so here they run
# again, full size and timed, one at a time with nothing beside them: their
# bounds are CPU time, or multiples of a calibration measured in the same
# test, but a neighbour's memory traffic still moves CPU time.
step "scale targets, timed, alone"
gotest "scale: engine" -v -count=1 -timeout 30m -run '^TestBench' ./analyzer/engine
gotest "scale: planner" -v -count=1 -timeout 30m -run '^(TestScaleEmbedded|TestPrometheusFleetIndependent|TestPrometheusScale|TestPrometheusScaleRecorded)$' ./analyzer/plan
gotest "scale: job view" -v -count=1 -timeout 10m -run '^TestWeekJobUnderASecond$' ./analyzer/jobview
gotest "scale: demo" -v -count=1 -timeout 10m -run '^TestAccountingIdentity$' ./analyzer/demo

step "benchmark: scrape cost against a prepared buffer"
bash scripts/bench-scrape.sh
