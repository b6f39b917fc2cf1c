#!/bin/bash
# client-agent end to end against a real aggregation-server on loopback:
# K agents, one secure-sum job, results compared with the plain sum of the
# inputs; then a run where one party stops at a round (fail_at) and the
# survivors still get the sum of the survivors; then one below threshold,
# where every participation fails with the server's reason.
#
#   tests/agent/e2e_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/jobs.sh"
svc_need client-agent aggregation-server

# the first start picks a free port; a restart takes the same one
start_server() { svc_server --chunk-words 16; }
start_server
check "server ready" curl -sf "$SURL/readyz" -o /dev/null

K=4
svc_agents $K --poll-ms 50
check "agents ready" curl -sf "${AURL[$K]}/readyz" -o /dev/null

# each agent's identity fingerprint (GET /v1/identity): the jobs pin them
svc_pins $K
PINS="[$PINS]"
check "GET /v1/identity: 64 hex digits" bash -c "printf '%s' '${FPR[1]}' | grep -Eq '^[0-9a-f]{64}$'"
check "GET /v1/identity: one fingerprint per agent" \
  test "$(printf '%s\n' "${FPR[@]:1}" | sort -u | wc -l)" -eq "$K"
check "GET /v1/identity: operator token required" \
  test "$(curl -s -o /dev/null -w '%{http_code}' "${AURL[1]}/v1/identity")" = 401
if [ -x "$BIN/fedsvd" ]; then
  check "fedsvd agent identity prints the agent's fingerprint" \
    test "$("$BIN/fedsvd" agent identity --agent "${AURL[2]}" --token-file "$T/op.token")" = "${FPR[2]}"
  check "fedsvd agent identity --data-dir agrees" \
    test "$("$BIN/fedsvd" agent identity --data-dir "$T/agent2")" = "${FPR[2]}"
fi

# data: party i holds a ROWS x COLS matrix (values of all magnitudes and signs)
# (seeded: 53-bit uniform mantissas times 1e-6 .. 1e6, either sign, written
# in the shortest form that reads back exactly)
make_data() { # rows cols
  node --input-type=module - "$JLIB" "$T" "$K" "$1" "$2" <<'EOF'
import fs from 'node:fs';
const [lib, T, K, R, C] = process.argv.slice(2);
const { Rng } = await import(lib);
const rng = new Rng(7);
for (let i = 1; i <= Number(K); i++) {
  let out = '';
  for (let r = 0; r < Number(R); r++) {
    const row = [];
    for (let c = 0; c < Number(C); c++) {
      row.push((rng.int(0, 1) ? 1 : -1) * rng.random() * 10 ** rng.int(-6, 6));
    }
    out += row.map(String).join(',') + '\n';
  }
  fs.writeFileSync(`${T}/x${i}.csv`, out);
}
EOF
  SHAPE="[$1,$2]"
}
make_data 5 7

# ss_spec THRESHOLD [EXTRA]: the secure-sum job of K parties (3 s rounds)
ss_spec() {
  printf '{"algorithm":"secure-sum","parties":%s,"threshold":%s,"shape":%s,"round_timeout_s":3,"join_timeout_s":3%s}' \
    "$K" "$1" "$SHAPE" "$2"
}

# run_job NAME THRESHOLD FAIL_AT_PER_PARTY...: creates a job, posts participations, waits
run_job() {
  local name=$1 threshold=$2 low=""; shift 2
  # below a majority (a dropout test): the job must say so
  [ $((threshold * 2)) -le "$K" ] && low=',"allow_low_threshold":true'
  job_start "$name" "$(ss_spec "$threshold" "$low,\"party_keys\":$PINS")" "$@"
  job_wait_parts "$name"
}

# sumcheck NPY PARTIES: an agent's sum.npy vs the sum of the given parties'
# CSVs (e.g. 1,3,4), exact to 1e-14 of the largest input entry
sumcheck() {
  local npy=$1 p csvs=()
  for p in ${2//,/ }; do csvs+=("$T/x$p.csv"); done
  node "$JLIB" sumcheck "$npy" "${csvs[@]}"
}

# job_gets: GET /v1/jobs/{job} answered so far (the server's request counters)
job_gets() {
  curl -s "$SURL/metrics" | awk '/^fedsvd_http_requests_total/ && /method="GET"/ &&
    index($0, "route=\"/v1/jobs/{job}\"") { s += $NF } END { print s + 0 }'
}

# ---- 1. everyone
g0=$(job_gets)
run_job all 3 - - - -
g1=$(job_gets)
# no plain GET between two steps: a step is followed by the next one of
# the same round, or by the long poll for the job to move on; about 7 job
# GETs a party (15 when each step was followed by a GET; the script's own
# GET aside)
check "all: at most 10 job GETs a party ($((g1 - g0 - 1)) for $K parties)" \
  test $((g1 - g0 - 1)) -le $((10 * K))
for i in 0 1 2 3; do
  check "all: party $((i + 1)) done" test "$(state_of all $i state)" = done
done
P=$(pid_of all 0)
curl -s -H "Authorization: Bearer $OP" "${AURL[1]}/v1/participations/$P/result" >"$T/all.result.json"
check "all: manifest lists sum.npy" grep -q '"sum.npy"' "$T/all.result.json"
curl -s -H "Authorization: Bearer $OP" -o "$T/all.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "all: sum exact to 1e-14 of the largest entry" sumcheck "$T/all.sum.npy" 1,2,3,4
check "all: progress 1" test "$(state_of all 0 progress)" = 1
check "all: bytes counted" test "$(state_of all 0 bytes_sent)" -gt 1000
check "all: the agent's copy matches the server's" cmp -s "$T/all.sum.npy" \
  "$T/agent1/participations/$P/sum.npy"

# ---- 2. party 2 stops before its masked input: the others get the sum of 1, 3, 4
run_job drop 3 - masked_input - -
check "drop: party 2 failed (fail_at)" test "$(state_of drop 1 state)" = failed
check "drop: ... saying so" bash -c "grep -q 'fail_at masked_input' '$T/drop.parts.json'"
for i in 0 2 3; do
  check "drop: party $((i + 1)) done" test "$(state_of drop $i state)" = done
done
P=$(pid_of drop 2)
curl -s -H "Authorization: Bearer $OP" -o "$T/drop.sum.npy" \
  "${AURL[3]}/v1/participations/$P/result/sum.npy"
check "drop: sum of the survivors" sumcheck "$T/drop.sum.npy" 1,3,4

# ---- 2b. a party stopping at consistency or unmasking is still in the sum (t = 2:
# U4 = {1,2,3}, reveals from {1,2})
run_job late 2 - - unmasking consistency
for i in 0 1; do
  check "late: party $((i + 1)) done" test "$(state_of late $i state)" = done
done
P=$(pid_of late 0)
curl -s -H "Authorization: Bearer $OP" -o "$T/late.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "late: sum of all four inputs" sumcheck "$T/late.sum.npy" 1,2,3,4

# ---- 3. two parties never advertise, threshold 3: the job aborts
run_job below 3 advertise_keys - advertise_keys -
for i in 1 3; do
  check "below: party $((i + 1)) failed" test "$(state_of below $i state)" = failed
done
check "below: with the server's reason" bash -c "grep -q 'job failed' '$T/below.parts.json'"
grep -h '"error"' "$T/below.parts.json" | sort | uniq -c | sed 's/^/   /'

# ---- 4. a bigger matrix: many chunks of the server's --chunk-words 16
make_data 60 50
run_job big 3 - - - -
for i in 0 1 2 3; do
  check "big: party $((i + 1)) done" test "$(state_of big $i state)" = done
done
P=$(pid_of big 3)
curl -s -H "Authorization: Bearer $OP" -o "$T/big.sum.npy" \
  "${AURL[4]}/v1/participations/$P/result/sum.npy"
check "big: sum exact" sumcheck "$T/big.sum.npy" 1,2,3,4

# ---- 5. the server restarts while the agents wait in key advertisement
make_data 5 7
# party 4 never shows up: R0 closes at its 3 s deadline (restarted with the server)
run_job_async() {
  job_start restart "$(ss_spec 3 ",\"party_keys\":$PINS")" - - - absent
}
run_job_async
# all_joined: parties 1-3 joined, the job waits for party 4 (its join deadline 3 s away)
all_joined() {
  curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(job_of restart)" >"$T/restart.status.json"
  [ "$(node "$JLIB" get "$T/restart.status.json" .present)" = '[1,2,3]' ]
}
for _ in $(seq 100); do all_joined && break; sleep 0.02; done
check "restart: parties 1-3 joined before the kill" all_joined
svc_stop "$SPID" KILL
sleep 2
start_server
job_wait_parts restart
for i in 0 1 2; do
  check "restart: party $((i + 1)) done after the server came back" \
    test "$(state_of restart $i state)" = done
done
P=$(pid_of restart 0)
curl -s -H "Authorization: Bearer $OP" -o "$T/restart.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "restart: sum of parties 1-3" sumcheck "$T/restart.sum.npy" 1,2,3

# ---- 6. pinned identities
create_job() { job_create "$1" "$(ss_spec 3 ",$2")"; } # NAME SPEC_EXTRA
# an agent refuses at once an invitation that pins another identity for its party
create_job mine "\"party_keys\":$PINS"
node --input-type=module - "$JLIB" "$T" "$OP" "${AURL[1]}" <<'EOF' >"$T/mine.out"
const [lib, T, op, url] = process.argv.slice(2);
const { readJson, request } = await import(lib);
const job = readJson(`${T}/mine.job.json`);
/* party 2's invitation, handed to agent 1 by mistake */
const body = { invitation: job.invitations[1], dataset: { path: `${T}/x2.csv`, format: 'csv' } };
const r = await request('POST', `${url}/v1/participations`, { token: op, json: body });
console.log(r.status, r.body.toString());
EOF
check "pins: an invitation pinning another identity is refused (422)" grep -q '^422 ' "$T/mine.out"
check "pins: ... naming this agent's identity and the party" \
  grep -q "this agent's identity ${FPR[1]} is not the one pinned for party 2" "$T/mine.out"

# the server relays a substituted key. It ignores pins (it holds the job as
# allow_unpinned), parties 1-3 are told the real pins, and party 4's slot is
# taken by another agent than the one pinned (agent 4 joins with an identity
# that is not party 4's pin): parties 1-3 refuse the roster.
create_job subst '"allow_unpinned":true'
node --input-type=module - "$JLIB" "$T" "$OP" "$PINS" "${AURL[@]:1}" <<'EOF'
import fs from 'node:fs';
const [lib, T, op, pinsJson, ...urls] = process.argv.slice(2);
const { readJson, postJson } = await import(lib);
const job = readJson(`${T}/subst.job.json`);
const pins = JSON.parse(pinsJson);
pins[3] = 'ab'.repeat(32); /* party 4's real identity: not agent 4's */
const ids = [];
for (let i = 0; i < 4; i++) {
  const inv = { ...job.invitations[i] };
  if (i < 3) inv.party_keys = pins;
  const body = { invitation: inv, dataset: { path: `${T}/x${inv.party}.csv`, format: 'csv' } };
  ids.push((await postJson(`${urls[i]}/v1/participations`, op, body)).id);
}
fs.writeFileSync(`${T}/subst.ids.json`, JSON.stringify({ job: job.job.id, ids }));
EOF
job_wait_parts subst
for i in 0 1 2; do
  check "subst: party $((i + 1)) refused the roster" test "$(state_of subst $i state)" = failed
  check "subst: party $((i + 1)) says party 4's key is not the pinned one" \
    bash -c "node '$JLIB' get '$T/subst.parts.json' '[$i].error' | grep -q \"party 4's identity key ${FPR[4]} is not the one pinned for it\""
done
grep -h '"error"' "$T/subst.parts.json" | head -n 1 | sed 's/^/   /'

for f in "$T"/agent*.log "$T/server.log"; do
  check "no party token in $(basename "$f")" node - "$f" "$T" <<'EOF'
const fs = require('node:fs');
const [log, T] = [fs.readFileSync(process.argv[2], 'utf8'), process.argv[3]];
const toks = fs.readdirSync(T).filter((n) => n.endsWith('.job.json'))
  .flatMap((n) => JSON.parse(fs.readFileSync(`${T}/${n}`, 'utf8')).invitations.map((inv) => inv.token));
process.exit(toks.some((t) => log.includes(t)) ? 1 : 0);
EOF
done
svc_summary
