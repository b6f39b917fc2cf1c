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
#                     selector), 2048-bit Paillier key restored from the
#                     sealed secret, j from the persisted selectors (three
#                     seed slots per decryption group: the two parties but
#                     j share one, party 3's slot empty when it is not j);
#                     then the same with noise_exchange ot
#                     (the oblivious-transfer secret restored)
#   fedpower-private  consistency of aggregation 1
#   dp-ppm            masked_input of aggregation 2 (a later sync)
# Each phase is held open by one party that stops there (fail_at, with
# allow_dropouts and threshold 2), so the kill lands in it.
#
#   tests/agent/power_restart_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/jobs.sh"
svc_need client-agent aggregation-server

start_server() { svc_server --chunk-words 64; }
start_server
check "server ready" curl -sf "$SURL/readyz" -o /dev/null

K=3
svc_agents $K --poll-ms 20
svc_pins $K

# data: party i holds 30 x 8 values (seeded); VB = twice the largest
# ||M_i||_F^2 / s_i, a public bound on ||M'_i||_2
D=8
VB=$(power_data 5)
SEED=$(printf '5a%.0s' $(seq 32))
COMMON="\"parties\":$K,\"threshold\":2,\"allow_low_threshold\":true,\"cols\":$D,\"party_rows\":[30,30,30],
  \"k\":2,\"rank\":3,\"iterations\":5,\"sync_every\":1,\"round_timeout_s\":2,\"allow_dropouts\":true,
  \"z0_seed\":\"$SEED\",\"party_keys\":[$PINS]"

# wait_job NAME: job_wait, then the job's result document -> NAME.result.json
wait_job() {
  job_wait "$1"
  curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(job_of "$1")/result" >"$T/$1.result.json"
}

# kill_at NAME PHASE AGG: SIGKILL the server once the job is in PHASE of
# aggregation AGG (10 s at most), then restart it on the same port and data dir
kill_at() {
  local seen=""
  job_in_phase "$1" "$2" "$3" && seen=1
  svc_stop "$SPID" KILL
  echo "   $1: server killed in $2 of aggregation $3 (${seen:-NOT seen})"
  start_server
  [ -n "$seen" ]
}

v_sha() { node "$JLIB" get "$T/$1.result.json" '.files[0].sha256'; }
resumed() { grep -q "\"job resumed\".*$(job_of "$1")\|$(job_of "$1").*\"job resumed\"" "$T/server.log"; }

echo "== fedpower: uninterrupted, then killed in plain_upload of round 2"
job_start plain_ref "{\"algorithm\":\"fedpower\",$COMMON}" - - plain_upload:2
wait_job plain_ref
check "fedpower reference: job done" job_done plain_ref
job_start plain "{\"algorithm\":\"fedpower\",$COMMON}" - - plain_upload:2
check "fedpower: killed in plain_upload of round 2" kill_at plain plain_upload 2
wait_job plain
check "fedpower: job done after the restart" job_done plain
check "fedpower: the server resumed it" resumed plain
for i in 0 1; do check "fedpower: party $((i + 1)) done" party_done plain $i; done
check "fedpower: V.npy byte-identical to the uninterrupted run" \
  test "$(v_sha plain)" = "$(v_sha plain_ref)" -a -n "$(v_sha plain)"

echo "== fedpower with server noise: killed in plain_upload of round 3"
job_start pnoise "{\"algorithm\":\"fedpower\",$COMMON,\"sigma_server\":0.001}" - - plain_upload:3
check "fedpower (server noise): killed in plain_upload of round 3" kill_at pnoise plain_upload 3
wait_job pnoise
check "fedpower (server noise): job done, every Z rebuilt byte for byte" job_done pnoise

echo "== fedpower-utility: killed in noise_exchange of sync 1"
job_start util "{\"algorithm\":\"fedpower-utility\",$COMMON,\"sigma\":0.001,\"value_bound\":$VB,
  \"paillier_bits\":2048,\"allow_weak_privacy\":true}" - - noise_exchange:1
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

echo "== fedpower-utility (ot): killed in noise_exchange of sync 1"
# the OT secret comes back from the sealed secret, j from the persisted selectors
job_start util_ot "{\"algorithm\":\"fedpower-utility\",$COMMON,\"sigma\":0.001,\"value_bound\":$VB,
  \"noise_exchange\":\"ot\",\"allow_weak_privacy\":true}" - - noise_exchange:1
check "fedpower-utility (ot): killed in noise_exchange of sync 1" kill_at util_ot noise_exchange 1
wait_job util_ot
check "fedpower-utility (ot): job done after the restart" job_done util_ot
check "fedpower-utility (ot): the server resumed it" resumed util_ot
for i in 0 1; do check "fedpower-utility (ot): party $((i + 1)) done" party_done util_ot $i; done
check "fedpower-utility (ot): sync 1 summed parties 1-3 and removed the noise of a responder" \
  node -e 'const c = JSON.parse(require("fs").readFileSync(process.argv[1])).convergence[1];
    process.exit(JSON.stringify(c.parties) === "[1,2,3]" && [1, 2].includes(c.noises_left) ? 0 : 1)' \
  "$T/util_ot.result.json"

echo "== fedpower-private: killed in consistency of aggregation 1"
job_start priv "{\"algorithm\":\"fedpower-private\",$COMMON,\"sigma\":0.001,\"clip_z\":1.0,
  \"bound_m\":$VB,\"allow_weak_privacy\":true}" - - consistency:1
check "fedpower-private: killed in consistency of aggregation 1" kill_at priv consistency 1
wait_job priv
check "fedpower-private: job done after the restart" job_done priv
for i in 0 1; do check "fedpower-private: party $((i + 1)) done" party_done priv $i; done

echo "== dp-ppm: killed in masked_input of aggregation 2"
job_start dppm "{\"algorithm\":\"dp-ppm\",$COMMON,\"sigma\":0.001,\"value_bound\":$VB,
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
svc_summary
