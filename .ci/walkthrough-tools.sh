# Sourced by .ci/test (with set -euo pipefail active): installs what
# examples/walkthrough.sh needs, Debian's curl and jq, when either is missing
# (TestWalkthroughScriptMatchesTheREADME runs the script, and
# TestWorkerSectionMatchesTheDocs docs/client.md's worker section after it).
tl_wt_missing=()
for tl_wt_tool in curl jq; do
  command -v "$tl_wt_tool" >/dev/null || tl_wt_missing+=("$tl_wt_tool")
done
if [ "${#tl_wt_missing[@]}" -gt 0 ]; then
  echo "--- installing ${tl_wt_missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${tl_wt_missing[@]}"
fi
