#!/bin/sh
# stop.sh stops the PostgreSQL that test/postgres/start.sh started for the
# same GPUWATCH_POSTGRES_DIR and removes its cluster.
set -eu

dir=${GPUWATCH_POSTGRES_DIR:-${TMPDIR:-/tmp}/gpuwatch-postgres}
[ -d "$dir/data" ] || exit 0
bin=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
	[ -x "$d/pg_ctl" ] && { bin=$d; break; }
done
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl)")
as=
[ "$(id -u)" = 0 ] && as="runuser -u postgres --"
$as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
rm -rf "$dir"
