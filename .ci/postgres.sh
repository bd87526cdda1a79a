# Sourced by .ci/test (with set -euo pipefail active): installs Debian's
# PostgreSQL if its server binaries are missing, starts a throwaway server on
# 127.0.0.1 and exports TURNLEDGER_TEST_POSTGRES_URL for internal/pgtest.
# The server is stopped and its files removed when the calling shell exits.

tl_pg_bindir() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

tl_pg_bin=$(tl_pg_bindir || true)
if [ -z "$tl_pg_bin" ] || [ ! -x "$tl_pg_bin/initdb" ]; then
  echo "--- installing postgresql"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
  tl_pg_bin=$(tl_pg_bindir)
fi

# PostgreSQL refuses to run as root: run it as the postgres user then, from
# /tmp, a directory it can read (the clone's may not be: its tools would
# print "could not change directory ... Permission denied"). Every path
# given to them is absolute.
tl_pg_as() {
  if [ "$(id -u)" = 0 ]; then (cd /tmp && runuser -u postgres -- "$@"); else "$@"; fi
}

tl_pg_dir=$(mktemp -d /tmp/turnledger-pg.XXXXXX)
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$tl_pg_dir"; fi
tl_pg_stop() {
  tl_pg_as "$tl_pg_bin/pg_ctl" -D "$tl_pg_dir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$tl_pg_dir"
}
trap tl_pg_stop EXIT

tl_pg_as "$tl_pg_bin/initdb" -D "$tl_pg_dir/data" -U postgres --auth=trust --no-sync -E UTF8 --no-locale >"$tl_pg_dir/initdb.log"

# A free port: from 55432 on, the first one nothing listens on and the server
# can bind (a port of the ephemeral range may be held by an outgoing
# connection, which the listen probe cannot see: then try the next one).
tl_pg_port=55432
tl_pg_tries=0
while :; do
  while (exec 3<>"/dev/tcp/127.0.0.1/$tl_pg_port") 2>/dev/null; do
    tl_pg_port=$((tl_pg_port + 1))
  done
  if tl_pg_as "$tl_pg_bin/pg_ctl" -D "$tl_pg_dir/data" -l "$tl_pg_dir/server.log" -w -t 60 \
    -o "-p $tl_pg_port -k $tl_pg_dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null 2>&1; then
    break
  fi
  tl_pg_tries=$((tl_pg_tries + 1))
  if [ "$tl_pg_tries" -ge 20 ]; then
    echo "postgresql did not start; its log:" >&2
    cat "$tl_pg_dir/server.log" >&2
    exit 1
  fi
  tl_pg_port=$((tl_pg_port + 1))
done
echo "--- started postgresql ($tl_pg_bin) on 127.0.0.1:$tl_pg_port"
tl_pg_as "$tl_pg_bin/createdb" -h 127.0.0.1 -p "$tl_pg_port" -U postgres turnledger_test

export TURNLEDGER_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$tl_pg_port/turnledger_test?sslmode=disable"
