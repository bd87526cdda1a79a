#!/usr/bin/env bash
# Runs `turnledger bench` and the River lifecycle (bench/river) side by side
# on this machine, alternating, in both durability classes:
#   durable:     turnledger --sync always    vs PostgreSQL's defaults
#   crash-safe:  turnledger --sync interval  vs synchronous_commit=off
# Usage: bench/river/compare.sh [rounds (2)] [duration (15s)] [agents (64)]
# TL_BENCH_ARGS adds flags to every turnledger bench (e.g. "--projects 8").
# Starts a throwaway PostgreSQL on 127.0.0.1 (Debian's, installed if
# missing, as .ci/postgres.sh does) and removes it on exit. Prints every
# command line before its output.
set -euo pipefail
rounds=${1:-2}
duration=${2:-15s}
agents=${3:-64}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/turnledger-river.XXXXXX)
chmod 755 "$work" # the postgres user reaches its data directory below it

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
pg_as() {
  if [ "$(id -u)" = 0 ]; then (cd /tmp && runuser -u postgres -- "$@"); else "$@"; fi
}
pgdir="$work/pg"
mkdir -p "$pgdir"
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$pgdir"; fi
port=
pg_stop() {
  pg_as "$pg_bin/pg_ctl" -D "$pgdir/data" -m fast stop >/dev/null 2>&1 || true
}
cleanup() {
  pg_stop
  rm -rf "$work"
}
trap cleanup EXIT
pg_as "$pg_bin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$pgdir/initdb.log"

# pg_start OPTIONS: (re)start the server with extra -c settings on a free
# loopback port, and a fresh database.
pg_start() {
  pg_stop
  port=56432
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  pg_as "$pg_bin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 \
    -o "-p $port -k $pgdir -c listen_addresses=127.0.0.1 -c max_connections=300 $*" start >/dev/null
  pg_as "$pg_bin/dropdb" --if-exists -h 127.0.0.1 -p "$port" -U postgres riverbench
  pg_as "$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U postgres riverbench
}

echo "--- building turnledger and bench/river"
(cd "$repo" && go build -o "$work/turnledger" ./cmd/turnledger)
(cd "$repo/bench/river" && go build -o "$work/riverbench" .)
echo "--- $(nproc) cores; $("$pg_bin/postgres" --version); $(go version)"

for round in $(seq 1 "$rounds"); do
  for class in durable crash-safe; do
    if [ "$class" = durable ]; then sync=always; pgopts=""; else sync=interval; pgopts="-c synchronous_commit=off"; fi
    echo
    echo "=== round $round, $class"
    echo "\$ turnledger bench --agents $agents --duration $duration --sync $sync ${TL_BENCH_ARGS:-}"
    # shellcheck disable=SC2086 # TL_BENCH_ARGS is a list of flags
    "$work/turnledger" bench --agents "$agents" --duration "$duration" --sync "$sync" ${TL_BENCH_ARGS:-} 2>/dev/null
    pg_start "$pgopts"
    echo "\$ riverbench --inserters $agents --duration $duration --fetch-cooldown 1ms  (PostgreSQL ${pgopts:-defaults})"
    "$work/riverbench" --url "postgres://postgres@127.0.0.1:$port/riverbench" --inserters "$agents" --duration "$duration" --fetch-cooldown 1ms
  done
done
