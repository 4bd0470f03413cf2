#!/bin/sh
# start.sh starts a private PostgreSQL (Debian's postgresql 15) on loopback
# for the shared-store tests (--storage.url postgres://...). It installs
# nothing: .ci/run installs the Debian package `postgresql` first. The
# cluster lives in a temporary folder; PostgreSQL refuses to run as root, so
# under root the server runs as the `postgres` user (runuser).
#
# Usage:  eval "$(sh test/postgres/start.sh)"
#
# On success it prints `export GPUWATCH_TEST_POSTGRES_URL=...` and
# `export GPUWATCH_POSTGRES_DIR=...` on stdout (and writes them to
# $GPUWATCH_POSTGRES_DIR/env); progress goes to stderr.
#
# Environment (all optional):
#   GPUWATCH_POSTGRES_DIR   cluster folder (default ${TMPDIR:-/tmp}/gpuwatch-postgres)
#   GPUWATCH_POSTGRES_PORT  TCP port on 127.0.0.1 (default 15432)
#
# Running it again with the same folder while the server is up reuses it.
set -eu

say() { printf 'start.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

dir=${GPUWATCH_POSTGRES_DIR:-${TMPDIR:-/tmp}/gpuwatch-postgres}
port=${GPUWATCH_POSTGRES_PORT:-15432}

bin=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
	[ -x "$d/initdb" ] && { bin=$d; break; }
done
if [ -z "$bin" ] && command -v initdb >/dev/null 2>&1; then
	bin=$(dirname "$(command -v initdb)")
fi
[ -n "$bin" ] || die "initdb not found: install the Debian package postgresql"

as=
if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root and there is no postgres user to run the server as"
	as="runuser -u postgres --"
fi

url="postgres://gpuwatch@127.0.0.1:$port/gpuwatch?sslmode=disable"
emit() {
	printf 'export GPUWATCH_POSTGRES_DIR=%s\nexport GPUWATCH_TEST_POSTGRES_URL=%s\n' "$dir" "'$url'" | tee "$dir/env"
}

mkdir -p "$dir"
[ -n "$as" ] && chown postgres: "$dir"
chmod 0700 "$dir"
if $as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
	say "reusing the server in $dir"
	emit
	exit 0
fi
if [ ! -s "$dir/data/PG_VERSION" ]; then
	say "initdb into $dir/data"
	# C collation: the store compares keys bytewise (range scans on key
	# prefixes), as SQLite does.
	$as "$bin/initdb" -D "$dir/data" -U gpuwatch --auth=trust --locale=C --encoding=UTF8 >"$dir/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 3 "$dir/initdb.log")"
fi
say "starting postgres on 127.0.0.1:$port"
# fsync off: a test database that a crash may lose; the tests kill the
# analyzer, never the server.
$as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
	start >/dev/null || die "postgres did not start: $(tail -n 5 "$dir/server.log")"
"$bin/psql" -h 127.0.0.1 -p "$port" -U gpuwatch -d postgres -qtAc "SELECT 1 FROM pg_database WHERE datname = 'gpuwatch'" | grep -q 1 ||
	"$bin/createdb" -h 127.0.0.1 -p "$port" -U gpuwatch gpuwatch || die "createdb failed"
emit
