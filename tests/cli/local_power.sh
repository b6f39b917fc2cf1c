#!/usr/bin/env bash
# CLI tests for `fedsvd local` and `fedsvd job create` with the power methods
# (fedpower, fedpower-utility, fedpower-private, dp-ppm): usage errors (exit 2,
# one line, before any process starts), then real runs with an
# aggregation-server and one client-agent per party on 127.0.0.1 on a planted
# spectrum (d = 30, 3 parties, party 3 a MatrixMarket file, T = 8..12):
# result files and their shapes, the fields of summary.json, the subspace
# error against `fedsvd svd --k` of the pooled data, convergence.svg, and
# `job create` against a real server. JSON fields are read with
# tests/lib/json.mjs (Node, already a test dependency); no Python.
#
# Sourced by tests/cli/run.sh (its helpers run/ok/fail/one_line_stderr and
# F, T, OUT, ERR, passed, failed). It can also run alone:
#   tests/cli/local_power.sh BIN_DIR_OR_FEDSVD   (ends with "local-power: P passed, F failed")

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    arg=${1:-build/bin}
    if [ -d "$arg" ]; then F="$arg/fedsvd"; else F="$arg"; fi
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
    passed=0
    failed=0
    OUT="$T/stdout"
    ERR="$T/stderr"
    ok() {
        passed=$((passed + 1))
        echo "ok   $*"
    }
    fail() {
        failed=$((failed + 1))
        echo "FAIL $*"
        if [ -s "$ERR" ]; then sed 's/^/     stderr: /' "$ERR" | tail -n 5; fi
    }
    run() {
        "$F" "$@" >"$OUT" 2>"$ERR"
        RC=$?
    }
    one_line_stderr() { [ "$(wc -l <"$ERR")" -eq 1 ]; }
    power_standalone=1
else
    power_standalone=0
fi

echo "== local: power methods"
PW="$T/power"
mkdir -p "$PW"
JSON="node $(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/json.mjs"
BIN_DIR=$(dirname "$F")
# fedsvd local makes its temporary directories under TMPDIR
export TMPDIR="$PW/tmp"
mkdir -p "$TMPDIR"

# jget FILE PATH: a JSON value (tests/lib/json.mjs get), "" when absent.
jget() { $JSON get "$1" "$2" 2>/dev/null; }

# npy_shape FILE: "(30, 3)" / "(3,)" from the .npy header.
npy_shape() { head -c 256 "$1" | LC_ALL=C tr -cd '[:print:]' | LC_ALL=C sed -n "s/.*'shape': *\\(([^)]*)\\).*/\\1/p"; }

# Planted spectrum: lambda_4 / lambda_3 = 0.1, so T = 12 power iterations
# reach the top-3 subspace to about 0.1^12 (sin theta).
run gen planted --rows 240 --cols 30 --rank 3 --gap 0.1 --decay 0.9 --seed 11 \
    --out-dir "$PW/data" --parties 3
[ "$RC" -eq 0 ] || fail "gen planted for the power runs: exit $RC"
# party 2 as CSV, party 3 as MatrixMarket (sparse)
run convert --input "$PW/data/party-3.npy" --out "$PW/data/party-3.mtx"
[ "$RC" -eq 0 ] || fail "convert party 3 to .mtx: exit $RC"
run convert --input "$PW/data/party-2.npy" --out "$PW/data/party-2.csv"
[ "$RC" -eq 0 ] || fail "convert party 2 to .csv: exit $RC"
rm -f "$PW/data/party-3.npy" "$PW/data/party-2.npy"
PARTS=(--party "$PW/data/party-1.npy" --party "$PW/data/party-2.csv" --party "$PW/data/party-3.mtx")
run svd --input "$PW/data/party-1.npy" --input "$PW/data/party-2.csv" \
    --input "$PW/data/party-3.mtx" --k 3 --out "$PW/ref"
[ "$RC" -eq 0 ] && [ -f "$PW/ref/V.npy" ] || fail "svd --k 3 reference: exit $RC"

# usage errors: exit 2, one line on stderr, no process started, no output
power_usage() { # NAME ARGS...
    local name=$1
    shift
    run local "$@"
    if [ "$RC" -eq 2 ] && one_line_stderr && [ ! -e "$PW/u" ]; then
        ok "local power usage: $name"
    else
        fail "local power usage: $name: exit $RC (want 2, one line)"
    fi
}
power_usage "no --k" --algorithm fedpower "${PARTS[@]}" --out "$PW/u"
power_usage "--k above d" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" --k 31
power_usage "--rank below --k" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" --k 3 --rank 2
power_usage "--sigma with --epsilon" --algorithm fedpower-private "${PARTS[@]}" --out "$PW/u" \
    --k 3 --sigma 1 --epsilon 1 --clip-z 1 --bound-m 10
power_usage "dp-ppm --sync-every 2" --algorithm dp-ppm "${PARTS[@]}" --out "$PW/u" --k 3 \
    --sigma 1 --sync-every 2
power_usage "dp-ppm without noise" --algorithm dp-ppm "${PARTS[@]}" --out "$PW/u" --k 3
power_usage "private without --clip-z" --algorithm fedpower-private "${PARTS[@]}" --out "$PW/u" \
    --k 3 --epsilon 1 --bound-m 10
power_usage "--align client1 for utility" --algorithm fedpower-utility "${PARTS[@]}" \
    --out "$PW/u" --k 3 --align client1
power_usage "--sigma-server for dp-ppm" --algorithm dp-ppm "${PARTS[@]}" --out "$PW/u" --k 3 \
    --sigma 1 --sigma-server 1
power_usage "--noise-exchange for fedpower" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" \
    --k 3 --noise-exchange seed
power_usage "--noise-exchange bogus" --algorithm fedpower-utility "${PARTS[@]}" --out "$PW/u" \
    --k 3 --noise-exchange bogus
power_usage "--paillier-bits 1000" --algorithm fedpower-utility "${PARTS[@]}" --out "$PW/u" \
    --k 3 --paillier-bits 1000
power_usage "--paillier-bits with --noise-exchange ot" --algorithm fedpower-utility "${PARTS[@]}" \
    --out "$PW/u" --k 3 --noise-exchange ot --paillier-bits 2048
grep -q 'does not apply to --noise-exchange ot' "$ERR" &&
    ok "local power usage: --paillier-bits with ot says why" ||
    fail "local power usage: --paillier-bits with ot: '$(head -c 200 "$ERR")'"
power_usage "--value-bound for fedpower" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" \
    --k 3 --value-bound 5
power_usage "--fail-party bad phase" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" --k 3 \
    --fail-party 2:bogus
power_usage "--fail-party share_keys:1" --algorithm fedpower "${PARTS[@]}" --out "$PW/u" --k 3 \
    --fail-party 2:share_keys:1
# without --allow-dropouts a seed/ot fedpower-utility job exchanges noise in aggregation 0 only
power_usage "--fail-party noise_exchange:1 of a job that exchanges once" \
    --algorithm fedpower-utility "${PARTS[@]}" --out "$PW/u" --k 3 --fail-party 2:noise_exchange:1
grep -q "one noise exchange is in aggregation 0" "$ERR" &&
    ok "local power usage: --fail-party noise_exchange:1 says why" ||
    fail "local power usage: --fail-party noise_exchange:1: '$(head -c 200 "$ERR")'"
power_usage "--restart noise_exchange:1 of a job that exchanges once" \
    --algorithm fedpower-utility "${PARTS[@]}" --out "$PW/u" --k 3 --noise-exchange ot \
    --restart agent-1@noise_exchange:1
power_usage "--input for fedpower" --algorithm fedpower --input "$PW/data/party-1.npy" \
    --parties 2 --out "$PW/u" --k 3
power_usage "--epsilon 0" --algorithm dp-ppm "${PARTS[@]}" --out "$PW/u" --k 3 --epsilon 0
power_usage "--delta 1" --algorithm dp-ppm "${PARTS[@]}" --out "$PW/u" --k 3 --epsilon 1 --delta 1
run local --algorithm fedpower "${PARTS[@]}" --out "$PW/u" --k 3 --reference "$PW/none.npy"
if [ "$RC" -eq 1 ] && one_line_stderr && grep -q 'none.npy' "$ERR"; then
    ok "local power: missing --reference (exit 1)"
else
    fail "local power: missing --reference: exit $RC"
fi
run local --help
if [ "$RC" -eq 0 ] && grep -q -- '--noise-exchange X' "$OUT" && grep -q -- '--reference V.npy' "$OUT"; then
    ok "local --help lists the power options"
else
    fail "local --help: the power options are missing"
fi
run local --algorithm dp-ppm --help
[ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd local' "$OUT" && ok "local --algorithm dp-ppm --help" ||
    fail "local --algorithm dp-ppm --help: exit $RC"
run job create --server http://127.0.0.1:9 --admin-token-file /dev/null --algorithm dp-ppm \
    --party-sizes 80,80,80 --cols 30 --k 3 --sigma 1
if [ "$RC" -eq 2 ] && one_line_stderr && grep -q -- '--value-bound' "$ERR"; then
    ok "job create dp-ppm without --value-bound (exit 2)"
else
    fail "job create dp-ppm without --value-bound: exit $RC"
fi
run job create --server http://127.0.0.1:9 --admin-token-file /dev/null --algorithm secure-sum \
    --parties 2 --shape 2,2 --sigma 1
[ "$RC" -eq 2 ] && one_line_stderr && ok "job create secure-sum --sigma (exit 2)" ||
    fail "job create secure-sum --sigma: exit $RC"
run job create --server http://127.0.0.1:9 --admin-token-file /dev/null --algorithm fedpower \
    --party-sizes 80,80,80 --cols 30 --k 3 --partition samples
[ "$RC" -eq 2 ] && one_line_stderr && ok "job create fedpower --partition (exit 2)" ||
    fail "job create fedpower --partition: exit $RC"

have_services=1
for b in aggregation-server client-agent; do
    if [ ! -x "$BIN_DIR/$b" ]; then
        fail "$BIN_DIR/$b not built: no real power-method runs"
        have_services=0
    fi
done

# power_run NAME DIR ALG K SYNCS ARGS...: a real run; checks exit 0, V.npy
# (30 x K), eigenvalues.npy (K), summary.json fields, convergence.svg, one
# convergence entry per sync with the subspace errors, and no left-over
# process or temporary directory.
power_run() {
    local name=$1 dir=$2 alg=$3 k=$4 syncs=$5 n f
    shift 5
    run local --algorithm "$alg" "${PARTS[@]}" --out "$dir" --k "$k" --reference "$PW/ref/V.npy" \
        --round-timeout 60 --timeout 300 "$@"
    if [ "$RC" -ne 0 ]; then
        fail "$name: exit $RC"
        for f in "$dir"/logs/*.log; do # the services' last words, for the diagnosis
            [ -f "$f" ] && grep -E '"level":"(warn|error)"' "$f" | tail -n 2 | cut -c1-400 |
                sed "s|^|     $(basename "$f"): |"
        done
        return 1
    fi
    ok "$name: exit 0 ($(head -n 1 "$OUT"))"
    [ "$(npy_shape "$dir/V.npy")" = "(30, $k)" ] && ok "$name: V.npy 30 x $k" ||
        fail "$name: V.npy shape '$(npy_shape "$dir/V.npy")'"
    [ "$(npy_shape "$dir/eigenvalues.npy")" = "($k,)" ] && ok "$name: eigenvalues.npy ($k)" ||
        fail "$name: eigenvalues.npy shape '$(npy_shape "$dir/eigenvalues.npy")'"
    f="$dir/summary.json"
    for key in .algorithm .state .privacy.eps_total .privacy.formal .phases .servers.aggregation.bytes_in \
        .parties[0].bytes_sent .parties[2].format .peak_memory_bytes .subspace_error.final.projection_distance \
        .subspace_error.initial.sin_theta .seconds.total .eigenvalues; do
        if [ -z "$(jget "$f" "$key")" ]; then
            fail "$name: summary.json lacks $key"
            return 1
        fi
    done
    [ "$(jget "$f" .algorithm)" = "$alg" ] && [ "$(jget "$f" .state)" = done ] &&
        [ "$(jget "$f" .parties[2].format)" = sparse ] &&
        ok "$name: summary.json has the fields (algorithm, state, privacy, phases, bytes, memory)" ||
        fail "$name: summary.json: algorithm '$(jget "$f" .algorithm)', state '$(jget "$f" .state)'"
    n=$(jget "$f" .convergence.length)
    if [ "$n" = "$syncs" ] && [ -n "$(jget "$f" ".convergence[$((syncs - 1))].projection_distance")" ] &&
        [ -n "$(jget "$f" '.convergence[0].sin_theta')" ] && [ -n "$(jget "$f" '.convergence[0].change')" ]; then
        ok "$name: $syncs convergence entries with change, projection distance and sin theta"
    else
        fail "$name: convergence has '$n' entries (want $syncs) or lacks the errors"
    fi
    if head -c 200 "$dir/convergence.svg" | grep -q '<svg' && tail -c 20 "$dir/convergence.svg" | grep -q '</svg>'; then
        ok "$name: convergence.svg"
    else
        fail "$name: convergence.svg missing or truncated"
    fi
    if [ -z "$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'fedsvd-local-*')" ] &&
        ! pgrep -f -- "$TMPDIR/fedsvd-local-" >/dev/null; then
        ok "$name: no process or temporary directory left"
    else
        fail "$name: processes or temporary directories left behind"
    fi
}

if [ "$have_services" -eq 1 ]; then
    # Noise-free fedpower with p = 1 is the centralised power method: after
    # T = 12 iterations at a gap ratio of 0.1 the subspace is within 1e-8
    # (measured: 1.6e-12).
    if power_run "fedpower p=1" "$PW/fp" fedpower 3 12 --iterations 12 --sync-every 1; then
        d=$(jget "$PW/fp/summary.json" .subspace_error.final.projection_distance)
        if awk -v v="$d" 'BEGIN { exit !(v != "" && v + 0 <= 1e-8) }'; then
            ok "fedpower p=1: final projection distance $d <= 1e-8"
        else
            fail "fedpower p=1: final projection distance '$d' > 1e-8"
        fi
        # the last sync's iterate is the final V's span
        d2=$(jget "$PW/fp/summary.json" '.convergence[11].projection_distance')
        awk -v v="$d2" 'BEGIN { exit !(v != "" && v + 0 <= 1e-8) }' &&
            ok "fedpower p=1: last sync's error $d2" || fail "fedpower p=1: last sync's error '$d2'"
        grep -q 'error vs the reference' "$OUT" && ok "fedpower: the text summary names the error" ||
            fail "fedpower: text summary lacks the error"
    fi
    power_run "fedpower-utility" "$PW/fu" fedpower-utility 3 3 --iterations 12 --sync-every 4 \
        --sigma 0.01 --paillier-bits 1024
    if [ -f "$PW/fu/summary.json" ]; then
        c=$(jget "$PW/fu/summary.json" .phases.crypto)
        [ -n "$c" ] && ok "fedpower-utility: crypto seconds $c" || fail "fedpower-utility: no crypto timing"
        # without --allow-dropouts every sum needs every party: no consistency round
        [ -n "$(jget "$PW/fu/summary.json" .phases.unmasking)" ] &&
            [ -z "$(jget "$PW/fu/summary.json" .phases.consistency)" ] &&
            ok "fedpower-utility: unmasking right after masked input, no consistency phase" ||
            fail "fedpower-utility: phases $(jget "$PW/fu/summary.json" .phases)"
        [ "$(jget "$PW/fu/summary.json" .spec.paillier_bits)" = 1024 ] &&
            [ "$(jget "$PW/fu/summary.json" .value_bound.source)" = frobenius ] &&
            ok "fedpower-utility: 1024-bit key, value bound from the files" ||
            fail "fedpower-utility: spec paillier_bits/value_bound"
    fi
    power_run "fedpower-private" "$PW/fpp" fedpower-private 3 2 --iterations 8 --sync-every 4 \
        --epsilon 5 --clip-z 1 --bound-m 50
    if [ -f "$PW/fpp/summary.json" ]; then
        e=$(jget "$PW/fpp/summary.json" .privacy.eps_total)
        [ "$(jget "$PW/fpp/summary.json" .privacy.formal)" = true ] &&
            awk -v v="$e" 'BEGIN { exit !(v != "" && v + 0 > 0 && v + 0 <= 5 * 1.0001) }' &&
            ok "fedpower-private: formal, eps total $e <= 5" || fail "fedpower-private: privacy eps '$e'"
        grep -q 'privacy: epsilon' "$OUT" && ok "fedpower-private: text summary names epsilon" ||
            fail "fedpower-private: text summary lacks epsilon"
    fi
    power_run "dp-ppm" "$PW/dp" dp-ppm 3 8 --iterations 8 --epsilon 1 --delta 1e-5
    if [ -f "$PW/dp/summary.json" ]; then
        e=$(jget "$PW/dp/summary.json" .privacy.eps_total)
        awk -v v="$e" 'BEGIN { exit !(v != "" && v + 0 > 0 && v + 0 <= 1.0001) }' &&
            ok "dp-ppm eps 1: reported total $e <= 1" || fail "dp-ppm: eps total '$e'"
    fi

    # a party that stops before its plain upload of sync 1 (I:PHASE:R): the
    # job goes on with the other two (threshold 2), and the summary says so
    run local --algorithm fedpower "${PARTS[@]}" --out "$PW/drop" --k 3 --iterations 8 \
        --round-timeout 5 --timeout 120 --allow-dropouts --fail-party 2:plain_upload:1
    if [ "$RC" -eq 0 ] && [ "$(jget "$PW/drop/summary.json" .survivors)" = "[1,3]" ] &&
        [ "$(jget "$PW/drop/summary.json" '.convergence[0].parties')" = "[1,2,3]" ] &&
        [ "$(jget "$PW/drop/summary.json" '.convergence[1].parties')" = "[1,3]" ] &&
        [ "$(jget "$PW/drop/summary.json" .parties[1].dropped)" = true ] &&
        [ "$(jget "$PW/drop/summary.json" .parties[1].fail_at)" = plain_upload:1 ] &&
        [ "$(npy_shape "$PW/drop/V.npy")" = "(30, 3)" ]; then
        ok "fedpower: party 2 lost at plain_upload of sync 1, the rest by parties 1 and 3"
    else
        fail "fedpower dropout: exit $RC, survivors '$(jget "$PW/drop/summary.json" .survivors)'"
    fi

    # job create for a power method against a real server
    run local --algorithm fedpower "${PARTS[@]}" --out "$PW/keep" --k 3 --iterations 4 --keep
    root=$(sed -n 's/.*kept \(.*\) (data dirs.*/\1/p' "$ERR")
    if [ "$RC" -eq 0 ] && [ -n "$root" ] && [ -f "$root/admin.token" ]; then
        ok "local --keep keeps the run's directory"
        # a fresh server of our own on a free port (asked of the kernel), with that admin token
        port=$(node -e 'const s = require("net").createServer();
            s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });')
        mkdir -p "$PW/srv"
        "$BIN_DIR/aggregation-server" --listen "127.0.0.1:$port" --data-dir "$PW/srv" \
            --admin-token-file "$root/admin.token" >"$PW/srv.log" 2>&1 &
        srv_pid=$!
        for _ in $(seq 1 100); do
            if "$F" job list --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
                >/dev/null 2>&1; then break; fi
            sleep 0.1
        done
        run job create --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
            --algorithm fedpower-private --party-sizes 80,80,80 --cols 30 --k 3 --rank 4 \
            --iterations 8 --epsilon 2 --clip-z 1 --bound-m 50 --out-dir "$PW/inv" --format json \
            --allow-unpinned
        if [ "$RC" -eq 0 ] && [ -f "$PW/inv/invitation-3.json" ] &&
            [ "$(jget "$PW/inv/invitation-2.json" .algorithm)" = fedpower-private ] &&
            [ "$(jget "$PW/inv/invitation-2.json" .rank)" = 4 ] &&
            [ "$(jget "$PW/inv/invitation-2.json" .party_rows[2])" = 80 ] &&
            [ "$(stat -c %a "$PW/inv/invitation-1.json")" = 600 ]; then
            ok "job create fedpower-private: 3 invitations (0600) with the power parameters"
        else
            fail "job create fedpower-private: exit $RC"
        fi
        run job create --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
            --algorithm dp-ppm --party-sizes 80,80,80 --cols 30 --k 3 --iterations 500 \
            --sigma 0.5 --value-bound 10 --allow-unpinned
        if [ "$RC" -eq 1 ] && one_line_stderr && grep -qi 'epsilon' "$ERR"; then
            ok "job create: a weak dp-ppm job is refused by the server (exit 1)"
        else
            fail "job create weak dp-ppm: exit $RC"
        fi
        # fedpower-utility with the oblivious-transfer exchange: no Paillier key size
        run job create --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
            --algorithm fedpower-utility --party-sizes 80,80,80 --cols 30 --k 3 --iterations 8 \
            --sigma 0.01 --value-bound 10 --noise-exchange ot --out-dir "$PW/inv-ot" --format json \
            --allow-unpinned --allow-weak-privacy
        if [ "$RC" -eq 0 ] && [ "$(jget "$PW/inv-ot/invitation-2.json" .noise_exchange)" = ot ] &&
            [ -z "$(jget "$PW/inv-ot/invitation-2.json" .paillier_bits)" ] &&
            [ -n "$(jget "$PW/inv-ot/invitation-2.json" .noise_sampler)" ]; then
            ok "job create --noise-exchange ot: invitations name ot and the sampler, no paillier_bits"
        else
            fail "job create --noise-exchange ot: exit $RC $(head -c 300 "$ERR")"
        fi
        # a threshold below a majority: refused with the reason, unless asked for
        run job create --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
            --algorithm secure-sum --parties 4 --shape 3,2 --threshold 2 --allow-unpinned
        if [ "$RC" -eq 1 ] && grep -q 'allow_low_threshold' "$ERR" && grep -q 'disjoint' "$ERR"; then
            ok "job create: threshold 2 of 4 is refused by the server (exit 1), it says why"
        else
            fail "job create threshold 2 of 4: exit $RC $(head -c 300 "$ERR")"
        fi
        run job create --server "http://127.0.0.1:$port" --admin-token-file "$root/admin.token" \
            --algorithm secure-sum --parties 4 --shape 3,2 --threshold 2 --allow-low-threshold \
            --allow-unpinned --out-dir "$PW/inv-low" --format json
        if [ "$RC" -eq 0 ] && [ "$(jget "$PW/inv-low/invitation-4.json" .threshold)" = 2 ]; then
            ok "job create --allow-low-threshold: threshold 2 of 4 accepted"
        else
            fail "job create --allow-low-threshold: exit $RC $(head -c 300 "$ERR")"
        fi
        kill -TERM "$srv_pid" 2>/dev/null
        wait "$srv_pid" 2>/dev/null
        rm -rf "$root"
    else
        fail "local --keep: exit $RC, root '$root'"
    fi
fi

if [ "$power_standalone" -eq 1 ]; then
    echo "local-power: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
fi
