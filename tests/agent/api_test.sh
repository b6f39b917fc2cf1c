#!/bin/bash
# client-agent without a server: the operator API, dataset validation before
# joining, auth, persistence (restart marks running participations failed),
# file modes, cancel, SIGTERM. The protocol itself runs against a real
# aggregation-server in `fedsvd local` and tests/integration.
#
#   tests/agent/api_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
AGENT=$BIN/client-agent
. "$(dirname "$0")/../lib/services.sh"
svc_need client-agent
PID=

TOKEN=agent-operator-token-0123456789abcdef
printf '%s\n' "$TOKEN" >"$T/op.token"
chmod 600 "$T/op.token"
JOB=j-0123456789abcdef0123456789abcdef
PTOKEN=party-token-0123456789abcdefghijklmnopqrstu
# a closed port: the job server is unreachable
DEAD_URL=http://127.0.0.1:9/v1/jobs/$JOB

start_agent() {
  solo_start --server-patience "${PATIENCE:-30}" --poll-ms 50 --openapi "${OPENAPI:-$T/missing.yaml}" "$@"
}
stop_agent() { solo_stop "$@"; } # [SIGNAL]: TERM by default; returns the agent's exit status

# jfield PATH: a field of the JSON in $T/body (tests/lib/json.mjs get: .a[0].b, .list.length)
jfield() { node "$JLIB" get "$T/body" "$1"; }

invitation() { # party rows cols [url]
  printf '{"version":1,"job_id":"%s","job_url":"%s","party":%s,"token":"%s","algorithm":"secure-sum","parties":3,"threshold":2,"shape":[%s,%s]}' \
    "$JOB" "${4:-$DEAD_URL}" "$1" "$PTOKEN" "$2" "$3"
}
body() { # party path [format] [fail_at] [url]
  printf '{"invitation":%s,"dataset":{"path":"%s","format":"%s"},"fail_at":%s}' \
    "$(invitation "$1" 3 2 "${5:-}")" "$2" "${3:-auto}" "${4:-null}"
}

# data files
printf '1,2\n3,4\n5,6\n' >"$T/good.csv"
printf '1,2\n3,nan\n5,6\n' >"$T/nan.csv"
printf '1,2\n3,4\n' >"$T/short.csv"
printf '1,2,3\n3,4,5\n5,6,7\n' >"$T/wide.csv"
printf '1,2\n3,4,9\n5,6\n' >"$T/ragged.csv"
printf '1,2\n3,4\n5,6\n7,8\n' >"$T/long.csv"

start_agent
check "agent starts and writes its port" test -n "$PORT"

# ---- anyone: health, metrics, contract
check "healthz" test "$(curl -s "$URL/healthz")" = '{"status": "ok"}' -o \
  "$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")" = 200
check "readyz 200" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200
curl -s "$URL/metrics" >"$T/metrics"
check "metrics text" grep -q '^fedsvd_agent_participations{state="running"} 0' "$T/metrics"
check "openapi 404 when the file is missing" \
  test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/openapi.yaml")" = 404

# ---- data dir
check "identity.key is 0600" test "$(stat -c %a "$T/data/identity.key")" = 600
check "identity.key is 32 bytes" test "$(stat -c %s "$T/data/identity.key")" = 32
check "data dir is 0700" test "$(stat -c %a "$T/data")" = 700

# ---- auth
s=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/participations")
check "401 without token" test "$s" = 401
s=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-0123456789" \
  "$URL/v1/participations")
check "401 with a wrong token" test "$s" = 401

# ---- validation before joining
s=$(req POST /v1/participations '{"invitation":')
check "400 on malformed JSON" test "$s" = 400 -a "$(jfield .code)" = bad_request
s=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: text/plain' --data-binary '{}' "$URL/v1/participations")
check "415 on a non-JSON content type" test "$s" = 415
s=$(req POST /v1/participations "$(body 1 "$T/good.csv" | sed 's/"fail_at"/"extra":1,"fail_at"/')")
check "422 on an unknown field" test "$s" = 422 -a "$(jfield .code)" = invalid
check "... naming it" grep -q extra "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/missing.csv")")
check "422 on a missing file" test "$s" = 422
check "... naming the file" grep -q "missing.csv" "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/nan.csv")")
check "422 on NaN" test "$s" = 422
check "... naming file and line" grep -q 'nan.csv.*line 2' "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/short.csv")")
check "422 on too few rows" test "$s" = 422
check "... naming the shapes" grep -q 'short.csv: shape 2 x 2 does not match' "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/long.csv")")
check "422 on too many rows" test "$s" = 422
check "... naming the line" grep -q 'long.csv.*line 4' "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/wide.csv")")
check "422 on too many columns" test "$s" = 422
s=$(req POST /v1/participations "$(body 1 "$T/ragged.csv")")
check "422 on a ragged row" test "$s" = 422
check "... naming the line" grep -q 'ragged.csv.*line 2' "$T/body"
s=$(req POST /v1/participations "$(body 1 "$T/good.csv" npy)")
check "422 when the format is wrong" test "$s" = 422
s=$(req POST /v1/participations "$(body 1 "$T/good.csv" auto '"finish"')")
check "422 on a bad fail_at" test "$s" = 422
s=$(req POST /v1/participations "$(body 1 "$T/good.csv" | sed 's/"version":1/"version":2/')")
check "422 on invitation version 2" test "$s" = 422
s=$(req POST /v1/participations "$(body 1 "$T/good.csv" auto null "ftp://x/v1/jobs/$JOB")")
check "422 on a non-http job URL" test "$s" = 422
req GET /v1/participations >/dev/null
check "no participation created by bad requests" \
  test "$(jfield .participations.length)" = 0
check "the party token never reaches the log" bash -c "! grep -q '$PTOKEN' '$T/agent.log'"

# ---- a valid request against an unreachable server
s=$(req POST /v1/participations "$(body 1 "$T/good.csv")")
check "201 on a valid request" test "$s" = 201
P1=$(jfield .id)
check "participation id" test "${P1:0:2}" = p-
check "state running" test "$(jfield .state)" = running
check "no token in the response" bash -c "! grep -q '$PTOKEN' '$T/body'"
check "no token file at rest" test ! -e "$T/data/participations/$P1/token"
check "agent.db holds the party token only sealed" bash -c "! grep -qa '$PTOKEN' '$T/data'/agent.db*"
check "agent.key 0600, 32 bytes" test "$(stat -c %a:%s "$T/data/agent.key")" = 600:32
s=$(req POST /v1/participations "$(body 1 "$T/good.csv")")
check "409 for the same job and party" test "$s" = 409
s=$(req GET "/v1/participations/$P1/result")
check "409 not_ready for a running result" test "$s" = 409 -a "$(jfield .code)" = not_ready
s=$(req GET "/v1/participations/p-00000000000000000000000000000000")
check "404 for an unknown id" test "$s" = 404
s=$(req GET "/v1/participations/..%2Fetc")
check "400/404 for a strange id" test "$s" = 404 -o "$s" = 400
s=$(req DELETE "/v1/participations/$P1")
check "DELETE cancels" test "$s" = 200 -a "$(jfield .state)" = failed
check "... with the reason" test "$(jfield .error)" = "cancelled by the operator"
# the worker notices between requests (a request in its retries finishes first)
for _ in $(seq 100); do
  grep -q "participation ended.*$P1" "$T/agent.log" && break
  sleep 0.1
done
s=$(req GET "/v1/participations/$P1")
check "stays cancelled" test "$(jfield .error)" = "cancelled by the operator"
check "the worker ended" grep -q "participation ended.*$P1" "$T/agent.log"
s=$(req GET "/v1/participations/$P1/result")
check "409 aborted for a failed result" test "$s" = 409 -a "$(jfield .code)" = aborted
s=$(req GET "/v1/participations/$P1/result/sum.npy")
check "409 for a failed result file" test "$s" = 409

# ---- unreachable server: fails after --server-patience
stop_agent
PATIENCE=1 start_agent
s=$(req POST /v1/participations "$(body 2 "$T/good.csv")")
P2=$(jfield .id)
check "201 for party 2" test "$s" = 201
for _ in $(seq 100); do
  req GET "/v1/participations/$P2" >/dev/null
  [ "$(jfield .state)" != running ] && break
  sleep 0.1
done
check "unreachable server fails the participation" test "$(jfield .state)" = failed
check "... saying so" bash -c "grep -q 'server unreachable' '$T/body'"

# ---- kill -9 mid-protocol, restart: resumed (it keeps waiting for the server)
stop_agent
start_agent
s=$(req POST /v1/participations "$(body 3 "$T/good.csv")")
P3=$(jfield .id)
check "201 for party 3" test "$s" = 201
stop_agent KILL
start_agent
req GET "/v1/participations/$P3" >/dev/null
check "restart resumes it" test "$(jfield .state)" = running -a "$(jfield .restarts)" = 1
check "... logged" grep -q "participation resumed.*$P3" "$T/agent.log"
req GET /v1/participations >/dev/null
check "list has all three" test "$(jfield .participations.length)" = 3
check "newest first" test "$(jfield '.participations[0].id')" = "$P3"
s=$(req DELETE "/v1/participations/$P3")
check "the resumed participation cancels" test "$s" = 200 -a "$(jfield .state)" = failed

# ---- --max-participations
stop_agent
start_agent --max-participations 1
s=$(req POST /v1/participations "$(body 1 "$T/good.csv")")
check "201 for the first" test "$s" = 201
P5=$(jfield .id)
s=$(req POST /v1/participations "$(body 2 "$T/good.csv")")
check "429 over --max-participations" test "$s" = 429
s=$(req DELETE "/v1/participations/$P5")
check "... which cancels" test "$s" = 200
stop_agent
start_agent

# ---- SIGTERM: running participations are suspended, exit 0; they resume at the next start
s=$(req POST /v1/participations "$(body 3 "$T/good.csv" csv '"masked_input"')")
P4=$(jfield .id)
check "201 with fail_at" test "$s" = 201 -a "$(jfield .fail_at)" = masked_input
curl -s "$URL/metrics" >"$T/metrics"
check "metrics count the running one" grep -q '^fedsvd_agent_participations{state="running"} 1' "$T/metrics"
stop_agent
rc=$?
check "SIGTERM exits 0" test "$rc" = 0
start_agent
req GET "/v1/participations/$P4" >/dev/null
check "stopped participation resumes at the next start" \
  test "$(jfield .state)" = running -a "$(jfield .restarts)" = 1 -a "$(jfield .fail_at)" = masked_input
check "log lines are JSON" node "$JLIB" lines "$T/agent.log"
check "the party token never reaches the log" bash -c "! grep -q '$PTOKEN' '$T/agent.log'"
check "the operator token never reaches the log" bash -c "! grep -q '$TOKEN' '$T/agent.log'"

# ---- the contract file
stop_agent
printf 'openapi: 3.1.0\n' >"$T/api.yaml"
OPENAPI=$T/api.yaml start_agent
check "openapi served with --openapi" \
  test "$(curl -s "$URL/openapi.yaml")" = "openapi: 3.1.0"

# ---- configuration errors
"$AGENT" --data-dir "$T/d2" >/dev/null 2>&1
check "missing token file is a usage error (2)" test $? = 2
"$AGENT" --bogus >/dev/null 2>&1
check "unknown flag is a usage error (2)" test $? = 2
"$AGENT" --help | grep -q -- --operator-token-file
check "--help" test $? = 0
FEDSVD_DATA_DIR="$T/d3" FEDSVD_OPERATOR_TOKEN_FILE="$T/missing" "$AGENT" --listen 127.0.0.1:0 \
  >/dev/null 2>&1
check "env config used; missing token file fails (1)" test $? = 1

stop_agent
svc_summary
