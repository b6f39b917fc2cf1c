#!/usr/bin/env bash
# The aggregation server's shard routes, mostly without agents: a coordinator with
# one --shard-peer, the peer, and a server without a peer token, on
# loopback. A sharded fedsvd job's creation makes its window on the peer;
# the checks drive the window with curl as the parties and the coordinator
# would: party-token chunk uploads (wrong token, chunk beyond the window,
# repeats, other bytes), the peer token on every other route, a finish with
# a plan and R's .npy, DELETE; the spec checks (too many shards, features,
# another algorithm); a cancelled job's window deleted by the coordinator,
# also when the peer was down then (the deletion recorded and sent again,
# across a coordinator restart, until the peer is back); a peer killed
# (-9) mid-upload and after its finish that resumes its window from disk
# (the same complete parties, repeats compared with the stored chunks, the
# same R, no plan on disk, files gone with DELETE); a failed window that is
# still failed, with its error, after a restart; a peer that lost its
# files failing the job; windows nobody uses removed by a peer with
# --shard-window-ttl-s (running, and at its start); a peer down at
# creation; a creation that fails after a peer (then killed) made its
# window, the deletion kept pending across a coordinator restart and taken
# once the peer is back, and deletions given up after
# --shard-deletion-max-age-s (abandoned: listed by GET /v1/shard-deletions,
# counted on /metrics, logged once, kept across a restart); and, with agents, a coordinator killed in a sharded
# masked_input that resumes the job, then the peer killed while it
# finishes, sent the finish again.
# The math (windows, plans, TSQR) is tested in tests/unit.
#
# Usage: tests/shardpeer/run.sh BIN_DIR (default build/bin)
# Ends with "shardpeer: P passed, F failed".
set -u
BIN=${1:-build/bin}
SVC_SUITE=shardpeer
. "$(dirname "$0")/../lib/services.sh"
svc_need aggregation-server

PEER=peer-token-0123456789abcdefghijklmn
declare -F svc_tokens >/dev/null && svc_tokens
printf '%s\n' "$PEER" >"$T/peer.token"
chmod 600 "$T/peer.token"

# the peer (shard 1), then the coordinator pointing at it
# until_ok TRIES PAUSE COMMAND...: run COMMAND until it succeeds, at most
# TRIES times PAUSE seconds apart; its last status
until_ok() {
  local n=$1 p=$2
  shift 2
  for _ in $(seq "$n"); do
    "$@" && return 0
    sleep "$p"
  done
  return 1
}
absent() { local f; for f; do [ ! -e "$f" ] || return 1; done; } # FILE...: none exists
# job_state JOB STATE: the coordinator's job JOB is in STATE (its document in $T/body)
job_state() {
  http GET "$SURL/v1/jobs/$1" "$ADMIN"
  [ "$(jget .state)" = "$2" ]
}
# start_peer: the peer (shard 1, data $T/peer) on PPORT -> PPID_, SVC_URL;
# the status of svc_start
start_peer() {
  svc_start peer PPORT "$BIN/aggregation-server" --data-dir "$T/peer" \
    --admin-token-file "$T/admin.token" --peer-token-file "$T/peer.token"
  local rc=$?
  PPID_=$SVC_PID
  return $rc
}
start_peer || { bad "peer starts"; svc_summary; exit 1; }
PURL=$SVC_URL
svc_server --shard-peer "$PURL/" --peer-token-file "$T/peer.token" ||
  { bad "coordinator starts"; svc_summary; exit 1; }
svc_start nopeer NPORT "$BIN/aggregation-server" --data-dir "$T/nopeer" \
  --admin-token-file "$T/admin.token" || { bad "nopeer starts"; svc_summary; exit 1; }
NURL=$SVC_URL

# http METHOD URL TOKEN [CURL ARGS...]: the status in CODE, the body in $T/body
http() {
  local m=$1 u=$2 tok=$3
  shift 3
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$m" ${tok:+-H "Authorization: Bearer $tok"} "$@" "$u")
}
jget() { node "$JLIB" get "$T/body" "$1" 2>/dev/null; }
# schema_check DESC SCHEMA: $T/body matches openapi.yaml's SCHEMA (skipped
# without node and the contract suite's validator)
schema_check() {
  if command -v node >/dev/null && [ -d "$(dirname "$0")/../contract/node_modules/ajv" ]; then
    check "$1" node "$JLIB" schema "$(dirname "$0")/../../openapi.yaml" "$2" "$T/body"
  fi
}
# npy FILE WORDS FILL: a 1-D <u8 .npy of WORDS words, every byte FILL (0..255)
npy() {
  node -e '
    const [f, n, b] = [process.argv[1], +process.argv[2], +process.argv[3]];
    let h = "{\x27descr\x27: \x27<u8\x27, \x27fortran_order\x27: False, \x27shape\x27: (" + n + ",), }";
    while ((10 + h.length + 1) % 64) h += " ";
    h += "\n";
    const head = Buffer.alloc(10);
    Buffer.from("\x93NUMPY", "latin1").copy(head);
    head[6] = 1; head[7] = 0; head.writeUInt16LE(h.length, 8);
    require("fs").writeFileSync(f, Buffer.concat([head, Buffer.from(h, "latin1"), Buffer.alloc(8 * n, b)]));
  ' "$1" "$2" "$3"
}
spec() { # SHARDS [EXTRA JSON FIELDS]: a 2-party fedsvd spec of 8 x 4
  printf '{"algorithm": "fedsvd", "parties": 2, "shape": [8, 4], "party_sizes": [4, 4], "shards": %s, "allow_unpinned": true%s}' "$1" "${2:-}"
}
create() { # SPEC: POST /v1/jobs on the coordinator
  http POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$1"
}

# ---- the spec
create "$(spec 3)"
check "3 shards with 1 peer: 400 naming the peers" \
  test "$CODE" = 400 -a -n "$(grep -o 'needs 2 shard peers' "$T/body")"
create '{"algorithm": "fedsvd", "parties": 2, "shape": [8, 4], "party_sizes": [2, 2], "partition": "features", "shards": 2, "allow_unpinned": true}'
check "shards with the features partition: 400" \
  test "$CODE" = 400 -a -n "$(grep -o 'samples partition' "$T/body")"
http POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' \
  --data-binary '{"algorithm": "secure-sum", "parties": 2, "shape": [2, 2], "shards": 2}'
check "shards with secure-sum: 400" test "$CODE" = 400
create "$(spec 2)"
check "sharded job created: 201" test "$CODE" = 201
JOB=$(jget .job.id)
TOK1=$(jget '.invitations[0].token')
TOK2=$(jget '.invitations[1].token')
check "its invitations say shards: 2" test "$(jget '.invitations[0].shards')" = 2
http GET "$SURL/v1/jobs/$JOB" "$ADMIN"
check "the job document lists the shards" \
  test "$(jget .shards)" = "[{\"shard\":0,\"url\":\"$SURL\",\"rows\":[0,4],\"words\":[0,16]},{\"shard\":1,\"url\":\"$PURL\",\"rows\":[4,8],\"words\":[16,16]}]"
create "$(spec 1)"
check "shards: 1 is the unsharded job (no shards list)" \
  test "$CODE" = 201 -a -z "$(jget .job.shards)"

# ---- the peer token
http GET "$PURL/v1/shards/$JOB" ""
check "window without a token: 401" test "$CODE" = 401
http GET "$PURL/v1/shards/$JOB" "$ADMIN"
check "window with the admin token: 401" test "$CODE" = 401
http GET "$NURL/v1/shards/$JOB" "$PEER"
check "no peer token configured: 403" \
  test "$CODE" = 403 -a -n "$(grep -o 'peer token not configured' "$T/body")"
http GET "$PURL/v1/shards/$JOB" "$PEER"
check "the coordinator made the window: receiving, 16 words at 16, nobody complete" \
  test "$CODE" = 200 -a "$(jget .state)" = receiving -a "$(jget .offset)" = 16 \
  -a "$(jget .words)" = 16 -a "$(jget .complete)" = "[]"
http GET "$PURL/v1/shards/nosuchjob0000" "$PEER"
check "unknown window: 404" test "$CODE" = 404

# ---- masked chunks with party tokens
npy "$T/c1.npy" 16 1
npy "$T/c2.npy" 16 2
npy "$T/short.npy" 8 1
up() { # TOKEN CHUNK FILE
  http PUT "$PURL/v1/shards/$JOB/masked/$2" "$1" -H 'Content-Type: application/x-npy' \
    --data-binary "@$3"
}
up_is() { # NAME STATUS TOKEN CHUNK FILE: the upload is answered STATUS
  up "$3" "$4" "$5"
  check "$1" test "$CODE" = "$2"
}
up_is "chunk with a wrong token: 401" 401 "not-a-party-token-0123456789" 0 "$T/c1.npy"
up_is "chunk with the peer token: 401" 401 "$PEER" 0 "$T/c1.npy"
up_is "chunk beyond the window: 422" 422 "$TOK1" 1 "$T/c1.npy"
up_is "chunk of the wrong length: 422" 422 "$TOK1" 0 "$T/short.npy"
http PUT "$PURL/v1/shards/$JOB/masked/0" "$TOK1" -H 'Content-Type: application/json' \
  --data-binary '{}'
check "chunk that is not .npy: 415" test "$CODE" = 415
up_is "party 1's chunk: 204" 204 "$TOK1" 0 "$T/c1.npy"
up_is "the same chunk again: 204" 204 "$TOK1" 0 "$T/c1.npy"
up_is "other bytes for it: 409" 409 "$TOK1" 0 "$T/c2.npy"
http GET "$PURL/v1/shards/$JOB" "$PEER"
check "party 1 complete" test "$(jget .complete)" = "[1]"
up "$TOK2" 0 "$T/c2.npy"
http GET "$PURL/v1/shards/$JOB" "$PEER"
check "party 2 complete too" test "$CODE" = 200 -a "$(jget .complete)" = "[1,2]"

# ---- finish: bad bodies, then a plan
fin() { http POST "$PURL/v1/shards/$JOB/finish" "$PEER" -H 'Content-Type: application/json' --data-binary "$1"; }
http GET "$PURL/v1/shards/$JOB/r.npy" "$PEER"
check "R before the finish: 409" test "$CODE" = 409
fin '{"u3": [1, 2]}'
check "finish without a plan: 400" test "$CODE" = 400
fin '{"u3": [1, 2], "exponent": 0, "plan": [{"key": "!!", "sign": 1}]}'
check "finish with a bad key: 400" test "$CODE" = 400
fin '{"u3": [3], "exponent": 0, "plan": []}'
check "finish with a party not in the job: 422" test "$CODE" = 422
K=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": [{\"key\": \"$K\", \"sign\": 1}, {\"key\": \"$K\", \"sign\": -1}]}"
check "finish with a plan: 202" test "$CODE" = 202
for _ in $(seq 100); do
  http GET "$PURL/v1/shards/$JOB" "$PEER"
  [ "$(jget .state)" = finishing ] || break
  sleep 0.05
done
check "the window is done, its peak memory reported" \
  test "$(jget .state)" = done -a "$(jget .peak_rss_bytes)" -gt 0
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": []}"
check "finish again: 202 (a repeat)" test "$CODE" = 202
http GET "$PURL/v1/shards/$JOB/r.npy" "$PEER"
check "R: a 4 x 4 float64 .npy" \
  test "$CODE" = 200 -a -n "$(grep -a -o "'descr': '<f8'.*'shape': (4, 4)" "$T/body")"
http GET "$PURL/v1/shards/$JOB" "$PEER"
schema_check "the window document matches ShardWindow in openapi.yaml" ShardWindow
http DELETE "$PURL/v1/shards/$JOB" "$PEER"
check "DELETE: 204" test "$CODE" = 204
http GET "$PURL/v1/shards/$JOB" "$PEER"
check "then 404" test "$CODE" = 404

# ---- the coordinator deletes the window of a job that ends
create "$(spec 2)"
JOB2=$(jget .job.id)
http DELETE "$SURL/v1/jobs/$JOB2" "$ADMIN"
for _ in $(seq 60); do
  http GET "$PURL/v1/shards/$JOB2" "$PEER"
  [ "$CODE" = 404 ] && break
  sleep 0.1
done
check "a cancelled job's window is deleted on the peer" test "$CODE" = 404

# ---- a peer down when its job ends: the coordinator records the deletion
# (shard-deletions/ of its data directory, no token in it) and sends it
# again, with growing pauses and after a restart of its own (killed -9
# while the peer is still down), until the peer is back, with the window
# reloaded from its files, and takes it
create "$(spec 2)"
JOB2=$(jget .job.id)
DREC=$T/server/shard-deletions/$JOB2.1.json
svc_stop "$PPID_" KILL
http DELETE "$SURL/v1/jobs/$JOB2" "$ADMIN"
for _ in $(seq 60); do
  [ -s "$DREC" ] && break
  sleep 0.1
done
check "peer down at the job's end: the coordinator records the window's deletion" test -s "$DREC"
check "... the record holds no token" eval 'test -s "$DREC" && ! grep -qF "$PEER" "$DREC"'
svc_stop "$SPID" KILL
N0=$(grep -c "cannot delete a shard window" "$T/server.log")
svc_server --shard-peer "$PURL/" --peer-token-file "$T/peer.token"
for _ in $(seq 100); do # the restarted coordinator tried (and failed) while the peer is down
  [ "$(grep -c "cannot delete a shard window" "$T/server.log")" -gt "$N0" ] && break
  sleep 0.1
done
start_peer
check "... the restarted peer reloads the window" \
  grep -q "\"shard window reloaded\",\"job\":\"$JOB2\"" "$T/peer.log"
until_ok 150 0.1 absent "$T/peer/shards/$JOB2" "$DREC"
http GET "$PURL/v1/shards/$JOB2" "$PEER"
check "... and the restarted coordinator deletes it once the peer is back (404, files and record gone)" \
  test "$CODE" = 404 -a ! -e "$T/peer/shards/$JOB2" -a ! -e "$DREC"

# ---- a peer killed (-9) keeps its windows: window.json, the uploads and
# chunks.log are on disk before the answers; the restarted peer folds the
# recorded chunks again, serves a done window's R again, never writes the
# unmask plan, and deletes the files with the window
peer_restart() { # kill -9 the peer, start it again on its port and data
  svc_stop "$PPID_" KILL
  start_peer
}
# poll the peer's window $1 (at most 5 s) until its state is $2; the last
# answer stays in $T/body for jget
window_state() {
  for _ in $(seq 100); do
    http GET "$PURL/v1/shards/$1" "$PEER"
    [ "$(jget .state)" = "$2" ] && return
    sleep 0.05
  done
}
create "$(spec 2)"
JOB3=$(jget .job.id)
T3A=$(jget '.invitations[0].token')
T3B=$(jget '.invitations[1].token')
JOB=$JOB3
up_is "restart: party 1's chunk before the kill: 204" 204 "$T3A" 0 "$T/c1.npy"
peer_restart
http GET "$PURL/v1/shards/$JOB3" "$PEER"
check "restart (mid-upload): the window is back, receiving, party 1 complete" \
  test "$CODE" = 200 -a "$(jget .state)" = receiving -a "$(jget .complete)" = "[1]"
check "restart: the peer says it reloaded the window with its chunk" \
  grep -q "\"shard window reloaded\",\"job\":\"$JOB3\",\"shard\":1,\"chunks\":1" "$T/peer.log"
up_is "restart: party 1's chunk again: 204 (the same bytes, read back from disk)" 204 "$T3A" 0 "$T/c1.npy"
up_is "restart: other bytes for it: 409" 409 "$T3A" 0 "$T/c2.npy"
up_is "restart: party 2's chunk after the restart: 204" 204 "$T3B" 0 "$T/c2.npy"
K3=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": [{\"key\": \"$K3\", \"sign\": 1}, {\"key\": \"$K3\", \"sign\": -1}]}"
check "restart: the finish: 202" test "$CODE" = 202
window_state "$JOB3" done
http GET "$PURL/v1/shards/$JOB3/r.npy" "$PEER"
cp "$T/body" "$T/r3.npy"
check "restart: R of the reloaded window: 200" test "$CODE" = 200 -a -s "$T/r3.npy"
no_key() { # the key neither as base64 nor as raw bytes (its bytes 1..8) under the peer's data
  ! grep -rqF "$K3" "$T/peer" && ! grep -rqaF "$(printf '\001\002\003\004\005\006\007\010')" "$T/peer"
}
check "restart: the plan's key is in no file of the peer" no_key
http GET "$SURL/v1/jobs/$JOB3" "$ADMIN" # its poller asked the peer meanwhile (every second)
check "restart: the coordinator's job is still running (not 'lost its state')" \
  test "$(jget .state)" = running
# ---- a window that failed is failed after a restart too (failed.json),
# not receiving: a window made with the peer token from JOB3's creation
# body under another job id (the same party tokens), finished with party 2,
# which uploaded nothing here, in U3; the peer restarted (with JOB3's
# window, done) and the failed window checked after JOB3's
JOBF=j-$(printf 'f%.0s' $(seq 32))
cp "$T/peer/shards/$JOB3/window.json" "$T/win.json"
http PUT "$PURL/v1/shards/$JOBF" "$PEER" -H 'Content-Type: application/json' \
  --data-binary "@$T/win.json"
check "failure: a window made with the peer token: 201" test "$CODE" = 201
JOB=$JOBF
up_is "failure: party 1's chunk: 204" 204 "$T3A" 0 "$T/c1.npy"
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": [{\"key\": \"$K3\", \"sign\": 1}, {\"key\": \"$K3\", \"sign\": -1}]}"
check "failure: a finish with party 2 in U3: 202 (checked by the worker)" test "$CODE" = 202
window_state "$JOBF" failed
FERR=$(jget .error)
check "failure: the window failed, naming party 2 ($FERR)" \
  test "$(jget .state)" = failed -a -n "$(printf '%s' "$FERR" | grep -o 'party 2')"
peer_restart
http GET "$PURL/v1/shards/$JOB3" "$PEER"
check "restart (after the finish): the window is done" \
  test "$CODE" = 200 -a "$(jget .state)" = done
http GET "$PURL/v1/shards/$JOB3/r.npy" "$PEER"
check "restart: the same R is served again (cmp)" cmp -s "$T/body" "$T/r3.npy"
check "restart: only window.json and r.npy are left of a done window" \
  test "$(ls "$T/peer/shards/$JOB3" | tr '\n' ' ')" = "r.npy window.json "

http GET "$PURL/v1/shards/$JOBF" "$PEER"
check "failure: after a restart the window is failed, with the same error" \
  test "$CODE" = 200 -a "$(jget .state)" = failed -a "$(jget .error)" = "$FERR"
http GET "$PURL/v1/shards/$JOBF/r.npy" "$PEER"
check "failure: its R: 409 saying it failed" \
  test "$CODE" = 409 -a -n "$(grep -o 'shard 1 failed' "$T/body")"
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": [{\"key\": \"$K3\", \"sign\": 1}, {\"key\": \"$K3\", \"sign\": -1}]}"
check "failure: the finish sent again: 409 (not taken as by a receiving window)" test "$CODE" = 409
up_is "failure: a chunk for it: 409" 409 "$T3A" 0 "$T/c1.npy"
check "failure: only window.json and failed.json are left (the uploads are not needed any more)" \
  test "$(ls "$T/peer/shards/$JOBF" | tr '\n' ' ')" = "failed.json window.json "
http DELETE "$PURL/v1/shards/$JOBF" "$PEER"
check "failure: DELETE removes its files" test "$CODE" = 204 -a ! -e "$T/peer/shards/$JOBF"
# the same failure in a window of a running job: the coordinator's poller
# sees it failed and fails the job with the shard's error
create "$(spec 2)"
JOB=$(jget .job.id)
JOBG=$JOB
up_is "failure: party 1's chunk to a job's window: 204" 204 "$(jget '.invitations[0].token')" 0 "$T/c1.npy"
fin "{\"u3\": [1, 2], \"exponent\": 0, \"plan\": [{\"key\": \"$K3\", \"sign\": 1}, {\"key\": \"$K3\", \"sign\": -1}]}"
until_ok 60 0.1 job_state "$JOBG" failed
check "failure: the coordinator fails the job with the shard's error" \
  test "$(jget .state)" = failed -a -n "$(jget .error | grep -o 'shard 1 failed: unmasking: .*party 2')"
JOB=$JOB3

http DELETE "$PURL/v1/shards/$JOB3" "$PEER"
check "restart: DELETE removes the window's files" \
  test "$CODE" = 204 -a ! -e "$T/peer/shards/$JOB3"
http DELETE "$SURL/v1/jobs/$JOB3" "$ADMIN"

# ---- a peer whose files are gone after a restart: the job fails
create "$(spec 2)"
JOB3=$(jget .job.id)
svc_stop "$PPID_" KILL
rm -rf "$T/peer/shards/$JOB3"
# (FEDSVD_TEST_SHARD_FINISH_DELAY_MS, a test hook: this peer holds its
# windows in finishing for ten seconds, for the restart below: the kill
# cuts it short, and a slow machine still kills it there)
FEDSVD_TEST_SHARD_FINISH_DELAY_MS=10000 start_peer
until_ok 120 0.1 job_state "$JOB3" failed
check "a peer restarted without its files: the job fails with 'shard 1 lost its state after a restart'" \
  test "$(jget .error)" = "shard 1 lost its state after a restart"

# ---- the coordinator killed (-9) in a sharded masked_input resumes the job
# (its events: the peers' verdict is part of the close), party 3 stops at
# masked_input; then the peer is killed (-9) while it finishes (the plan
# received, R not done) and started again: its window is receiving again
# (the plan is never stored) and the coordinator sends the finish again.
# The survivors' exact result
if [ -x "$BIN/client-agent" ] && [ -x "$BIN/masking-server" ] && [ -x "$BIN/fedsvd" ]; then
  F=$BIN/fedsvd
  svc_masking
  svc_agents 3 --poll-ms 50
  svc_party_keys 3
  "$F" gen planted --rows 120 --cols 12 --rank 4 --noise 0.2 --seed 5 --out-dir "$T/d" \
    --parties 3 --split 30,50,40 >/dev/null
  "$F" svd --input "$T/d/party-1.npy" --input "$T/d/party-2.npy" --out "$T/ref" >/dev/null
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedsvd \
    "${PKEYS[@]}" --shape 120,12 --party-sizes 30,50,40 --masking-server "$MURL" --shards 2 \
    --masking-token-file "$T/madmin.token" --round-timeout 4 --allow-dropouts \
    --out-dir "$T/j" --format json >"$T/j.json" 2>"$T/j.err"
  JOB4=$(node "$JLIB" get "$T/j.json" .job.id)
  node - "$T" "$OP" "${AURL[@]:1}" <<'EOF2'
const fs = require('fs');
const [T, op, ...urls] = process.argv.slice(2);
(async () => {
  const created = JSON.parse(fs.readFileSync(`${T}/j.json`, 'utf8'));
  for (let i = 0; i < 3; i++) {
    const inv = JSON.parse(fs.readFileSync(created.invitations[i], 'utf8'));
    const body = { invitation: inv, dataset: { path: `${T}/d/party-${inv.party}.npy` } };
    if (inv.party === 3) body.fail_at = 'masked_input';
    await fetch(`${urls[i]}/v1/participations`, { method: 'POST', body: JSON.stringify(body),
      headers: { authorization: `Bearer ${op}`, 'content-type': 'application/json' } });
  }
})();
EOF2
  for _ in $(seq 100); do
    http GET "$SURL/v1/jobs/$JOB4" "$ADMIN"
    [ "$(jget .phase)" = masked_input ] && break
    sleep 0.05
  done
  check "the sharded job reached masked_input" test "$(jget .phase)" = masked_input
  svc_stop "$SPID" KILL
  svc_server --shard-peer "$PURL" --peer-token-file "$T/peer.token"
  for _ in $(seq 300); do
    http GET "$PURL/v1/shards/$JOB4" "$PEER"
    [ "$(jget .state)" = finishing ] && break
    sleep 0.05
  done
  check "the peer's window is finishing (the coordinator resumed and sent the plan)" \
    test "$(jget .state)" = finishing
  svc_stop "$PPID_" KILL
  start_peer
  for _ in $(seq 150); do
    http GET "$SURL/v1/jobs/$JOB4" "$ADMIN"
    [ "$(jget .state)" != running ] && break
    sleep 0.1
  done
  check "after the restarts the job is done" test "$(jget .state)" = done
  check "... the coordinator sent the finish again to the peer's reloaded window" \
    grep -q "shard restarted while finishing: the finish sent again" "$T/server.log"
  http GET "$SURL/v1/jobs/$JOB4/result/s.npy" "$ADMIN"
  cp "$T/body" "$T/s.npy"
  E=$("$F" compare --a "$T/s.npy" --b "$T/ref/S.npy" --metric sv 2>/dev/null)
  check "... with the survivors' singular values to 1e-12 ($E)" \
    awk -v e="$E" 'BEGIN { exit !(e != "" && e + 0 <= 1e-12) }'
  http GET "$PURL/v1/shards/$JOB4" "$PEER"
  check "... and its window on the peer is deleted" test "$CODE" = 404

fi

# ---- a peer's windows that nobody uses expire (--shard-window-ttl-s 2):
# one left alone is removed while the peer runs, one asked for every 0.2 s
# stays, and is removed at the peer's start after it was down for longer
# than the ttl (its last use: its files' mtime, set an hour back)
ttl_peer() {
  svc_start ttlpeer TPORT "$BIN/aggregation-server" --data-dir "$T/ttlpeer" \
    --admin-token-file "$T/admin.token" --peer-token-file "$T/peer.token" --shard-window-ttl-s 2
  TPID=$SVC_PID
  TURL=$SVC_URL
}
if ttl_peer; then
  JT1=j-$(printf 'a%.0s' $(seq 32))
  JT2=j-$(printf 'b%.0s' $(seq 32))
  http PUT "$TURL/v1/shards/$JT1" "$PEER" -H 'Content-Type: application/json' --data-binary "@$T/win.json"
  C1=$CODE
  http PUT "$TURL/v1/shards/$JT2" "$PEER" -H 'Content-Type: application/json' --data-binary "@$T/win.json"
  check "ttl: two windows made: 201" test "$C1$CODE" = 201201
  for _ in $(seq 40); do
    http GET "$TURL/v1/shards/$JT2" "$PEER"
    [ ! -e "$T/ttlpeer/shards/$JT1" ] && break
    sleep 0.2
  done
  http GET "$TURL/v1/shards/$JT1" "$PEER"
  check "ttl: the window nobody asked for is removed with its files" \
    test "$CODE" = 404 -a ! -e "$T/ttlpeer/shards/$JT1"
  http GET "$TURL/v1/shards/$JT2" "$PEER"
  check "ttl: the window in use stays" test "$CODE" = 200
  svc_stop "$TPID" KILL
  touch -m -d '1 hour ago' "$T/ttlpeer/shards/$JT2"/* # as if the peer had been down an hour
  ttl_peer
  http GET "$TURL/v1/shards/$JT2" "$PEER"
  check "ttl: a window unused while its peer was down is removed at the start" \
    test "$CODE" = 404 -a ! -e "$T/ttlpeer/shards/$JT2" \
    -a -n "$(grep -o "shard window expired: removed\",\"job\":\"$JT2\"" "$T/ttlpeer.log")"
  svc_stop "$TPID"
else
  bad "ttl: a peer with --shard-window-ttl-s starts"
fi

# ---- a peer down at creation: 503, nothing created
svc_stop "$PPID_"
create "$(spec 2)"
check "peer down at creation: 503 naming shard 1" \
  test "$CODE" = 503 -a -n "$(grep -o 'shard 1' "$T/body")"

# ---- deletions a coordinator owes its peers: a second coordinator (c2)
# with two peers, the peer (shard 1) and a stand-in for shard 2 (node) that
# holds the creation's PUT until shard 1 is killed (-9), then answers 500
# (the window made, perhaps) and takes every DELETE (204). The creation
# fails (503) after shard 1 made its window; both deletions are recorded,
# shard 2's goes at once, shard 1's stays pending (GET /v1/shard-deletions,
# /metrics), survives c2's restart (-9), and is taken once the peer is
# back: window and record gone, nothing listed. Then, with
# --shard-deletion-max-age-s 1 and the peer down: a record written by an
# older server (no "recorded": its mtime, an hour back) and the deletion of
# another failed creation are given up: moved to abandoned/, logged once
# as a warning, listed and counted as abandoned, never tried again, also
# after another restart of c2
node -e '
  const http = require("http"), fs = require("fs"), T = process.argv[1];
  const srv = http.createServer((req, res) => {
    req.on("data", () => {});
    req.on("end", () => {
      const m = /^\/v1\/shards\/([^/?]+)$/.exec(req.url);
      if (!m) { res.writeHead(404); return res.end(); }
      if (req.method === "DELETE") {
        fs.appendFileSync(`${T}/fake.deletes`, m[1] + "\n");
        res.writeHead(204);
        return res.end();
      }
      fs.writeFileSync(`${T}/fake.job`, m[1]);
      const fail = (n) => fs.existsSync(`${T}/fake.release`) || n <= 0
        ? res.writeHead(500, { "content-type": "application/problem+json" }).end(
            "{\"type\":\"about:blank\",\"title\":\"internal\",\"status\":500,\"detail\":\"shard 2 fails\"}")
        : setTimeout(() => fail(n - 1), 20);
      fail(1000);
    });
  });
  srv.listen(0, "127.0.0.1", () => fs.writeFileSync(`${T}/fake.port`, String(srv.address().port)));
' "$T" >>"$T/fake.log" 2>&1 &
FAKEPID=$!
PIDS+=("$FAKEPID")
FURL=http://127.0.0.1:$(svc_wait_port "$T/fake.port")
c2() { # [ARGS...]: (re)start the second coordinator -> C2PID, C2URL
  svc_start c2 C2PORT "$BIN/aggregation-server" --data-dir "$T/c2" \
    --admin-token-file "$T/admin.token" --peer-token-file "$T/peer.token" \
    --shard-peer "$PURL" --shard-peer "$FURL" "$@"
  C2PID=$SVC_PID
  C2URL=$SVC_URL
}
# dels: GET /v1/shard-deletions (the list in $T/body, its status in CODE),
# summed up in DELS: "PENDING/ABANDONED/MAX_AGE PENDING-RECORDS ABANDONED-RECORDS",
# a record as JOB.SHARD, +g with give_up_at, +a with abandoned_at and an error
dels() {
  http GET "$C2URL/v1/shard-deletions" "$ADMIN"
  DELS=$(node -e '
    const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const f = (r) => `${r.job}.${r.shard}${r.give_up_at ? "+g" : ""}${r.abandoned_at && r.error ? "+a" : ""}`;
    console.log(`${d.pending_count}/${d.abandoned_count}/${d.max_age_s} ` +
      `${d.pending.map(f).sort().join(",")} ${d.abandoned.map(f).sort().join(",")}`);
  ' "$T/body" 2>/dev/null)
}
metric() { # STATE: c2's fedsvd_shard_window_deletions{state=STATE}
  curl -s "$C2URL/metrics" | sed -n "s/^fedsvd_shard_window_deletions{state=\"$1\"} //p"
}
C2D=$T/c2/shard-deletions
start_peer
c2
curl -s -o "$T/c2.body" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" \
  -H 'Content-Type: application/json' --data-binary "$(spec 3)" "$C2URL/v1/jobs" >"$T/c2.code" &
CREQ=$!
until_ok 300 0.05 test -s "$T/fake.job"
JOBC=$(cat "$T/fake.job" 2>/dev/null)
check "failed creation: shard 1 made its window before shard 2 was asked" \
  test -n "$JOBC" -a -s "$T/peer/shards/$JOBC/window.json"
svc_stop "$PPID_" KILL
touch "$T/fake.release"
wait "$CREQ"
check "failed creation: 503 naming shard 2" \
  test "$(cat "$T/c2.code")" = 503 -a -n "$(grep -o 'shard 2' "$T/c2.body")"
for _ in $(seq 300); do
  grep -qx "$JOBC" "$T/fake.deletes" 2>/dev/null && [ ! -e "$C2D/$JOBC.2.json" ] && break
  sleep 0.05
done
check "failed creation: shard 2 (no answer but 500: made, perhaps) is sent the DELETE, its record gone" \
  eval 'grep -qx "$JOBC" "$T/fake.deletes" && test ! -e "$C2D/$JOBC.2.json"'
check "failed creation: the deletion on shard 1 (down) is recorded" test -s "$C2D/$JOBC.1.json"
http GET "$C2URL/v1/jobs/$JOBC" "$ADMIN"
check "failed creation: no job is left of it (404)" test "$CODE" = 404
dels
check "failed creation: GET /v1/shard-deletions lists it pending (shard 1, its URL, give_up_at)" \
  test "$CODE" = 200 -a "$DELS" = "1/0/2592000 $JOBC.1+g " \
  -a -n "$(grep -F "\"url\":\"$PURL\"" "$T/body")"
schema_check "... the list matches ShardDeletions in openapi.yaml" ShardDeletions
http GET "$C2URL/v1/shard-deletions" ""
check "GET /v1/shard-deletions without the admin token: 401" test "$CODE" = 401
http GET "$C2URL/v1/shard-deletions" "$PEER"
check "GET /v1/shard-deletions with the peer token: 401" test "$CODE" = 401
check "failed creation: /metrics counts 1 pending, 0 abandoned" \
  test "$(metric pending)/$(metric abandoned)" = 1/0
svc_stop "$C2PID" KILL
c2
check "failed creation: the pending deletion survives c2's restart" test -s "$C2D/$JOBC.1.json"
start_peer
until_ok 300 0.1 absent "$T/peer/shards/$JOBC" "$C2D/$JOBC.1.json"
http GET "$PURL/v1/shards/$JOBC" "$PEER"
check "failed creation: once the peer is back its window is deleted (404, files and record gone)" \
  test "$CODE" = 404 -a ! -e "$T/peer/shards/$JOBC" -a ! -e "$C2D/$JOBC.1.json"
dels
check "... nothing pending any more (list and /metrics)" \
  test "$DELS/$(metric pending)" = "0/0/2592000  /0"
svc_stop "$PPID_" KILL
svc_stop "$C2PID" KILL

# the give-up: an older server's record (no "recorded"), an hour old
JOBO=j-$(printf 'c%.0s' $(seq 32))
printf '{"job":"%s","shard":1,"url":"%s"}' "$JOBO" "$PURL" >"$C2D/$JOBO.1.json"
touch -m -d '1 hour ago' "$C2D/$JOBO.1.json"
c2 --shard-deletion-max-age-s 1
http POST "$C2URL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$(spec 3)"
check "give-up: creation with shard 1 down: 503" test "$CODE" = 503
JOBD=$(ls "$C2D" | sed -n "s/^\(j-[0-9a-f]*\)\.1\.json$/\1/p" | grep -v "$JOBO" | head -1)
ab_logged() { # JOB: the warnings that its deletion was abandoned
  grep "shard window deletion abandoned" "$T/c2.log" | grep '"level":"warn"' | grep -c "\"job\":\"$1\""
}
gone() { # JOB...: each one's deletion abandoned (its record moved, then the warning)
  local j
  for j in "$@"; do
    [ -s "$C2D/abandoned/$j.1.json" ] && [ ! -e "$C2D/$j.1.json" ] &&
      [ "$(ab_logged "$j")" -ge 1 ] || return 1
  done
}
until_ok 300 0.05 gone "$JOBD" "$JOBO"
check "give-up: both deletions abandoned after --shard-deletion-max-age-s 1 (moved to abandoned/)" \
  test -n "$JOBD" -a -s "$C2D/abandoned/$JOBD.1.json" -a -s "$C2D/abandoned/$JOBO.1.json" \
  -a ! -e "$C2D/$JOBD.1.json" -a ! -e "$C2D/$JOBO.1.json"
check "give-up: logged once each, as a warning" test "$(ab_logged "$JOBD")/$(ab_logged "$JOBO")" = 1/1
dels
check "give-up: listed as abandoned with the last error, nothing pending" \
  test "$DELS" = "0/2/1  $(printf '%s\n' "$JOBD.1+a" "$JOBO.1+a" | sort | paste -sd,)"
schema_check "... the list matches ShardDeletions in openapi.yaml" ShardDeletions
check "give-up: /metrics counts 0 pending, 2 abandoned" \
  test "$(metric pending)/$(metric abandoned)" = 0/2
cp "$C2D/abandoned/$JOBD.1.json" "$T/abandoned.json" 2>/dev/null
svc_stop "$C2PID" KILL
N1=$(wc -l <"$T/c2.log")
# two pending records long past the age, for the same peer (down): given up
# at the restarted c2's first pass (the second not sent: its peer was
# unreachable a moment before), which must not try the abandoned ones again
JOBE=j-$(printf 'e%.0s' $(seq 32))
JOBF=j-$(printf 'f%.0s' $(seq 32))
for J in "$JOBE" "$JOBF"; do
  printf '{"job":"%s","shard":1,"url":"%s","recorded":1}' "$J" "$PURL" >"$C2D/$J.1.json"
done
c2 --shard-deletion-max-age-s 1
until_ok 300 0.05 gone "$JOBE" "$JOBF"
dels
check "give-up, after c2's restart: still listed and counted as abandoned (4 with the new ones)" \
  test "${DELS%% *}/$(metric abandoned)" = 0/4/1/4
check "... one of the two sent, the other not (its peer unreachable in the same pass)" \
  test "$(grep -l "not sent, the peer was unreachable" "$C2D/abandoned/$JOBE.1.json" \
    "$C2D/abandoned/$JOBF.1.json" 2>/dev/null | wc -l)" = 1
check "... the records unchanged, never tried again (only the new record's try logged)" \
  eval 'cmp -s "$T/abandoned.json" "$C2D/abandoned/$JOBD.1.json" &&
    test "$(tail -n +$((N1 + 1)) "$T/c2.log" | grep "cannot delete a shard window\|abandoned" |
      grep -c -e "$JOBD" -e "$JOBO")" = 0 &&
    test "$(ab_logged "$JOBD")/$(ab_logged "$JOBE")/$(ab_logged "$JOBF")" = 1/1/1'
svc_stop "$C2PID"
svc_stop "$FAKEPID"

svc_summary
