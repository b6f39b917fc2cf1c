#!/bin/bash
# The aggregation server resumes power-method jobs after kill -9: one
# aggregation-server and three client-agents on loopback; for each of the
# four algorithms a job runs, the server is killed (SIGKILL) while the job is
# in a given phase of a given aggregation and restarted on the same port
# with the same data directory, and the job must finish:
#   fedpower          plain_upload of round 2 (party 3 drops there, so the
#                     round waits for its deadline); the result V.npy is
#                     byte-identical to an uninterrupted run with the same
#                     z0_seed and the same dropout; then once more with
#                     server noise (sigma_server), whose replay must rebuild
#                     every broadcast Z byte for byte (else the job fails)
#   fedpower-utility  noise_exchange of sync 1 (party 3 does not answer its
#                     selector), 1024-bit Paillier key restored from the
#                     sealed secret
#   fedpower-private  consistency of aggregation 1
#   dp-ppm            masked_input of aggregation 2 (a later sync)
# Each phase is held open by one party that stops there (fail_at, with
# allow_dropouts and threshold 2), so the kill lands in it.
#
#   tests/agent/power_restart_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
for b in client-agent aggregation-server; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b"; echo "0 passed, 1 failed"; exit 1; }
done
command -v node >/dev/null || { echo "no node"; echo "0 passed, 1 failed"; exit 1; }
JLIB=$(cd "$(dirname "$0")/../lib" && pwd)/json.mjs
T=$(mktemp -d)
PIDS=()
SPID=""
cleanup() {
  for p in "${PIDS[@]}" $SPID; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}" $SPID; do wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT
pass=0
failn=0
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}

ADMIN=admin-token-0123456789abcdefghij
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

SPORT=0
start_server() {
  rm -f "$T/sport"
  "$BIN/aggregation-server" --listen "127.0.0.1:$SPORT" --port-file "$T/sport" --data-dir "$T/server" \
    --admin-token-file "$T/admin.token" --chunk-words 64 2>>"$T/server.log" &
  SPID=$!
  for _ in $(seq 200); do [ -s "$T/sport" ] && break; sleep 0.05; done
  SPORT=$(cat "$T/sport" 2>/dev/null)
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$SPORT/readyz" >/dev/null && break; sleep 0.05; done
}
start_server
SURL=http://127.0.0.1:$SPORT
check "server ready" curl -sf "$SURL/readyz" -o /dev/null

K=3
AURL=()
for i in $(seq 1 $K); do
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" --poll-ms 20 2>"$T/agent$i.log" &
  PIDS+=($!)
done
for i in $(seq 1 $K); do
  for _ in $(seq 100); do [ -s "$T/port$i" ] && break; sleep 0.05; done
  AURL[$i]=http://127.0.0.1:$(cat "$T/port$i")
done
for _ in $(seq 100); do curl -sf "${AURL[$K]}/readyz" >/dev/null && break; sleep 0.05; done
PINS=""
for i in $(seq 1 $K); do
  PINS="$PINS${PINS:+,}\"$(curl -sf -H "Authorization: Bearer $OP" "${AURL[$i]}/v1/identity" |
    node "$JLIB" get - .fingerprint)\""
done

# data: party i holds 30 x 8 values (seeded); VB = twice the largest
# ||M_i||_F^2 / s_i, a public bound on ||M'_i||_2
D=8
VB=$(node --input-type=module - "$JLIB" "$T" "$K" "$D" <<'EOF'
import fs from 'node:fs';
const [lib, T, K, D] = process.argv.slice(2);
const { Rng } = await import(lib);
const rng = new Rng(5);
let vb = 0;
for (let i = 1; i <= Number(K); i++) {
  let out = '';
  let s = 0;
  for (let r = 0; r < 30; r++) {
    const row = [];
    for (let c = 0; c < Number(D); c++) {
      const x = (rng.random() - 0.5) * (c + 1);
      s += x * x;
      row.push(x);
    }
    out += row.map(String).join(',') + '\n';
  }
  vb = Math.max(vb, s / 30);
  fs.writeFileSync(`${T}/x${i}.csv`, out);
}
console.log((2 * vb).toPrecision(6));
EOF
)
SEED=$(printf '5a%.0s' $(seq 32))
COMMON="\"parties\":$K,\"threshold\":2,\"allow_low_threshold\":true,\"cols\":$D,\"party_rows\":[30,30,30],
  \"k\":2,\"rank\":3,\"iterations\":5,\"sync_every\":1,\"round_timeout_s\":2,\"allow_dropouts\":true,
  \"z0_seed\":\"$SEED\",\"party_keys\":[$PINS]"

# start_job NAME SPEC FAIL_AT...: create the job, hand invitation i to agent i
start_job() {
  local name=$1 spec=$2; shift 2
  curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$spec" \
    "$SURL/v1/jobs" >"$T/$name.job.json"
  node --input-type=module - "$JLIB" "$T" "$name" "$OP" "${AURL[@]:1}" -- "$@" <<'EOF'
import fs from 'node:fs';
const [lib, T, name, op, ...rest] = process.argv.slice(2);
const { readJson, postJson } = await import(lib);
const sep = rest.indexOf('--');
const urls = rest.slice(0, sep);
const fails = rest.slice(sep + 1);
const job = readJson(`${T}/${name}.job.json`);
const ids = [];
for (const inv of job.invitations) {
  const i = inv.party - 1;
  const body = { invitation: inv, dataset: { path: `${T}/x${inv.party}.csv`, format: 'csv' },
                 fail_at: (fails[i] ?? '-') === '-' ? null : fails[i] };
  ids.push((await postJson(`${urls[i]}/v1/participations`, op, body)).id);
}
fs.writeFileSync(`${T}/${name}.ids.json`, JSON.stringify({ job: job.job.id, ids }));
EOF
}
job_of() { node "$JLIB" get "$T/$1.ids.json" .job; }

# wait_job NAME: wait (60 s) for every participation to end, then the job
wait_job() {
  local urls=() i=0 id
  for id in $(node "$JLIB" get "$T/$1.ids.json" .ids | tr -d '[]"' | tr , ' '); do
    i=$((i + 1))
    urls+=("${AURL[$i]}/v1/participations/$id")
  done
  node "$JLIB" wait-done "$T/$1.parts.json" 60 "$OP" "${urls[@]}"
  for _ in $(seq 100); do
    curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(job_of "$1")" >"$T/$1.status.json"
    [ "$(node "$JLIB" get "$T/$1.status.json" .state)" != running ] && break
    sleep 0.1
  done
  curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(job_of "$1")/result" >"$T/$1.result.json"
}

# kill_at NAME PHASE AGG: SIGKILL the server once the job is in PHASE of
# aggregation AGG (10 s at most), then restart it on the same port and data dir
kill_at() {
  local job seen="" st
  job=$(job_of "$1")
  for _ in $(seq 1000); do
    st=$(curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$job")
    if printf '%s' "$st" | grep -q "\"phase\": *\"$2\"" &&
      printf '%s' "$st" | grep -q "\"aggregation\": *$3[,}]"; then
      seen=1
      break
    fi
    sleep 0.01
  done
  kill -9 "$SPID"; wait "$SPID" 2>/dev/null
  SPID=""
  echo "   $1: server killed in $2 of aggregation $3 (${seen:-NOT seen})"
  start_server
  [ -n "$seen" ]
}

job_done() { test "$(node "$JLIB" get "$T/$1.status.json" .state)" = done; }
party_done() { test "$(node "$JLIB" get "$T/$1.parts.json" "[$2].state")" = done; }
v_sha() { node "$JLIB" get "$T/$1.result.json" '.files[0].sha256'; }
resumed() { grep -q "\"job resumed\".*$(job_of "$1")\|$(job_of "$1").*\"job resumed\"" "$T/server.log"; }

echo "== fedpower: uninterrupted, then killed in plain_upload of round 2"
start_job plain_ref "{\"algorithm\":\"fedpower\",$COMMON}" - - plain_upload:2
wait_job plain_ref
check "fedpower reference: job done" job_done plain_ref
start_job plain "{\"algorithm\":\"fedpower\",$COMMON}" - - plain_upload:2
check "fedpower: killed in plain_upload of round 2" kill_at plain plain_upload 2
wait_job plain
check "fedpower: job done after the restart" job_done plain
check "fedpower: the server resumed it" resumed plain
for i in 0 1; do check "fedpower: party $((i + 1)) done" party_done plain $i; done
check "fedpower: V.npy byte-identical to the uninterrupted run" \
  test "$(v_sha plain)" = "$(v_sha plain_ref)" -a -n "$(v_sha plain)"

echo "== fedpower with server noise: killed in plain_upload of round 3"
start_job pnoise "{\"algorithm\":\"fedpower\",$COMMON,\"sigma_server\":0.001}" - - plain_upload:3
check "fedpower (server noise): killed in plain_upload of round 3" kill_at pnoise plain_upload 3
wait_job pnoise
check "fedpower (server noise): job done, every Z rebuilt byte for byte" job_done pnoise

echo "== fedpower-utility: killed in noise_exchange of sync 1"
start_job util "{\"algorithm\":\"fedpower-utility\",$COMMON,\"sigma\":0.001,\"value_bound\":$VB,
  \"paillier_bits\":1024,\"allow_weak_privacy\":true}" - - noise_exchange:1
check "fedpower-utility: killed in noise_exchange of sync 1" kill_at util noise_exchange 1
wait_job util
check "fedpower-utility: job done after the restart" job_done util
check "fedpower-utility: the server resumed it" resumed util
for i in 0 1; do check "fedpower-utility: party $((i + 1)) done" party_done util $i; done
# j's noise stays, and party 3's when it is not j: 1 or 2 of the three
check "fedpower-utility: sync 1 summed parties 1-3 and removed the noise of a responder" \
  node -e 'const c = JSON.parse(require("fs").readFileSync(process.argv[1])).convergence[1];
    process.exit(JSON.stringify(c.parties) === "[1,2,3]" && [1, 2].includes(c.noises_left) ? 0 : 1)' \
  "$T/util.result.json"

echo "== fedpower-private: killed in consistency of aggregation 1"
start_job priv "{\"algorithm\":\"fedpower-private\",$COMMON,\"sigma\":0.001,\"clip_z\":1.0,
  \"bound_m\":$VB,\"allow_weak_privacy\":true}" - - consistency:1
check "fedpower-private: killed in consistency of aggregation 1" kill_at priv consistency 1
wait_job priv
check "fedpower-private: job done after the restart" job_done priv
for i in 0 1; do check "fedpower-private: party $((i + 1)) done" party_done priv $i; done

echo "== dp-ppm: killed in masked_input of aggregation 2"
start_job dppm "{\"algorithm\":\"dp-ppm\",$COMMON,\"sigma\":0.001,\"value_bound\":$VB,
  \"allow_weak_privacy\":true}" - - masked_input:2
check "dp-ppm: killed in masked_input of aggregation 2" kill_at dppm masked_input 2
wait_job dppm
check "dp-ppm: job done after the restart" job_done dppm
check "dp-ppm: the server resumed it" resumed dppm
for i in 0 1; do check "dp-ppm: party $((i + 1)) done" party_done dppm $i; done
check "dp-ppm: aggregations 2.. hold parties 1 and 2" \
  test "$(node "$JLIB" get "$T/dppm.result.json" '.convergence[3].parties' | tr -d ' \n')" = "[1,2]"

echo "== secrets at rest"
check "server.key is 0600" test "$(stat -c %a "$T/server/server.key")" = 600
check "no job keeps its sealed secret after it ended" \
  test -z "$(find "$T/server/jobs" -name power.sealed)"
if [ "$failn" -gt 0 ]; then
  grep -ho '"error": *"[^"]*"' "$T"/*.status.json "$T"/*.parts.json 2>/dev/null | sort | uniq -c | head -n 8
  grep -i 'resume\|failed' "$T/server.log" | tail -n 5
fi
echo "$pass passed, $failn failed"
[ "$failn" = 0 ]
