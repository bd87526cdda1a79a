#!/usr/bin/env bash
# The Python and TypeScript clients' tests against a real serve, on a clean
# Debian machine as root: installs node and npm from Debian when node is
# missing, the TypeScript toolchain from the npm registry (package-lock.json),
# builds the serve binary once and hands it to both suites (TURNLEDGER_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "--- installing nodejs and npm (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if ! command -v python3 >/dev/null; then
  echo "--- installing python3 (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "node $(node --version) is too old: the TypeScript client needs node >= 20" >&2
  exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "python3 >= 3.10 is needed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "--- go build ./cmd/turnledger (the serve the client tests start)"
go build -o "$tmp/turnledger" ./cmd/turnledger
export TURNLEDGER_BIN="$tmp/turnledger"

echo "--- clients/python: python3 -m unittest discover ($(python3 --version))"
(cd "$root/clients/python" && python3 -m unittest discover -v)

echo "--- clients/typescript: npm ci, npm run build, npm test (node $(node --version))"
cd "$root/clients/typescript"
npm ci --no-audit --no-fund --loglevel=error
npm run build
npm test
