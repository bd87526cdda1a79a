# Sourced by .ci/test (with set -euo pipefail active): installs Debian's
# chromium when /usr/bin/chromium is missing, for the headless browser tests
# (internal/browsertest: the runtime's browser client and the web console).
if [ ! -x /usr/bin/chromium ]; then
  echo "--- installing chromium"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
