#!/bin/sh
# stop.sh stops the Slurm daemons that test/slurm/start.sh started for the
# same GPUWATCH_SLURM_DIR (slurmd, slurmctld, slurmdbd and its MariaDB), by
# their pid files. munged is shared by every Slurm
# on the machine and is left running unless GPUWATCH_SLURM_STOP_MUNGE=1.
set -eu

dir=${GPUWATCH_SLURM_DIR:-${TMPDIR:-/tmp}/gpuwatch-slurm}

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

stop "$dir/run/slurmd.pid"
stop "$dir/run/slurmctld.pid"
stop "$dir/run/slurmdbd.pid"
stop "$dir/run/mysqld.pid"
if [ "${GPUWATCH_SLURM_STOP_MUNGE:-0}" = 1 ]; then
	stop /run/munge/munged.pid
fi
printf 'stop.sh: stopped Slurm in %s\n' "$dir" >&2
