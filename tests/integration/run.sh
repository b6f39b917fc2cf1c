#!/usr/bin/env bash
# Integration tests with real processes on 127.0.0.1: `fedsvd local` starts
# an aggregation-server and one client-agent per party (separate processes,
# free loopback ports), runs a secure-sum job and stops everything. The
# expected sums come from `fedsvd sum` (long double accumulation) and are
# compared with `fedsvd compare --metric maxrel` (max |a-b| / max |b|).
#
# Covered: 10 parties of 1000 x 1000 doubles (the acceptance run), the same
# with party 3 dropping at masked_input and threshold 7, a dropout at each
# phase, values of very different magnitudes, aborts below the threshold,
# SIGINT during a run, usage errors, and that no process or temporary
# directory is left behind.
#
# Usage: tests/integration/run.sh BIN_DIR (default build/bin)
# Prints "ok ..."/"FAIL ..." per check and ends with "integration: P passed, F failed".
set -u

BIN=${1:-build/bin}
F="$BIN/fedsvd"
passed=0
failed=0

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $*"
    if [ -n "${ERR:-}" ] && [ -s "$ERR" ]; then
        sed 's/^/     stderr: /' "$ERR" | tail -n 8
    fi
}

finish() {
    echo "integration: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

for b in fedsvd aggregation-server client-agent; do
    if [ ! -x "$BIN/$b" ]; then
        fail "$BIN/$b not built"
    fi
done
[ "$failed" -eq 0 ] || finish

T=$(mktemp -d)
BG_PID=""
cleanup() {
    # Only the fedsvd we started in the background, by its pid.
    if [ -n "$BG_PID" ] && kill -0 "$BG_PID" 2>/dev/null; then
        kill -TERM "$BG_PID" 2>/dev/null
        wait "$BG_PID" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT
OUT="$T/stdout"
ERR="$T/stderr"
# fedsvd local makes its temporary directory under TMPDIR: check it is cleaned.
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"

# run ARGS...: fedsvd with stdout/stderr captured; sets RC and SECS.
run() {
    local t0 t1
    t0=$(date +%s.%N)
    "$F" "$@" >"$OUT" 2>"$ERR"
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

# json_num KEY FILE / json_str KEY FILE: first "KEY": value in a JSON text.
json_num() {
    sed -n "s/.*\"$1\": *\\([-+0-9.eE]*\\).*/\\1/p" "$2" | head -n 1
}
json_str() {
    sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" "$2" | head -n 1
}
# json_ids KEY FILE: the integer array after "KEY": in one-line JSON, as "1,2,3".
json_ids() {
    sed -n "s/.*\"$1\": *\\[\\([0-9, ]*\\)\\].*/\\1/p" "$2" | head -n 1 | tr -d ' '
}

below() { # NAME VALUE BOUND
    if awk -v v="$2" -v b="$3" 'BEGIN { exit !(v != "" && v + 0 <= b + 0) }'; then
        ok "$1 ($2 <= $3)"
    else
        fail "$1: got '$2', expected <= $3"
    fi
}

# leftovers: no process whose command line names our temporary tree, and
# fedsvd local's own temporary directories are gone.
no_leftovers() { # NAME
    local procs dirs
    procs=$(pgrep -f -- "$TMPDIR/fedsvd-local-" | tr '\n' ' ')
    dirs=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'fedsvd-local-*' | wc -l)
    if [ -z "$procs" ] && [ "$dirs" -eq 0 ]; then
        ok "$1: no process or temporary directory left"
    else
        fail "$1: left processes [$procs], $dirs temporary directories"
    fi
}

# expect_sum NAME OUTDIR IDS FILES_PREFIX TOL: OUTDIR/sum.npy equals the sum
# of FILES_PREFIX-<i>.npy for i in IDS (comma-separated).
expect_sum() {
    local name=$1 dir=$2 ids=$3 prefix=$4 tol=$5 files=() i v
    for i in ${ids//,/ }; do
        files+=("$prefix-$i.npy")
    done
    if ! "$F" sum --out "$dir/expected.npy" "${files[@]}" >/dev/null 2>"$T/sum.err"; then
        fail "$name: fedsvd sum failed: $(cat "$T/sum.err")"
        return
    fi
    v=$("$F" compare --a "$dir/sum.npy" --b "$dir/expected.npy" --metric maxrel 2>"$T/cmp.err")
    below "$name: max relative error of sum.npy vs the sum of parties {$ids}" "$v" "$tol"
    LAST_ERR=$v
}

# local_ok NAME OUTDIR: exit 0, sum.npy and summary.json written, every
# process stopped cleanly (exit 0, no SIGKILL).
local_ok() {
    local name=$1 dir=$2
    if [ "$RC" -ne 0 ]; then
        fail "$name: exit $RC"
        return 1
    fi
    if [ ! -s "$dir/sum.npy" ] || [ ! -s "$dir/summary.json" ]; then
        fail "$name: sum.npy or summary.json missing"
        return 1
    fi
    ok "$name: exit 0 in ${SECS}s, sum.npy and summary.json written"
    if grep -q '"sigkilled": true' "$dir/summary.json" || grep -q '"signal"' "$dir/summary.json" ||
        grep '"exit_code"' "$dir/summary.json" | grep -qv '"exit_code": 0'; then
        fail "$name: a service did not stop cleanly on SIGTERM: $(tr -d '\n ' <"$dir/summary.json" |
            sed 's/.*"processes"://')"
    else
        ok "$name: every service exited 0 on SIGTERM"
    fi
    return 0
}

gen_parties() { # DIR K ROWS COLS SEED_BASE
    local dir=$1 k=$2 rows=$3 cols=$4 seed=$5 i
    mkdir -p "$dir"
    for i in $(seq 1 "$k"); do
        "$F" gen planted --rows "$rows" --cols "$cols" --rank 5 --noise 1 --seed $((seed + i)) \
            --out "$dir/p-$i.npy" >/dev/null 2>"$ERR" || {
            fail "gen party $i of $dir"
            return 1
        }
    done
}

party_args() { # DIR K -> --party DIR/p-1.npy ...
    local i
    for i in $(seq 1 "$2"); do
        printf -- '--party\n%s/p-%d.npy\n' "$1" "$i"
    done
}

echo "== the reference tools (fedsvd sum, compare --metric maxrel)"
printf '1,2\n3,4\n' >"$T/a.csv"
printf '0.5,-2\n1e16,4\n' >"$T/b.csv"
printf '1e-300,0\n-1e16,1\n' >"$T/c.csv"
run sum --out "$T/abc.csv" "$T/a.csv" "$T/b.csv" "$T/c.csv"
if [ "$RC" -eq 0 ] && [ "$(tr '\n' ' ' <"$T/abc.csv")" = "1.5,0 3,9 " ]; then
    ok "fedsvd sum accumulates in long double (3 + 1e16 - 1e16 = 3; doubles give 4)"
else
    fail "fedsvd sum: exit $RC, $(tr '\n' ' ' <"$T/abc.csv" 2>/dev/null)"
fi
printf '1,2\n3,4.000004\n' >"$T/d.csv"
run compare --a "$T/d.csv" --b "$T/a.csv" --metric maxrel --format json
v=$(json_num value "$OUT")
awk -v v="$v" 'BEGIN { exit !(v > 0.99e-6 && v < 1.01e-6) }' && ok "compare --metric maxrel = max|a-b|/max|b| ($v)" ||
    fail "maxrel: '$v'"
run sum --out "$T/x.npy" "$T/a.csv" "$T/d.csv" "$T/b.csv" --format json
[ "$RC" -eq 0 ] && grep -q '"inputs": 3' "$OUT" && ok "fedsvd sum --format json" || fail "sum json: exit $RC"
printf '1,2,3\n' >"$T/e.csv"
run sum --out "$T/x.npy" "$T/a.csv" "$T/e.csv"
[ "$RC" -eq 1 ] && grep -q 'differs' "$ERR" && ok "fedsvd sum of different shapes: exit 1" ||
    fail "sum of different shapes: exit $RC"

echo "== 10 parties of 1000 x 1000 doubles"
BIG="$T/big"
gen_parties "$BIG" 10 1000 1000 100 || finish
mapfile -t PARGS < <(party_args "$BIG" 10)
run local --algorithm secure-sum "${PARGS[@]}" --out "$T/r-big" --round-timeout 60 --format json
if local_ok "10 x 1000x1000" "$T/r-big"; then
    expect_sum "10 x 1000x1000" "$T/r-big" 1,2,3,4,5,6,7,8,9,10 "$BIG/p" 1e-12
    BIG_ERR=$LAST_ERR
    BIG_SECS=$SECS
    BIG_JOB=$(json_num job "$OUT")
    tr -d '\n' <"$T/r-big/summary.json" | tr -s ' ' >"$T/big-summary.json"
    [ "$(json_ids dropped "$OUT")" = "" ] && ok "no party dropped" || fail "dropped: $(json_ids dropped "$OUT")"
    [ "$(json_ids survivors "$OUT")" = "1,2,3,4,5,6,7,8,9,10" ] && ok "survivors 1..10" ||
        fail "survivors: $(json_ids survivors "$OUT")"
    for key in advertise_keys share_keys masked_input consistency unmasking; do
        grep -q "\"$key\": [0-9]" "$T/r-big/summary.json" && ok "summary has phase seconds for $key" ||
            fail "summary lacks phase seconds for $key"
    done
    sent=$(grep -o '"bytes_sent": [0-9]*' "$T/r-big/summary.json" | awk '{ s += $2; n++ } END { print n, s }')
    if [ "${sent%% *}" = "10" ] && [ "${sent##* }" -gt 80000000 ]; then
        ok "summary: bytes_sent for 10 parties, ${sent##* } in total (> 10 x 8 MB)"
    else
        fail "summary bytes_sent: $sent"
    fi
    SRV_IN=$(json_num bytes_in "$T/big-summary.json")
    SRV_OUT=$(json_num bytes_out "$T/big-summary.json")
    [ -n "$SRV_IN" ] && [ "$SRV_IN" -gt 80000000 ] && ok "summary: server bytes_in $SRV_IN" ||
        fail "summary server bytes_in '$SRV_IN'"
    n_sha=$(grep -c '"sum_sha256": "[0-9a-f]\{64\}"' "$T/r-big/summary.json")
    [ "$n_sha" -eq 10 ] && ok "every agent holds the server's sum (sha256 checked)" ||
        fail "agents with the server's sum: $n_sha of 10"
    grep -q '"state": "done"' "$T/r-big/summary.json" && ok "summary state done" || fail "summary state"
    [ -s "$T/r-big/logs/aggregation-server.log" ] && [ -s "$T/r-big/logs/agent-10.log" ] &&
        ok "service logs copied to OUT/logs" || fail "logs not copied"
    if grep -qE '"token"|Bearer [A-Za-z0-9_-]{20}' "$T"/r-big/logs/*.log; then
        fail "a log mentions a token"
    else
        ok "no token in the service logs"
    fi
fi
no_leftovers "10 x 1000x1000"

echo "== 10 x 1000x1000, party 3 stops at masked_input, threshold 7"
run local --algorithm secure-sum "${PARGS[@]}" --out "$T/r-big3" --threshold 7 \
    --fail-party 3:masked_input --round-timeout 10 --format json
if local_ok "fail 3:masked_input" "$T/r-big3"; then
    [ "$(json_ids dropped "$OUT")" = "3" ] && ok "party 3 dropped" || fail "dropped: $(json_ids dropped "$OUT")"
    [ "$(json_ids survivors "$OUT")" = "1,2,4,5,6,7,8,9,10" ] && ok "survivors: the other 9" ||
        fail "survivors: $(json_ids survivors "$OUT")"
    expect_sum "fail 3:masked_input" "$T/r-big3" 1,2,4,5,6,7,8,9,10 "$BIG/p" 1e-12
    BIG3_SECS=$SECS
fi
no_leftovers "fail 3:masked_input"
rm -rf "$T/r-big" "$T/r-big3"

echo "== a dropout at each phase (10 parties of 60 x 40, threshold 7)"
SMALL="$T/small"
gen_parties "$SMALL" 10 60 40 200 || finish
mapfile -t SARGS < <(party_args "$SMALL" 10)
for phase in advertise_keys share_keys masked_input consistency unmasking; do
    run local --algorithm secure-sum "${SARGS[@]}" --out "$T/r-$phase" --threshold 7 \
        --fail-party "4:$phase" --round-timeout 3 --format json
    local_ok "fail 4:$phase" "$T/r-$phase" || continue
    case $phase in
    advertise_keys | share_keys | masked_input)
        # No masked input from party 4: the sum is of the other 9.
        want=1,2,3,5,6,7,8,9,10
        ;;
    *)
        # Party 4's masked input is in: Bonawitz et al. sum U3, the parties
        # that sent masked input, and recover its self-mask from shares.
        want=1,2,3,4,5,6,7,8,9,10
        ;;
    esac
    got=$(json_ids survivors "$OUT")
    [ "$got" = "$want" ] && ok "fail 4:$phase: summed parties {$got}" ||
        fail "fail 4:$phase: summed parties {$got}, expected {$want}"
    grep -q '"party": 4, "file": "[^"]*", "participation": "[^"]*", "state": "failed"' "$OUT" &&
        ok "fail 4:$phase: party 4's participation failed" ||
        fail "fail 4:$phase: party 4's state: $(grep -o '"party": 4[^}]*' "$OUT" | head -c 300)"
    expect_sum "fail 4:$phase" "$T/r-$phase" "$want" "$SMALL/p" 1e-12
done
no_leftovers "dropouts at each phase"

echo "== two dropouts, values from 1e-8 to 1e8 (5 parties of 30 x 7, threshold 3)"
MAG="$T/mag"
mkdir -p "$MAG"
for i in 1 2 3 4 5; do
    awk -v seed="$i" -v rows=30 -v cols=7 'BEGIN { srand(seed);
        for (r = 0; r < rows; r++) { line = "";
            for (c = 0; c < cols; c++) {
                v = (rand() < 0.5 ? -1 : 1) * (1 + rand()) * 10 ^ int(rand() * 17 - 8);
                line = line (c ? "," : "") sprintf("%.17g", v) }
            print line } }' >"$MAG/p-$i.csv"
    "$F" convert --input "$MAG/p-$i.csv" --out "$MAG/p-$i.npy" >/dev/null
done
mapfile -t MARGS < <(party_args "$MAG" 5)
run local --algorithm secure-sum "${MARGS[@]}" --out "$T/r-mag" --threshold 3 \
    --fail-party 2:share_keys --fail-party 5:unmasking --round-timeout 3 --format json
if local_ok "magnitudes 1e-8..1e8" "$T/r-mag"; then
    expect_sum "magnitudes 1e-8..1e8" "$T/r-mag" 1,3,4,5 "$MAG/p" 1e-12
fi

echo "== SecAgg+: 20 parties of 30 x 20, --secagg plus, dropouts before and after the masked input"
PLUS="$T/plus"
gen_parties "$PLUS" 20 30 20 300 || finish
mapfile -t PLARGS < <(party_args "$PLUS" 20)
run local --algorithm secure-sum "${PLARGS[@]}" --out "$T/r-plus" --secagg plus \
    --fail-party 6:masked_input --fail-party 13:unmasking --round-timeout 6 --format json
if local_ok "secagg plus, 20 parties" "$T/r-plus"; then
    grep -q '"secagg": "plus"' "$T/r-plus/summary.json" &&
        grep -q '"secagg_degree": 8' "$T/r-plus/summary.json" &&
        ok "secagg plus: the job masked with 8 neighbours per party (not 19)" ||
        fail "secagg plus: $(grep -o '"secagg[^,]*' "$T/r-plus/summary.json" | tr '\n' ' ')"
    want=1,2,3,4,5,7,8,9,10,11,12,13,14,15,16,17,18,19,20
    [ "$(json_ids survivors "$OUT")" = "$want" ] && ok "secagg plus: party 6 out, 13's input in" ||
        fail "secagg plus: survivors $(json_ids survivors "$OUT")"
    expect_sum "secagg plus, 20 parties" "$T/r-plus" "$want" "$PLUS/p" 1e-12
fi
no_leftovers "secagg plus"
run local --algorithm secure-sum "${MARGS[@]}" --out "$T/r-bad" --secagg half
[ "$RC" -eq 2 ] && grep -q -- '--secagg' "$ERR" && ok "--secagg half: usage error (exit 2)" ||
    fail "--secagg half: exit $RC"
rm -rf "$T/r-plus" "$PLUS"

echo "== aborts below the threshold"
# 5 parties, threshold 4: two stop at masked_input, 3 masked inputs < 4.
mapfile -t AARGS < <(party_args "$SMALL" 5)
run local --algorithm secure-sum "${AARGS[@]}" --out "$T/r-abort" --threshold 4 \
    --fail-party 1:masked_input --fail-party 2:masked_input --round-timeout 2
if [ "$RC" -eq 1 ]; then
    ok "below threshold at masked_input: exit 1 in ${SECS}s"
else
    fail "below threshold at masked_input: exit $RC, expected 1"
fi
if [ "$(wc -l <"$ERR")" -ge 1 ] && grep -qiE 'failed: .*(threshold|3 )' "$ERR"; then
    ok "the reason is given: $(grep 'failed:' "$ERR" | head -n 1)"
else
    fail "no reason on stderr"
fi
if grep -q '"state": "failed"' "$T/r-abort/summary.json" 2>/dev/null &&
    grep -q '"error": "' "$T/r-abort/summary.json" && [ ! -e "$T/r-abort/sum.npy" ]; then
    ok "summary.json says failed and why; no sum.npy"
else
    fail "abort summary: $(head -c 400 "$T/r-abort/summary.json" 2>/dev/null)"
fi
no_leftovers "abort at masked_input"
# 4 parties, threshold 3: two never advertise keys.
run local --algorithm secure-sum "${AARGS[@]:0:8}" --out "$T/r-abort0" --threshold 3 \
    --fail-party 3:advertise_keys --fail-party 4:advertise_keys --round-timeout 2
[ "$RC" -eq 1 ] && ok "below threshold at advertise_keys: exit 1 ($(tail -n 1 "$ERR"))" ||
    fail "below threshold at advertise_keys: exit $RC"
# 5 parties, threshold 4: two stop at unmasking (only 3 unmasking messages).
run local --algorithm secure-sum "${AARGS[@]}" --out "$T/r-abort4" --threshold 4 \
    --fail-party 1:unmasking --fail-party 5:unmasking --round-timeout 2
[ "$RC" -eq 1 ] && ok "below threshold at unmasking: exit 1 ($(tail -n 1 "$ERR"))" ||
    fail "below threshold at unmasking: exit $RC"
[ ! -e "$T/r-abort4/sum.npy" ] && ok "no sum.npy after an abort at unmasking" ||
    fail "sum.npy written although the job aborted"
no_leftovers "aborts"

echo "== SIGINT while a round waits"
"$F" local --algorithm secure-sum "${AARGS[@]}" --out "$T/r-int" --fail-party 2:advertise_keys \
    --round-timeout 120 >"$OUT" 2>"$ERR" &
BG_PID=$!
for _ in $(seq 1 100); do
    grep -q 'services ready\|waiting_for_parties' "$ERR" && break
    sleep 0.1
done
sleep 0.5
t0=$(date +%s.%N)
kill -INT "$BG_PID"
wait "$BG_PID"
RC=$?
BG_PID=""
SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ "$RC" -eq 1 ] && grep -q 'interrupted' "$ERR"; then
    ok "SIGINT: exit 1, 'interrupted', stopped in ${SECS}s"
else
    fail "SIGINT: exit $RC"
fi
below "SIGINT: time to stop everything (s)" "$SECS" 8
no_leftovers "SIGINT"

echo "== a service that fails to start, an agent that crashes (wrapper scripts in --bin-dir)"
WB="$T/wrapped"
mkdir -p "$WB"
REAL=$(cd "$BIN" && pwd)
# The server exits at its first start (as if its port were taken): fedsvd
# local must start it again on a new port.
printf '#!/bin/sh\nif mkdir "%s/server-failed-once" 2>/dev/null; then exit 3; fi\nexec "%s/aggregation-server" "$@"\n' \
    "$WB" "$REAL" >"$WB/aggregation-server"
printf '#!/bin/sh\nexec "%s/client-agent" "$@"\n' "$REAL" >"$WB/client-agent"
chmod +x "$WB/aggregation-server" "$WB/client-agent"
run local --algorithm secure-sum "${AARGS[@]:0:6}" --out "$T/r-restart" --bin-dir "$WB" \
    --round-timeout 3 --format json
if [ "$RC" -eq 0 ] &&
    grep -q '"name": "aggregation-server", "port": [0-9]*, "sigkilled": false, "exit_code": 0, "starts": 2' "$OUT"; then
    ok "a server that exits before it is ready is started again on a new port (starts: 2)"
else
    fail "restart: exit $RC: $(grep -o '"processes".*' "$OUT" | head -c 300)"
fi
no_leftovers "restart"
# Another program takes the port fedsvd local picked for the server before
# the server binds it (here: a second aggregation-server with another admin
# token, started by the wrapper in a subshell that exits, so it is not the
# wrapper's child); ours
# exits as if the port were taken. Its /readyz answer must not count: fedsvd
# local starts the server again on a new port and the job runs there.
WB2="$T/wrapped-taken"
mkdir -p "$WB2"
printf 'foreign-admin-token-0123456789abcdef\n' >"$WB2/foreign.token"
chmod 600 "$WB2/foreign.token"
printf '#!/bin/sh
if mkdir "%s/taken-once" 2>/dev/null; then
  l=; while [ $# -gt 0 ]; do [ "$1" = --listen ] && l=$2; shift; done
  (setsid "%s/aggregation-server" --listen "$l" --data-dir "%s/foreign" --admin-token-file "%s" >"%s/foreign.log" 2>&1 &
   echo $! >"%s/foreign.pid")
  sleep 2
  exit 3
fi
exec "%s/aggregation-server" "$@"
' \
    "$WB2" "$REAL" "$WB2" "$WB2/foreign.token" "$WB2" "$WB2" "$REAL" >"$WB2/aggregation-server"
printf '#!/bin/sh\nexec "%s/client-agent" "$@"\n' "$REAL" >"$WB2/client-agent"
chmod +x "$WB2/aggregation-server" "$WB2/client-agent"
run local --algorithm secure-sum "${AARGS[@]:0:6}" --out "$T/r-taken" --bin-dir "$WB2" \
    --round-timeout 3 --format json
if [ "$RC" -eq 0 ] &&
    grep -q '"name": "aggregation-server", "port": [0-9]*, "sigkilled": false, "exit_code": 0, "starts": 2' "$OUT"; then
    ok "a port taken by another server before ours binds it: ours starts again on a new port (starts: 2)"
else
    fail "port taken: exit $RC: $(head -c 300 "$ERR") $(grep -o '"processes".*' "$OUT" | head -c 300)"
fi
[ -s "$WB2/foreign.pid" ] && kill "$(cat "$WB2/foreign.pid")" 2>/dev/null
no_leftovers "port taken"
# The first agent to start is killed 1 s later, while the job waits for
# party 3 (which never advertises keys): fedsvd local must notice, stop the
# rest and clean up.
printf '#!/bin/sh\nif mkdir "%s/agent-crashed" 2>/dev/null; then\n  "%s/client-agent" "$@" &\n  p=$!\n  sleep 1\n  kill -KILL $p\n  wait $p\n  exit 137\nfi\nexec "%s/client-agent" "$@"\n' \
    "$WB" "$REAL" "$REAL" >"$WB/client-agent"
run local --algorithm secure-sum "${AARGS[@]:0:6}" --out "$T/r-crash" --bin-dir "$WB" \
    --fail-party 3:advertise_keys --round-timeout 30
if [ "$RC" -eq 1 ] && grep -q 'stopped unexpectedly' "$ERR"; then
    ok "agent crash: exit 1 in ${SECS}s: $(grep 'unexpectedly' "$ERR")"
else
    fail "agent crash: exit $RC"
fi
below "agent crash: noticed and everything stopped within (s)" "$SECS" 10
logf=$(grep -o 'see [^ ]*\.log' "$ERR" | cut -c5-)
[ -n "$logf" ] && [ -s "$logf" ] && ok "agent crash: the log named in the message exists ($logf)" ||
    fail "agent crash: log '$logf' missing"
no_leftovers "agent crash"

echo "== usage and input errors"
usage() { # NAME ARGS...
    local name=$1
    shift
    run "$@"
    if [ "$RC" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ]; then
        ok "$name: exit 2: $(cat "$ERR")"
    else
        fail "$name: exit $RC, expected 2 with one line"
    fi
}
usage "no --party" local --algorithm secure-sum --out "$T/u"
usage "unknown algorithm" local --algorithm bogus "${AARGS[@]:0:4}" --out "$T/u"
usage "--fail-party out of range" local --algorithm secure-sum "${AARGS[@]:0:4}" --out "$T/u" \
    --fail-party 3:masked_input
usage "--fail-party bad phase" local --algorithm secure-sum "${AARGS[@]:0:4}" --out "$T/u" \
    --fail-party 1:lunch
usage "--threshold above K" local --algorithm secure-sum "${AARGS[@]:0:4}" --out "$T/u" --threshold 3
usage "--round-timeout 0" local --algorithm secure-sum "${AARGS[@]:0:4}" --out "$T/u" --round-timeout 0
usage "job without subcommand" job
usage "job create without --parties" job create --server http://127.0.0.1:1 --admin-token-file "$T/a.csv" \
    --algorithm secure-sum --shape 3,4
usage "job create bad --shape" job create --server http://127.0.0.1:1 --admin-token-file "$T/a.csv" \
    --algorithm secure-sum --parties 3 --shape 3
usage "job create --threshold > --parties" job create --server http://127.0.0.1:1 \
    --admin-token-file "$T/a.csv" --algorithm secure-sum --parties 3 --shape 3,4 --threshold 4
usage "job status with a bad --server" job status --server ftp://x --job j-1 --token-file "$T/a.csv"
usage "job status with a bad --job" job status --server http://127.0.0.1:1 --job '../x' --token-file "$T/a.csv"
usage "job watch bad --interval" job watch --server http://127.0.0.1:1 --job j-1 --token-file "$T/a.csv" \
    --interval 0
printf 'abcdefghijklmnopqrstuvwxyz\n' >"$T/tok"
chmod 600 "$T/tok"
port=$(awk 'BEGIN { srand(); print 20000 + int(rand() * 20000) }')
run job status --server "http://127.0.0.1:$port" --job j-1 --token-file "$T/tok"
[ "$RC" -eq 1 ] && [ "$(wc -l <"$ERR")" -eq 1 ] && ok "job status, nothing listening: exit 1: $(cat "$ERR")" ||
    fail "job status with no server: exit $RC"
for c in "job" "job create" "job status" "job watch" "job result" "job list" "job cancel" "local" "sum"; do
    # shellcheck disable=SC2086
    run $c --help
    [ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd' "$OUT" && ok "fedsvd $c --help" || fail "fedsvd $c --help: exit $RC"
done
run local --help
[ "$RC" -eq 0 ] && grep -q -- '--fail-party I:PHASE' "$OUT" && ok "local --help" || fail "local --help"
run local --algorithm secure-sum --party "$SMALL/p-1.npy" --party "$MAG/p-1.npy" --out "$T/u"
if [ "$RC" -eq 1 ] && grep -q 'differs' "$ERR"; then
    ok "parties of different shapes: exit 1: $(cat "$ERR")"
else
    fail "parties of different shapes: exit $RC"
fi
run local --algorithm secure-sum "${AARGS[@]:0:4}" --out "$T/u" --bin-dir "$T"
if [ "$RC" -eq 1 ] && grep -q 'aggregation-server' "$ERR"; then
    ok "no services in --bin-dir: exit 1: $(cat "$ERR")"
else
    fail "--bin-dir without services: exit $RC"
fi
no_leftovers "errors"

echo "== figures"
echo "   10 x 1000x1000: max relative error ${BIG_ERR:-?}, fedsvd local ${BIG_SECS:-?}s (job ${BIG_JOB:-?}s)," \
    "server bytes in ${SRV_IN:-?} out ${SRV_OUT:-?}"
echo "   10 x 1000x1000 with party 3 dropping at masked_input (round timeout 10 s): ${BIG3_SECS:-?}s"

# fedsvd / fedpca jobs (masking-server too): their own script, counted here.
if [ -x "$(dirname "$0")/fedsvd.sh" ]; then
    echo "== fedsvd and fedpca (tests/integration/fedsvd.sh)"
    "$(dirname "$0")/fedsvd.sh" "$BIN" | tee "$T/fedsvd.log"
    line=$(grep -E '^fedsvd-integration: [0-9]+ passed, [0-9]+ failed$' "$T/fedsvd.log" | tail -n 1)
    if [ -n "$line" ]; then
        passed=$((passed + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
        failed=$((failed + $(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')))
    else
        fail "tests/integration/fedsvd.sh did not finish"
    fi
fi
# power-method jobs (fedpower, fedpower-utility, fedpower-private, dp-ppm): their own script.
if [ -x "$(dirname "$0")/fedpower.sh" ]; then
    echo "== power-method jobs (tests/integration/fedpower.sh)"
    "$(dirname "$0")/fedpower.sh" "$BIN" | tee "$T/fedpower.log"
    line=$(grep -E '^fedpower-integration: [0-9]+ passed, [0-9]+ failed$' "$T/fedpower.log" | tail -n 1)
    if [ -n "$line" ]; then
        passed=$((passed + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
        failed=$((failed + $(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')))
    else
        fail "tests/integration/fedpower.sh did not finish"
    fi
fi
finish
