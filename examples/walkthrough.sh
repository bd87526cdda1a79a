#!/usr/bin/env bash
# The README's walk-through, one Turn from registration to finish, as a script
# to run against `turnledger serve` (bash, curl and jq):
#
#   go run ./cmd/turnledger serve &        # or any running serve
#   bash examples/walkthrough.sh
#
# B is the API's base URL (default http://127.0.0.1:8000); ADMIN the admin
# bearer token (default: the one serve keeps in $DATA/admin-token, DATA
# defaulting to ./data). It works in project "demo" and runs once per data
# directory: dispatch_key makes the dispatch idempotent, so a second run finds
# its Turn finished, says so and stops before it claims anything. Each response is printed on one line, with its HTTP
# status first when it is not 200; the README shows them (ids shortened), and
# a test (TestWalkthroughScriptMatchesTheREADME) keeps the two in step.
set -euo pipefail

B=${B:-http://127.0.0.1:8000}
ADMIN=${ADMIN:-$(cat "${DATA:-./data}/admin-token")}
for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "walkthrough.sh needs $tool (Debian: apt-get install $tool)" >&2; exit 1; }
done

# api METHOD PATH [curl options...]: curl -s -X METHOD $B$PATH; prints the
# response on one line (its status first unless 200) and keeps the body in
# OUT. A status other than 200 fails, so the script stops at the first error.
api() {
  local method=$1 path=$2 resp status
  shift 2
  resp=$(curl -sS -X "$method" "$B$path" -w '\n%{http_code}' "$@")
  status=${resp##*$'\n'}
  OUT=${resp%$'\n'*}
  OUT=${OUT%$'\n'}
  if [ "$status" = 200 ]; then
    jq -c . <<<"$OUT"
  else
    echo "$status $(jq -c . <<<"$OUT")"
    return 1
  fi
}
AS_ADMIN=(-H "Authorization: Bearer $ADMIN")

# 1. Register a requester and a worker (the admin bearer acts as the trusted registration actor).
api POST /v3r1/projects/demo/agents:register "${AS_ADMIN[@]}" -d '{
  "spec": {"agent_id": "planner", "role": "planner", "description": "dispatches work", "enabled": true,
           "accepts_work": false, "capacity": 0, "capabilities": [], "grants": ["turns:dispatch"], "public_metadata": {}},
  "provenance": {"kind": "manual", "external_ref": "readme", "payload_hash": null}}'
api POST /v3r1/projects/demo/agents:register "${AS_ADMIN[@]}" -d '{
  "spec": {"agent_id": "writer", "role": "writer", "description": "writes summaries", "enabled": true,
           "accepts_work": true, "capacity": 2, "capabilities": ["summarize"], "grants": [], "public_metadata": {}},
  "provenance": {"kind": "manual", "external_ref": "readme", "payload_hash": null}}'

# 2. Issue each a credential. The token is shown once; only its hash is kept.
api POST /v3r1/projects/demo/agents/planner/credentials:issue "${AS_ADMIN[@]}"
PLANNER=$(jq -r .token <<<"$OUT")
api POST /v3r1/projects/demo/agents/writer/credentials:issue "${AS_ADMIN[@]}"
WRITER=$(jq -r .token <<<"$OUT")

# Agents authenticate with three headers.
AS_PLANNER=(-H "X-Svc-Project-Id: demo" -H "X-Svc-Agent-Id: planner" -H "Authorization: Bearer $PLANNER")
AS_WRITER=(-H "X-Svc-Project-Id: demo" -H "X-Svc-Agent-Id: writer" -H "Authorization: Bearer $WRITER")

# 3. Dispatch a root Turn to the writer. dispatch_key makes it idempotent.
api POST /v3r1/projects/demo/turns:dispatch "${AS_PLANNER[@]}" -d '{
  "requested_by": {"project_id": "demo", "agent_id": "planner"},
  "target_agent": {"project_id": "demo", "agent_id": "writer"},
  "input": {"text": "Summarise the release notes."}, "turn_kind": "summarize",
  "dispatch_key": "release-notes-1", "authority": {"mode": "root_request", "request_id": "req-1"},
  "meta": {"note": "first turn"}, "trace": null}'
TURN=$(jq -r .turn_id <<<"$OUT")
if [ "$(jq -r .state <<<"$OUT")" != queued ]; then
  # dispatch_key found the Turn of an earlier run: stop before claiming, so
  # that no other Turn queued for writer is claimed and left behind.
  echo "the walk-through ran on this data directory already: dispatch_key release-notes-1 is Turn $TURN, $(jq -r .state <<<"$OUT"); nothing was claimed. Run it against a fresh one (serve --data DIR)" >&2
  exit 1
fi

# 4. The writer claims its oldest queued Turn (JSON null when there is none).
api POST /v3r1/projects/demo/agents/writer/claims:claim "${AS_WRITER[@]}" \
  -d '{"agent": {"project_id": "demo", "agent_id": "writer"}}'
if [ "$OUT" = null ]; then
  echo "nothing to claim: is another worker claiming writer's Turns? The walk-through needs writer to itself" >&2
  exit 1
fi
CLAIM=$(jq -c .claim <<<"$OUT")   # passed back as it came: {project_id, turn_id, agent_id, token, expires_at}

# 5. Append semantic records under the claim, and renew it before it expires.
api POST "/v3r1/projects/demo/turns/$TURN/semantic-records" "${AS_WRITER[@]}" \
  -d "{\"claim\": $CLAIM, \"role\": \"draft\", \"payload\": {\"text\": \"Three fixes and one feature.\"}}"
api POST /v3r1/projects/demo/claims:renew "${AS_WRITER[@]}" -d "{\"claim\": $CLAIM}"

# 6. Finish. A final_payload becomes the last record, with final_record_role as its role.
api POST "/v3r1/projects/demo/turns/$TURN:finish" "${AS_WRITER[@]}" -d "{\"claim\": $CLAIM,
  \"outcome\": \"succeeded\", \"final_payload\": {\"summary\": \"Three fixes and one feature.\"}, \"final_record_role\": \"summary\"}"

# 7. Read it back: the semantic context and the Turn's ledger feed, with cursors.
api GET "/v3r1/projects/demo/turns/$TURN/context?limit=10" "${AS_PLANNER[@]}"
api GET "/v3r1/projects/demo/turns/$TURN/feed?after_ledger_seq=0&limit=2" "${AS_PLANNER[@]}"

# The claim token is dead once the Turn is finished (api fails: `|| true` goes on):
api POST "/v3r1/projects/demo/turns/$TURN:finish" "${AS_WRITER[@]}" \
  -d "{\"claim\": $CLAIM, \"outcome\": \"succeeded\", \"final_payload\": null, \"final_record_role\": \"\"}" || true
