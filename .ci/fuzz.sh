#!/usr/bin/env bash
# Runs every fuzz target of the repository for a bounded time each
# (FUZZTIME, default 3s): the decoders of request bodies, ids, query
# parameters, agent authentication headers, tokens, feed items, events and
# the projection file. The corpus
# of found inputs is kept in <package>/testdata/fuzz/<target> and is also run
# by every plain `go test`. Usage: bash .ci/fuzz.sh [FUZZTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-${FUZZTIME:-3s}}
targets=$(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  pkg=$(dirname "$f")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s#^func #$pkg #"
done)
echo "$targets" | while read -r pkg target; do
  echo "--- fuzz $pkg $target ($fuzztime)"
  go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" 2>&1 | grep -v '^fuzz: elapsed' || { echo "fuzz $pkg $target failed"; exit 1; }
done
