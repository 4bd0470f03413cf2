#!/bin/sh
# start.sh starts a private single-node Slurm (munged, slurmctld, slurmd, and
# slurmdbd with its own MariaDB for accounting) for the integration tests. It
# installs nothing: .ci/run installs the Debian packages `slurm-wlm`, `munge`,
# `slurmdbd` and `mariadb-server` first. It must run as root (slurmd and the
# Prolog/Epilog run as root, as on a real node).
#
# Accounting is there because the end-of-job summary is written from the
# Epilog, when slurmctld no longer lets the job be changed: it goes into
# slurmdbd (`sacctmgr update job`), where `sacct` reads it back.
#
# Usage:  eval "$(test/slurm/start.sh)"
#
# On success it prints `export` lines for SLURM_CONF, GPUWATCH_SLURM_CONF,
# GPUWATCH_SLURM_DIR, GPUWATCH_SLURM_GPUS and GPUWATCH_JOB_MAPPING_DIR on stdout (and writes them
# to $GPUWATCH_SLURM_DIR/env); progress goes to stderr.
#
# Environment (all optional):
#   GPUWATCH_SLURM_DIR      state folder (default ${TMPDIR:-/tmp}/gpuwatch-slurm)
#   GPUWATCH_SLURM_GPUS     number of fake GPUs, plain files <dir>/gpus/nvidia<N> (default 8,
#                           room for two test packages submitting 2-GPU jobs at once)
#   GPUWATCH_SLURMCTLD_PORT slurmctld port (default 16817)
#   GPUWATCH_SLURMD_PORT    slurmd port (default 16818)
#   GPUWATCH_SLURMDBD_PORT  slurmdbd port (default slurmd's + 1)
#   GPUWATCH_SLURM_DB_PORT  MariaDB port, loopback only (default slurmd's + 2)
#   GPUWATCH_SLURM_PROLOG   Prolog program (default: deploy/slurm/prolog writing to <dir>/job-mapping)
#   GPUWATCH_SLURM_EPILOG   Epilog program (default: deploy/slurm/epilog)
#   GPUWATCH_SLURM_CPUS     CPUs the node claims to have (default 16, whatever the machine has)
#   GPUWATCH_SLURM_TIMEOUT  seconds to wait for the node to become idle (default 60)
#
# Running it again with the same folder while the daemons are up reuses them.
set -eu

say() { printf 'start.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${GPUWATCH_SLURM_DIR:-${TMPDIR:-/tmp}/gpuwatch-slurm}
ngpus=${GPUWATCH_SLURM_GPUS:-8}
ctld_port=${GPUWATCH_SLURMCTLD_PORT:-16817}
slurmd_port=${GPUWATCH_SLURMD_PORT:-16818}
# Derived from slurmd's, so instances started with distinct ports apart do
# not collide on these either.
dbd_port=${GPUWATCH_SLURMDBD_PORT:-$((slurmd_port + 1))}
db_port=${GPUWATCH_SLURM_DB_PORT:-$((slurmd_port + 2))}
timeout=${GPUWATCH_SLURM_TIMEOUT:-60}
mapdir=$dir/job-mapping

for b in munged munge unmunge slurmctld slurmd slurmdbd scontrol sinfo sbatch sacctmgr mariadbd mariadb-install-db mariadb-admin mariadb; do
	command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
	command -v "$b" >/dev/null 2>&1 || die "$b not found: install the Debian packages slurm-wlm, munge, slurmdbd and mariadb-server"
done
[ "$(id -u)" = 0 ] || die "must run as root (slurmd and its Prolog/Epilog run as root)"

mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/gpus" "$dir/db" "$mapdir"
chmod 0755 "$dir" "$mapdir"
chmod 0700 "$dir/db"

# munge: one key and one daemon per machine, shared by every Slurm on it.
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
	if [ ! -s /etc/munge/munge.key ]; then
		say "creating /etc/munge/munge.key"
		mkdir -p /etc/munge
		dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
		chmod 0400 /etc/munge/munge.key
	fi
	mkdir -p /run/munge /var/lib/munge /var/log/munge
	say "starting munged"
	munged --force
	i=0
	until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -le 50 ] || die "munged did not start"
		sleep 0.1
	done
fi

host=$(hostname -s)
# More CPUs than the machine has (config_overrides lets slurmd accept it), so
# several test jobs of several packages run at once on a small CI machine.
ncpu=${GPUWATCH_SLURM_CPUS:-16}

# Fake GPUs: gres.conf needs device files to exist; plain files serve.
i=0
gpu_last=$((ngpus - 1))
while [ "$i" -lt "$ngpus" ]; do
	: >"$dir/gpus/nvidia$i"
	i=$((i + 1))
done

# The Prolog/Epilog environment that slurmd builds holds no variables of
# slurmd's own, so the mapping folder is passed by small wrappers.
prolog=${GPUWATCH_SLURM_PROLOG:-$dir/etc/prolog}
epilog=${GPUWATCH_SLURM_EPILOG:-$dir/etc/epilog}
if [ -z "${GPUWATCH_SLURM_PROLOG:-}" ]; then
	cat >"$dir/etc/prolog" <<WRAP
#!/bin/sh
GPUWATCH_JOB_MAPPING_DIR='$mapdir'
export GPUWATCH_JOB_MAPPING_DIR
exec '$repo/deploy/slurm/prolog' "\$@"
WRAP
	chmod 0755 "$dir/etc/prolog"
fi
if [ -z "${GPUWATCH_SLURM_EPILOG:-}" ]; then
	cat >"$dir/etc/epilog" <<WRAP
#!/bin/sh
GPUWATCH_JOB_MAPPING_DIR='$mapdir'
export GPUWATCH_JOB_MAPPING_DIR
# Tests that need the end-of-job summary write its settings here.
if [ -r '$dir/etc/gpuwatch-slurm' ]; then
	set -a
	. '$dir/etc/gpuwatch-slurm'
	set +a
fi
# Each run's start and end (epoch seconds) go to log/epilog-times, where
# tests read how long the Epilog held the job in COMPLETING.
t0=\$(date +%s.%N)
'$repo/deploy/slurm/epilog' "\$@"
rc=\$?
printf '%s %s %s\\n' "\${SLURM_JOB_ID:-?}" "\$t0" "\$(date +%s.%N)" >>'$dir/log/epilog-times'
exit \$rc
WRAP
	chmod 0755 "$dir/etc/epilog"
fi

conf=$dir/etc/slurm.conf
cat >"$conf" <<CONF
# Written by test/slurm/start.sh: a private single-node cluster for tests.
ClusterName=gpuwatch
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
Prolog=$prolog
Epilog=$epilog
NodeName=$host NodeAddr=127.0.0.1 CPUs=$ncpu Gres=gpu:$ngpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$dir/etc/gres.conf" <<GRES
AutoDetect=off
Name=gpu File=$dir/gpus/nvidia[0-$gpu_last]
GRES

SLURM_CONF=$conf
export SLURM_CONF

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# wait_for TRIES WHAT COMMAND...: run COMMAND every 0.1 s until it succeeds.
wait_for() {
	tries=$1 what=$2
	shift 2
	i=0
	until "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt "$tries" ]; then
			say "$what did not start; logs in $dir/log"
			tail -n 20 "$dir/log/mysqld.log" "$dir/log/slurmdbd.log" >&2 2>/dev/null || true
			exit 1
		fi
		sleep 0.1
	done
}

# MariaDB for slurmdbd: a private data folder, loopback TCP for slurmdbd
# and a socket in the state folder for this script (root logs in through
# the socket, by its uid; slurmdbd with a password of its own).
cat >"$dir/etc/my.cnf" <<MYCNF
[mysqld]
datadir=$dir/db
socket=$dir/run/mysqld.sock
pid-file=$dir/run/mysqld.pid
log-error=$dir/log/mysqld.log
port=$db_port
bind-address=127.0.0.1
user=root
skip-name-resolve
skip-log-bin
performance-schema=0
# Small and fast: a test database of a few hundred jobs.
innodb-buffer-pool-size=16M
innodb-log-file-size=8M
innodb-flush-log-at-trx-commit=2
innodb-doublewrite=0
MYCNF
sql() { mariadb --defaults-file="$dir/etc/my.cnf" --socket="$dir/run/mysqld.sock" -u root "$@"; }
if ! alive "$dir/run/mysqld.pid"; then
	if [ ! -d "$dir/db/mysql" ]; then
		say "creating the accounting database in $dir/db"
		mariadb-install-db --defaults-file="$dir/etc/my.cnf" --auth-root-authentication-method=socket \
			--skip-test-db >"$dir/log/mariadb-install-db.log" 2>&1 ||
			die "mariadb-install-db failed; see $dir/log/mariadb-install-db.log"
	fi
	say "starting mariadbd (127.0.0.1:$db_port)"
	setsid mariadbd --defaults-file="$dir/etc/my.cnf" </dev/null >>"$dir/log/mysqld.log" 2>&1 &
fi
wait_for 300 mariadbd mariadb-admin --defaults-file="$dir/etc/my.cnf" --socket="$dir/run/mysqld.sock" -u root ping

# slurmdbd's database password: made once, readable by root alone.
[ -s "$dir/etc/db.pass" ] || (umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$dir/etc/db.pass")
pass=$(cat "$dir/etc/db.pass")
sql <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL

# slurmdbd reads slurmdbd.conf beside SLURM_CONF; it must be private.
dbdconf=$dir/etc/slurmdbd.conf
(
	umask 077
	cat >"$dbdconf" <<DBD
# Written by test/slurm/start.sh.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
DBD
	chmod 0600 "$dbdconf"
)
if ! alive "$dir/run/slurmdbd.pid"; then
	say "starting slurmdbd (port $dbd_port)"
	slurmdbd </dev/null >>"$dir/log/slurmdbd.log" 2>&1
fi
wait_for 300 slurmdbd sacctmgr --noheader list cluster
if [ -z "$(sacctmgr --noheader --parsable2 list cluster format=cluster where cluster=gpuwatch 2>/dev/null)" ]; then
	say "registering cluster gpuwatch with slurmdbd"
	sacctmgr --immediate add cluster gpuwatch >/dev/null
	# The accounts the tests submit to (slurmctld replaces an account its
	# user has no association with by the user's default one).
	sacctmgr --immediate add account physics,chem cluster=gpuwatch >/dev/null
	sacctmgr --immediate add user root account=physics,chem cluster=gpuwatch >/dev/null
	sacctmgr --immediate add user nobody account=chem cluster=gpuwatch >/dev/null
fi

if ! alive "$dir/run/slurmctld.pid"; then
	say "starting slurmctld (port $ctld_port)"
	slurmctld -i -f "$conf"
fi
if ! alive "$dir/run/slurmd.pid"; then
	say "starting slurmd (port $slurmd_port)"
	slurmd -f "$conf"
fi

# Wait until the node is idle (resume it if an earlier run left it down).
n=0
while :; do
	state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1 || true)
	case $state in
	idle | mixed | allocated) break ;;
	down* | drain* | drained*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
	esac
	n=$((n + 1))
	if [ "$n" -gt $((timeout * 2)) ]; then
		say "node $host not idle after ${timeout}s (state '${state}'); logs in $dir/log"
		tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
		exit 1
	fi
	sleep 0.5
done
say "node $host is $state"

{
	printf 'export SLURM_CONF=%s\n' "$conf"
	printf 'export GPUWATCH_SLURM_CONF=%s\n' "$conf"
	printf 'export GPUWATCH_SLURM_DIR=%s\n' "$dir"
	printf 'export GPUWATCH_SLURM_GPUS=%s\n' "$ngpus"
	printf 'export GPUWATCH_JOB_MAPPING_DIR=%s\n' "$mapdir"
} >"$dir/env"
cat "$dir/env"
