#!/bin/bash
# A client agent killed (SIGKILL) in the middle of a job and restarted on the
# same port with the same data directory resumes its participation, and the
# job finishes with that party included: one aggregation-server and three
# client-agents on loopback.
#   secure-sum        agent 2 killed in consistency; the sum.npy of every
#                     party is byte-identical to an uninterrupted run's, the
#                     participation shows restarts 1, and agent.db and its WAL
#                     hold neither the party token nor a key in the clear
#   fedpower-utility  agent 1 killed in noise_exchange of sync 1 after its
#                     noise response was written ahead: after the restart the
#                     rebuilt response matches the recorded digest (the noise
#                     is never drawn again), the job finishes; then the
#                     same with noise_exchange ot
#   dp-ppm            agent 1 killed in masked_input of aggregation 2: the
#                     job finishes and the privacy ledger holds one spent
#                     charge for the participation
#   fedpca            (with a masking-server, `fedsvd job create`) agent 2
#                     stops itself (FEDSVD_TEST_STOP_AFTER_WAL) once its
#                     exponent of the SVD aggregation is written ahead and
#                     is killed there; after the restart the rebuilt exponent
#                     matches the recorded digest, and its
#                     components, singular values and mean are byte-identical
#                     to those of an uninterrupted party of the same job (the
#                     masks are fresh per job, so two jobs never share bytes)
#                     and match a centralised `fedsvd svd --center`
#   the dataset changed while the agent was down: the participation fails
#                     with "cannot resume after restart: the dataset changed"
# Each phase is held open by party 3, so the kill lands in it: in
# secure-sum agent 3 stops itself (SIGSTOP, FEDSVD_TEST_STOP_AFTER_WAL) once
# its consistency message is written ahead, under a deadline far away, and
# goes on (SIGCONT) after the restart, so the job needs no deadline to pass;
# in the others party 3 stops there for good (fail_at, threshold 2,
# allow_dropouts) and the phase lasts until its deadline (fedpower-utility:
# agent 3 may answer the noise exchange early, while unmasking runs, so a
# stop at its response would not hold noise_exchange itself).
#
#   tests/agent/resume_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/jobs.sh"
svc_need client-agent aggregation-server

svc_server --chunk-words 64
check "server ready" curl -sf "$SURL/readyz" -o /dev/null

# start_agent I: agent I on its port (a free one the first time)
K=3
start_agent() { svc_agent "$1" --poll-ms 20 --log-level debug; }
for i in $(seq 1 $K); do start_agent "$i"; done
svc_pins $K

# data: party i holds 30 x 8 values (seeded); VB = twice the largest
# ||M_i||_F^2 / s_i, a public bound on ||M'_i||_2
D=8
VB=$(power_data 11)

wait_job() { job_wait "$1"; }

# hold_agent3 PATH: restart agent 3 so that it stops itself (SIGSTOP) once
# the message PATH of the next job is written ahead, before it is sent;
# release_agent3: wait until it has stopped there, then let it go on
hold_agent3() {
  svc_stop "${APID[3]}"
  FEDSVD_TEST_STOP_AFTER_WAL=$1 start_agent 3
}
release_agent3() { svc_wait_stopped "${APID[3]}" && kill -CONT "${APID[3]}"; }
in_phase() { job_in_phase "$@"; }

# kill_agent I: SIGKILL agent I; restart_agent I: same port, same data dir
kill_agent() { svc_stop "${APID[$1]}" KILL; }
restart_agent() { start_agent "$1"; }

party_field() { state_of "$@"; } # NAME INDEX FIELD

# no_secret_in FILES...: the party tokens of every invitation, agent.key and
# identity.key do not appear (as bytes) in any of the files
no_secret_in() {
  node --input-type=module - "$T" "$@" <<'EOF'
import fs from 'node:fs';
const [T, ...files] = process.argv.slice(2);
const needles = [];
for (const f of fs.readdirSync(T).filter((n) => n.endsWith('.job.json'))) {
  for (const inv of JSON.parse(fs.readFileSync(`${T}/${f}`)).invitations) {
    needles.push(Buffer.from(inv.token));
  }
}
for (let i = 1; i <= 3; i++) {
  for (const k of ['agent.key', 'identity.key']) {
    needles.push(fs.readFileSync(`${T}/agent${i}/${k}`));
  }
}
let bad = 0;
for (const f of files) {
  if (!fs.existsSync(f)) continue;
  const b = fs.readFileSync(f);
  for (const n of needles) if (b.indexOf(n) >= 0) { console.error(`secret found in ${f}`); bad++; }
}
process.exit(bad ? 1 : 0);
EOF
}

SS="\"algorithm\":\"secure-sum\",\"parties\":$K,\"threshold\":2,\"allow_low_threshold\":true,
  \"shape\":[30,$D],\"join_timeout_s\":10,\"party_keys\":[$PINS]"

echo "== secure-sum: uninterrupted, then agent 2 killed in consistency"
job_start ss_ref "{$SS,\"round_timeout_s\":3}"
wait_job ss_ref
check "secure-sum reference: job done" job_done ss_ref
hold_agent3 /aggregations/0/consistency
job_start ss "{$SS,\"round_timeout_s\":60}"
check "secure-sum: agent 3 stopped at its consistency message" svc_wait_stopped "${APID[3]}"
check "secure-sum: the job reached consistency" in_phase ss consistency 0
kill_agent 2
check "secure-sum: agent.db holds no token or key while the participation runs" \
  no_secret_in "$T/agent2/agent.db" "$T/agent2/agent.db-wal"
check "secure-sum: agent.key is 0600" test "$(stat -c %a "$T/agent2/agent.key")" = 600
check "secure-sum: agent.key holds 32 bytes" test "$(stat -c %s "$T/agent2/agent.key")" = 32
check "secure-sum: no token file at rest" \
  test -z "$(find "$T/agent2/participations" -name token)"
restart_agent 2
check "secure-sum: agent 3 goes on" release_agent3
wait_job ss
check "secure-sum: job done after the agent's restart" job_done ss
for i in 0 1 2; do check "secure-sum: party $((i + 1)) done" party_done ss $i; done
check "secure-sum: the participation counts one restart" test "$(party_field ss 1 restarts)" = 1
check "secure-sum: the agent resumed it" grep -q '"participation resumed"' "$T/agent2.log"
P=$(pid_of ss 1)
PREF=$(pid_of ss_ref 1)
check "secure-sum: party 2's sum.npy byte-identical to the uninterrupted run" \
  cmp -s "$T/agent2/participations/$P/sum.npy" "$T/agent2/participations/$PREF/sum.npy"
check "secure-sum: the sum holds parties 1, 2 and 3" \
  node "$JLIB" sumcheck "$T/agent2/participations/$P/sum.npy" "$T/x1.csv" "$T/x2.csv" "$T/x3.csv"
check "secure-sum: the ended participation's resume state is gone" \
  no_secret_in "$T/agent2/agent.db" "$T/agent2/agent.db-wal"

echo "== fedpower-utility: agent 1 killed in noise_exchange of sync 1"
COMMON="\"parties\":$K,\"threshold\":2,\"allow_low_threshold\":true,\"cols\":$D,
  \"party_rows\":[30,30,30],\"k\":2,\"rank\":3,\"iterations\":4,\"sync_every\":1,
  \"allow_dropouts\":true,\"party_keys\":[$PINS]"
job_start util "{\"algorithm\":\"fedpower-utility\",$COMMON,\"round_timeout_s\":4,\"sigma\":0.001,
  \"value_bound\":$VB,\"paillier_bits\":1024,\"allow_weak_privacy\":true}" - - noise_exchange:1
UJOB=$(job_of util)
# the response is written ahead before it leaves: wait for that, then kill
resp_logged() { grep -q "message written ahead.*$UJOB/aggregations/1/noise-response" "$T/agent1.log"; }
for _ in $(seq 1000); do resp_logged && break; sleep 0.01; done
check "fedpower-utility: agent 1 wrote its sync-1 response ahead" resp_logged
check "fedpower-utility: the job is in noise_exchange of sync 1" in_phase util noise_exchange 1
kill_agent 1
restart_agent 1
wait_job util
check "fedpower-utility: job done after the agent's restart" job_done util
for i in 0 1; do check "fedpower-utility: party $((i + 1)) done" party_done util $i; done
check "fedpower-utility: the rebuilt noise response matches the one sent (noise not drawn again)" \
  grep -q "message matches its write-ahead digest.*$UJOB/aggregations/1/noise-response" \
  "$T/agent1.log"

echo "== fedpower-utility (ot): agent 1 killed in noise_exchange of sync 1"
# the oblivious-transfer answer is as deterministic as the Paillier one
job_start util_ot "{\"algorithm\":\"fedpower-utility\",$COMMON,\"round_timeout_s\":4,\"sigma\":0.001,
  \"value_bound\":$VB,\"noise_exchange\":\"ot\",\"allow_weak_privacy\":true}" - - noise_exchange:1
UJOB=$(job_of util_ot 2>/dev/null)
check "fedpower-utility (ot): job created" test -n "$UJOB"
UJOB=${UJOB:-no-such-job}
for _ in $(seq 1000); do resp_logged && break; sleep 0.01; done
check "fedpower-utility (ot): agent 1 wrote its sync-1 response ahead" resp_logged
check "fedpower-utility (ot): the job is in noise_exchange of sync 1" in_phase util_ot noise_exchange 1
kill_agent 1
restart_agent 1
wait_job util_ot
check "fedpower-utility (ot): job done after the agent's restart" job_done util_ot
for i in 0 1; do check "fedpower-utility (ot): party $((i + 1)) done" party_done util_ot $i; done
check "fedpower-utility (ot): the rebuilt noise response matches the one sent" \
  grep -q "message matches its write-ahead digest.*$UJOB/aggregations/1/noise-response" \
  "$T/agent1.log"

echo "== dp-ppm: agent 1 killed in masked_input of aggregation 2"
job_start dppm "{\"algorithm\":\"dp-ppm\",$COMMON,\"round_timeout_s\":4,\"sigma\":0.001,\"value_bound\":$VB,
  \"allow_weak_privacy\":true}" - - masked_input:2
check "dp-ppm: the job is in masked_input of aggregation 2" in_phase dppm masked_input 2
kill_agent 1
restart_agent 1
wait_job dppm
check "dp-ppm: job done after the agent's restart" job_done dppm
for i in 0 1; do check "dp-ppm: party $((i + 1)) done" party_done dppm $i; done
check "dp-ppm: the participation counts one restart" test "$(party_field dppm 0 restarts)" = 1
P=$(pid_of dppm 0)
curl -s -H "Authorization: Bearer $OP" "${AURL[1]}/v1/privacy-ledger" >"$T/ledger.json"
ledger_once() {
  node --input-type=module - "$T/ledger.json" "$P" <<'EOF'
import fs from 'node:fs';
const [f, id] = process.argv.slice(2);
const j = JSON.parse(fs.readFileSync(f));
const all = [];
const walk = (v) => {
  if (Array.isArray(v)) v.forEach(walk);
  else if (v && typeof v === 'object') {
    if (v.participation === id) all.push(v);
    Object.values(v).forEach(walk);
  }
};
walk(j);
process.exit(all.length === 1 && all[0].state === 'spent' ? 0 : 1);
EOF
}
check "dp-ppm: the privacy ledger charged the participation once (spent)" ledger_once

if [ -x "$BIN/masking-server" ] && [ -x "$BIN/fedsvd" ]; then
  echo "== fedpca: agent 2 killed at its exponent of the SVD aggregation"
  F=$BIN/fedsvd
  svc_masking
  svc_party_keys $K
  # agent 2 stops itself (SIGSTOP) once its SVD exponent (aggregation 1; the
  # statistics round is aggregation 0) is written ahead and before it is
  # sent: the job cannot finish without it, so the kill lands in the job
  svc_stop "${APID[2]}"
  FEDSVD_TEST_STOP_AFTER_WAL=/aggregations/1/exponent start_agent 2
  "$F" gen planted --rows 400 --cols 30 --rank 4 --noise 0.2 --seed 5 --out-dir "$T/d" --parties 3 \
    --split 100,170,130 >/dev/null
  "$F" svd --input "$T/d/party-1.npy" --input "$T/d/party-2.npy" --input "$T/d/party-3.npy" \
    --center --out "$T/refc" >/dev/null
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedpca --k 3 \
    "${PKEYS[@]}" --shape 400,30 --party-sizes 100,170,130 --masking-server "$MURL" \
    --masking-token-file "$T/madmin.token" --round-timeout 30 --out-dir "$T/pca" \
    --format json >"$T/pca.create.json" 2>"$T/pca.create.err"
  node --input-type=module - "$JLIB" "$T" "$OP" "${AURL[@]:1}" <<'EOF2'
import fs from 'node:fs';
const [lib, T, op, ...urls] = process.argv.slice(2);
const { readJson, postJson } = await import(lib);
const created = readJson(`${T}/pca.create.json`);
const ids = [];
for (let i = 0; i < urls.length; i++) {
  const inv = readJson(created.invitations[i]);
  const body = { invitation: inv, dataset: { path: `${T}/d/party-${inv.party}.npy` } };
  ids.push((await postJson(`${urls[i]}/v1/participations`, op, body)).id);
}
fs.writeFileSync(`${T}/pca.ids.json`, JSON.stringify({ job: created.job.id, ids }));
EOF2
  PJOB=$(job_of pca)
  exp_logged() { grep -q "message written ahead.*$PJOB/aggregations/1/exponent" "$T/agent2.log"; }
  check "fedpca: agent 2 stopped at its SVD exponent" svc_wait_stopped "${APID[2]}"
  check "fedpca: agent 2 wrote its SVD exponent ahead" exp_logged
  check "fedpca: the job waits for exponents of the SVD aggregation" in_phase pca exponents 1
  kill_agent 2
  restart_agent 2
  wait_job pca
  check "fedpca: the rebuilt exponent matches the one written ahead" \
    grep -q "message matches its write-ahead digest.*$PJOB/aggregations/1/exponent" "$T/agent2.log"
  check "fedpca: job done after the agent's restart" job_done pca
  for i in 0 1 2; do check "fedpca: party $((i + 1)) done" party_done pca $i; done
  check "fedpca: the participation counts one restart" test "$(party_field pca 1 restarts)" = 1
  P1=$(pid_of pca 0)
  P2=$(pid_of pca 1)
  for f in components singular_values mean explained_variance; do
    check "fedpca: party 2's $f.npy byte-identical to uninterrupted party 1's" \
      cmp -s "$T/agent2/participations/$P2/$f.npy" "$T/agent1/participations/$P1/$f.npy"
  done
  v=$("$F" compare --a "$T/agent2/participations/$P2/components.npy" --b "$T/refc/V.npy" \
    --metric subspace --k 3 2>/dev/null)
  check "fedpca: party 2's components vs fedsvd svd --center ($v)" \
    awk -v v="$v" 'BEGIN { exit !(v != "" && v + 0 <= 1e-10) }'
fi

echo "== the dataset changed while the agent was down"
job_start chg "{$SS,\"round_timeout_s\":3}" - - consistency
check "changed: the job reached consistency" in_phase chg consistency 0
kill_agent 2
cp "$T/x2.csv" "$T/x2.keep"
sed -i '1s/^/1,/; 1s/,[^,]*$//' "$T/x2.csv"
restart_agent 2
P=$(pid_of chg 1)
for _ in $(seq 100); do
  curl -s -H "Authorization: Bearer $OP" "${AURL[2]}/v1/participations/$P" >"$T/chg.part.json"
  [ "$(node "$JLIB" get "$T/chg.part.json" .state)" != running ] && break
  sleep 0.05
done
check "changed: the participation fails with the reason" \
  test "$(node "$JLIB" get "$T/chg.part.json" .error)" = \
  "cannot resume after restart: the dataset changed"
mv "$T/x2.keep" "$T/x2.csv"

if [ "$failn" -gt 0 ]; then
  grep -h '"error"\|"reason"' "$T"/*.status.json "$T"/*.parts.json 2>/dev/null | sort | uniq -c | head -n 8
  grep -h 'cannot\|failed' "$T"/agent*.log | tail -n 8
fi
svc_summary
