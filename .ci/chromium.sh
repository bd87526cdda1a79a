# Sourced by .ci/test (with set -euo pipefail active): installs Debian's
# chromium when /usr/bin/chromium is missing, for the browser tests (the web
# console's in cmd/turnledger/console_test.go). The tests start it headless
# themselves, each with a fresh profile.
if [ ! -x /usr/bin/chromium ]; then
  echo "--- installing chromium"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
