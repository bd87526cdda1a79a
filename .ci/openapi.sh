#!/usr/bin/env bash
# Validates the OpenAPI document that `turnledger serve` serves with an
# outside OpenAPI 3.1 validator (Redocly's CLI, pinned, from the npm
# registry): errors fail; warnings are printed. Installs Debian's nodejs and
# npm, and curl, when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null || ! command -v curl >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm curl
fi
tmp=$(mktemp -d)
pid=
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/turnledger" ./cmd/turnledger
TURNLEDGER_ADMIN_TOKEN=openapi-check "$tmp/turnledger" serve --addr 127.0.0.1:0 --data "$tmp/data" --sync interval >"$tmp/serve.out" 2>&1 &
pid=$!
url=
for _ in $(seq 300); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/serve.out" | head -n 1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then echo "serve did not start:"; cat "$tmp/serve.out"; exit 1; fi
curl -fsS "$url/openapi.json" >"$tmp/openapi.json"
(cd "$tmp" && npm install --no-audit --no-fund --silent @redocly/cli@2.77.0 >/dev/null && ./node_modules/.bin/redocly lint --format=summary openapi.json)
