#!/bin/sh
# start.sh starts a private Kubernetes control plane on loopback for the
# integration tests: Debian's etcd (data on /dev/shm), kube-apiserver and
# kube-controller-manager built from the Go module proxy by build.sh (cached
# outside the repository), and kwok, which plays the kubelet of fake nodes
# that advertise nvidia.com/gpu and a MIG resource, so pods bound to them go
# Running without a container runtime.
#
# The apiserver is set up as a cluster admin would: its own CA (openssl), a
# serving certificate, client certificates, a service-account key pair,
# --authorization-mode=Node,RBAC and --anonymous-auth=false. The
# controller-manager is there because much the analyzer relies on is its
# work: a PodDisruptionBudget's status (disruptionsAllowed), a namespace's
# default ServiceAccount, ReplicaSets under Deployments, garbage collection.
#
# There is no scheduler: a test's pod (or pod template) names its node
# (spec.nodeName). GPUWATCH_KUBE_NODES lists the fake nodes.
#
# Usage:  eval "$(sh test/kubernetes/start.sh)"
#
# On success it prints `export` lines for KUBECONFIG, GPUWATCH_KUBE_DIR,
# GPUWATCH_KUBE_NODES and GPUWATCH_KUBE_VERSION on stdout (and writes them to
# $GPUWATCH_KUBE_DIR/env); progress goes to stderr.
#
# Environment (all optional; build.sh reads its own):
#   GPUWATCH_KUBE_DIR      state folder (default ${TMPDIR:-/tmp}/gpuwatch-kube); etcd's data goes
#                          to /dev/shm/gpuwatch-kube-<hash of the folder>
#   GPUWATCH_KUBE_PORT     first port tried for the apiserver (default 16443; etcd's from 16379),
#                          the next free one is taken
#   GPUWATCH_KUBE_TIMEOUT  seconds to wait for each part to be ready (default 120)
#
# Running it again with the same folder while the processes are up reuses them.
set -eu

say() { printf 'start.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
dir=${GPUWATCH_KUBE_DIR:-${TMPDIR:-/tmp}/gpuwatch-kube}
timeout=${GPUWATCH_KUBE_TIMEOUT:-120}
nodes="gpu-node-0 gpu-node-1"

for b in etcd openssl curl base64; do
	command -v "$b" >/dev/null 2>&1 || die "$b not found: install the Debian packages etcd-server, openssl, curl and coreutils"
done
mkdir -p "$dir/pki" "$dir/log" "$dir/run"
dir=$(cd "$dir" && pwd)
kc=$dir/admin.kubeconfig

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

emit() {
	{
		printf 'export KUBECONFIG=%s\n' "$kc"
		printf 'export GPUWATCH_KUBE_DIR=%s\n' "$dir"
		printf "export GPUWATCH_KUBE_NODES='%s'\n" "$nodes"
		printf 'export GPUWATCH_KUBE_VERSION=%s\n' "$version"
	} >"$dir/env"
	cat "$dir/env"
}

# Everything up from an earlier run with this folder: reuse it.
if [ -s "$dir/env" ] && alive "$dir/run/etcd.pid" && alive "$dir/run/kube-apiserver.pid" &&
	alive "$dir/run/kube-controller-manager.pid" && alive "$dir/run/kwok.pid"; then
	say "reusing the control plane in $dir"
	cat "$dir/env"
	exit 0
fi
GPUWATCH_KUBE_DIR=$dir sh "$here/stop.sh" 2>/dev/null || true

t0=$(date +%s.%N)
built=$(sh "$here/build.sh") || die "build.sh failed"
bin=$(printf '%s\n' "$built" | sed -n 's/^GPUWATCH_KUBE_BIN=//p')
version=$(printf '%s\n' "$built" | sed -n 's/^GPUWATCH_KUBE_VERSION=//p')
kwok=$(printf '%s\n' "$built" | sed -n 's/^GPUWATCH_KWOK=//p')
t1=$(date +%s.%N)

# free PORT: PORT or the next port nothing listens on.
free() {
	p=$1
	while ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; do p=$((p + 1)); done
	echo "$p"
}
api_port=$(free "${GPUWATCH_KUBE_PORT:-16443}")
etcd_port=$(free 16379)
peer_port=$(free $((etcd_port + 1)))

# The PKI: a CA, the apiserver's serving certificate, one client certificate
# per caller (the admin in system:masters, the controller-manager), and the
# key pair service-account tokens are signed with.
pki=$dir/pki
if [ ! -s "$pki/ca.crt" ]; then
	say "making a CA and certificates in $pki"
	(
		cd "$pki"
		umask 077
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=gpuwatch-test-ca \
			-keyout ca.key -out ca.crt 2>/dev/null
		cert() { # name subject [extensions]
			openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
			printf '%s\n' "${3:-extendedKeyUsage=clientAuth}" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
				-extfile "$1.ext" -out "$1.crt" 2>/dev/null
			rm -f "$1.csr" "$1.ext"
		}
		cert apiserver /CN=kube-apiserver \
			"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1
extendedKeyUsage=serverAuth"
		cert admin "/O=system:masters/CN=gpuwatch-admin"
		cert controller-manager /CN=system:kube-controller-manager
		cert kwok "/O=system:masters/CN=kwok"
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
fi

# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
	f=$dir/$1.kubeconfig
	(
		umask 077
		cat >"$f" <<KC
apiVersion: v1
kind: Config
clusters:
- name: gpuwatch
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$pki/$1.crt")
    client-key-data: $(base64 -w0 "$pki/$1.key")
contexts:
- name: gpuwatch
  context: {cluster: gpuwatch, user: $1}
current-context: gpuwatch
KC
	)
}
rm -f "$dir"/*.kubeconfig
kubeconfig admin
kubeconfig controller-manager
kubeconfig kwok

# api PATH [curl arguments]: a call to the apiserver as the admin.
api() {
	p=$1
	shift
	curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@" "https://127.0.0.1:$api_port$p"
}
# ready NODE: whether NODE's Ready condition is True.
ready() { api "/api/v1/nodes/$1" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; }

# wait_for WHAT PIDFILE LOG COMMAND...: run COMMAND every 0.2 s until it
# succeeds; fail when the process of PIDFILE ends or after the timeout.
wait_for() {
	what=$1 pidfile=$2 log=$3
	shift 3
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt $((timeout * 5)) ] || ! alive "$pidfile"; then
			say "$what not ready (after $((i / 5))s); the end of $log:"
			tail -n 30 "$log" >&2 || true
			exit 1
		fi
		sleep 0.2
	done
}

# etcd's data in memory: a test control plane needs no durability, and
# fsyncs on a shared CI disk would make every write slow.
shm=/dev/shm/gpuwatch-kube-$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
rm -rf "$shm"
mkdir -p "$shm"
chmod 0700 "$shm"
printf '%s\n' "$shm" >"$dir/run/etcd-data"
say "starting etcd (127.0.0.1:$etcd_port, data in $shm)"
setsid etcd --name gpuwatch --data-dir "$shm" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "gpuwatch=http://127.0.0.1:$peer_port" --listen-metrics-urls "" \
	--unsafe-no-fsync --quota-backend-bytes 1073741824 \
	</dev/null >"$dir/log/etcd.log" 2>&1 &
echo $! >"$dir/run/etcd.pid"
wait_for etcd "$dir/run/etcd.pid" "$dir/log/etcd.log" curl -sf "http://127.0.0.1:$etcd_port/health"

# WatchList=false: a watch list needs etcd's progress notifications (etcd
# 3.4.31 or 3.5.13); with Debian's etcd 3.4 each of kwok's watches failed
# and listed again, and pods went Running 10 s late. Without the feature,
# clients fall back to a plain list and watch.
say "starting kube-apiserver $version (https://127.0.0.1:$api_port)"
setsid "$bin/kube-apiserver" \
	--etcd-servers="http://127.0.0.1:$etcd_port" \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
	--cert-dir="$pki" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--authorization-mode=Node,RBAC --anonymous-auth=false \
	--service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
	--endpoint-reconciler-type=none \
	--feature-gates=WatchList=false \
	--profiling=false --v=0 \
	</dev/null >"$dir/log/kube-apiserver.log" 2>&1 &
echo $! >"$dir/run/kube-apiserver.pid"
wait_for kube-apiserver "$dir/run/kube-apiserver.pid" "$dir/log/kube-apiserver.log" api /readyz

say "starting kube-controller-manager"
setsid "$bin/kube-controller-manager" \
	--kubeconfig="$dir/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--use-service-account-credentials=true --leader-elect=false \
	--bind-address=127.0.0.1 --secure-port=0 --profiling=false \
	--cluster-name=gpuwatch --v=0 \
	</dev/null >"$dir/log/kube-controller-manager.log" 2>&1 &
echo $! >"$dir/run/kube-controller-manager.pid"
# Ready when it has made the default namespace's ServiceAccount.
wait_for kube-controller-manager "$dir/run/kube-controller-manager.pid" "$dir/log/kube-controller-manager.log" \
	api /api/v1/namespaces/default/serviceaccounts/default

# Fake GPU nodes, each with 8 GPUs and, as MIG slices of them, 14
# nvidia.com/mig-1g.10gb. kwok keeps them Ready and runs their pods.
say "starting kwok and registering nodes $nodes"
for n in $nodes; do
	api /api/v1/nodes -X POST -H 'Content-Type: application/json' -o /dev/null --data-binary @- <<NODE ||
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$n",
   "annotations": {"kwok.x-k8s.io/node": "fake"},
   "labels": {"kubernetes.io/hostname": "$n", "type": "kwok", "nvidia.com/gpu.present": "true"}},
 "status": {
   "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "14"},
   "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "14"}}}
NODE
		die "could not register node $n"
done
setsid "$kwok" --kubeconfig="$dir/kwok.kubeconfig" --config="$(dirname "$kwok")/stages.yaml" \
	--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
	--cidr=10.244.0.0/16 --node-ip=127.0.0.1 --server-address=127.0.0.1:0 \
	</dev/null >"$dir/log/kwok.log" 2>&1 &
echo $! >"$dir/run/kwok.pid"
for n in $nodes; do
	wait_for "node $n" "$dir/run/kwok.pid" "$dir/log/kwok.log" ready "$n"
done
t2=$(date +%s.%N)
say "ready: build (or cache check) $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")s, start-up $(awk "BEGIN{printf \"%.1f\", $t2 - $t1}")s; logs in $dir/log"
emit
