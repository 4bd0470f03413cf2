#!/bin/sh
# stop.sh stops what test/kubernetes/start.sh started for the same
# GPUWATCH_KUBE_DIR (kwok, kube-controller-manager, kube-apiserver, etcd), by
# their pid files, and removes etcd's data from /dev/shm. The built binaries
# stay in build.sh's cache.
set -eu

dir=${GPUWATCH_KUBE_DIR:-${TMPDIR:-/tmp}/gpuwatch-kube}

stop() {
	pidfile=$1
	[ -s "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	if kill "$pid" 2>/dev/null; then
		i=0
		while kill -0 "$pid" 2>/dev/null; do
			i=$((i + 1))
			if [ "$i" -gt 100 ]; then
				kill -9 "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
	fi
	rm -f "$pidfile"
}

stop "$dir/run/kwok.pid"
stop "$dir/run/kube-controller-manager.pid"
stop "$dir/run/kube-apiserver.pid"
stop "$dir/run/etcd.pid"
if [ -s "$dir/run/etcd-data" ]; then
	case $(cat "$dir/run/etcd-data") in
	/dev/shm/gpuwatch-kube-*) rm -rf "$(cat "$dir/run/etcd-data")" ;;
	esac
	rm -f "$dir/run/etcd-data"
fi
rm -f "$dir/env"
printf 'stop.sh: stopped the control plane in %s\n' "$dir" >&2
