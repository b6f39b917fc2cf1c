#!/usr/bin/env bash
# Integration tests of the power-method jobs (fedpower, fedpower-utility,
# fedpower-private, dp-ppm; docs/wire-fedpower.md) with real processes on
# 127.0.0.1: one aggregation-server and four client-agents, jobs created
# with POST /v1/jobs and joined with POST /v1/participations (each agent
# gets its invitation), every party's V.npy checked against the centralised
# top-k of the pooled data (`fedsvd svd --k`, `fedsvd compare --metric
# subspace`).
#
# Data: `fedsvd gen planted` 420 x 24, rank-4 signal with eigengap ratio
# 0.02 (lambda_5 = 0.02 lambda_4), split 120/90/100/110 rows; party 2 holds
# its rows as MatrixMarket (.mtx: the agent keeps it sparse, CSR), the others
# as .npy. k = 4, r = 6, T = 8, p = 1, eigenvalues on.
#
# Bounds.
#  * fedpower without noise: the power iteration converges like
#    (lambda_7 / lambda_4)^T = (0.02 * 0.95^2)^8 ~ 1e-14, and every step is
#    exact up to rounding: projection distance <= 1e-10, eigenvalues within
#    1e-10 (relative) of S^2 / N of the pooled matrix.
#  * noisy algorithms: the aggregate of the last sync carries Gaussian noise
#    E of std sigma_eff per entry (below); by Davis-Kahan sin(theta) <=
#    ||E||_2 / gap, ||E||_2 <= sigma_eff (sqrt(d) + sqrt(r)) up to a
#    sub-Gaussian tail, gap = lambda_k - lambda_(k+1) of X^T X / N, and the
#    projection distance is <= sqrt(2k) sin(theta). Earlier noise is
#    contracted by lambda_7/lambda_4 per step (a geometric series < 1.02).
#    We allow 4x that bound (tail and series margin):
#      tol = 4 sqrt(2k) sigma_eff (sqrt(d) + sqrt(r)) / gap
#    with sigma_eff (fs_fedpower.h): utility w_max sigma (one party's noise is
#    left after the exchange), private w_max sigma sqrt(K/t) (every party adds
#    (w_max sigma)^2 / t), dp-ppm sigma sqrt(K/t) (Delta_l <= 1). The noise
#    levels make these bounds ~1e-3 .. 1e-2 (allow_weak_privacy: the
#    guarantees are not what is tested here), far below the 0.5+ distance of
#    a wrong subspace and far above rounding.
#  * dropout: party 3 stops before its masked input of round 2 (fail_at
#    masked_input:2, allow_dropouts, threshold 2): rounds 2.. aggregate
#    parties 1, 2, 4 only, so the survivors' V is compared with the top-k of
#    their pooled rows (the bound above with K = 3 contributing parties).
#    The same with fedpower (no noise, party 4 stops before its plain upload
#    of round 1): the survivors' V is exact (<= 1e-10) for parties 1, 2, 3.
#
# Usage: tests/integration/fedpower.sh BIN_DIR (default build/bin)
# Ends with "fedpower-integration: P passed, F failed".
set -u

BIN=${1:-build/bin}
F="$BIN/fedsvd"
passed=0
failed=0
K=4
D=24
KK=4
RR=6
TT=8

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $*"
}

finish() {
    echo "fedpower-integration: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

for b in fedsvd aggregation-server client-agent; do
    [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
done
command -v node >/dev/null || fail "no node (the tests' helpers, tests/lib/json.mjs)"
command -v curl >/dev/null || fail "no curl"
[ "$failed" -eq 0 ] || finish

JLIB=$(cd "$(dirname "$0")/../lib" && pwd)/json.mjs
OPENAPI="$(dirname "$JLIB")/../../openapi.yaml"
T=$(mktemp -d)
PIDS=()
cleanup() {
    # only the services this script started, by pid
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ -n "${KEEP:-}" ]; then
        echo "kept $T"
    else
        rm -rf "$T"
    fi
}
trap cleanup EXIT
T0=$(date +%s.%N)

below() { # NAME VALUE BOUND
    if awk -v v="$2" -v b="$3" 'BEGIN { exit !(v != "" && v != "null" && v + 0 <= b + 0) }'; then
        ok "$1 ($2 <= $3)"
    else
        fail "$1: got '$2', expected <= $3"
    fi
}

ADMIN=admin-token-0123456789abcdefghij
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

echo "== data: 420 x 24 planted (rank-4 signal, gap 0.02), 4 parties, party 2 sparse (.mtx)"
if "$F" gen planted --rows 420 --cols $D --rank $KK --gap 0.02 --seed 11 --out "$T/full.npy" \
    --out-dir "$T/p" --parties $K --split 120,90,100,110 >/dev/null 2>"$T/gen.err" &&
    "$F" convert --input "$T/p/party-2.npy" --out "$T/p/party-2.mtx" >/dev/null 2>>"$T/gen.err"; then
    ok "fedsvd gen planted + convert party 2 to MatrixMarket"
else
    fail "data: $(cat "$T/gen.err")"
    finish
fi
DATA=("$T/p/party-1.npy" "$T/p/party-2.mtx" "$T/p/party-3.npy" "$T/p/party-4.npy")

echo "== centralised references (fedsvd svd --k $KK)"
# the rows of parties 1, 2, 4 and of 1, 2, 3 stacked, as CSV (shortest
# round-trip numbers)
node --input-type=module - "$JLIB" "$T" <<'EOF' || fail "stacking parties"
import fs from 'node:fs';
const [lib, T] = process.argv.slice(2);
const { readNpy } = await import(lib);
for (const set of [[1, 2, 4], [1, 2, 3]]) {
  let out = '';
  for (const i of set) {
    const m = readNpy(`${T}/p/party-${i}.npy`);
    const [r, c] = m.shape;
    for (let a = 0; a < r; a++) {
      const row = [];
      for (let b = 0; b < c; b++) row.push(m.fortranOrder ? m.data[a + b * r] : m.data[a * c + b]);
      out += row.join(',') + '\n';
    }
  }
  fs.writeFileSync(`${T}/p${set.join('')}.csv`, out);
}
EOF
if "$F" svd --input "$T/full.npy" --k $KK --method thin --out "$T/ref" >/dev/null 2>"$T/svd.err" &&
    "$F" svd --input "$T/p124.csv" --k $((KK + 1)) --method thin --out "$T/ref124" >/dev/null 2>>"$T/svd.err" &&
    "$F" svd --input "$T/p123.csv" --k $KK --method thin --out "$T/ref123" >/dev/null 2>>"$T/svd.err" &&
    "$F" svd --input "$T/full.npy" --k $((KK + 1)) --method thin --out "$T/ref5" >/dev/null 2>>"$T/svd.err"; then
    ok "references: top-$KK of the pooled 420 x $D, of parties 1, 2, 4 and of 1, 2, 3"
else
    fail "fedsvd svd: $(cat "$T/svd.err")"
    finish
fi

# figures of the data (node, tests/lib/json.mjs): the public bound on
# ||M'_i||_2 (||M_i||_F^2 / s_i, doubled), w_max, and the eigengaps of
# X^T X / N from the references' singular values
node --input-type=module - "$JLIB" "$T" >"$T/figs" <<'EOF' || fail "data figures"
const [lib, T] = process.argv.slice(2);
const { readNpy } = await import(lib);
const rows = [120, 90, 100, 110];
let vb = 0;
for (let i = 1; i <= 4; i++) {
  const m = readNpy(`${T}/p/party-${i}.npy`);
  let s = 0;
  for (const x of m.data) s += x * x;
  vb = Math.max(vb, s / rows[i - 1]);
}
const gap = (file, n) => {
  const s = readNpy(file).data;
  return (s[3] * s[3] - s[4] * s[4]) / n;
};
const s5 = readNpy(`${T}/ref5/S.npy`).data;
console.log(`VB=${(2 * vb).toPrecision(6)}`);
console.log(`WMAX=${(120 / 420).toPrecision(8)}`);
console.log(`GAP=${gap(`${T}/ref5/S.npy`, 420).toPrecision(8)}`);
console.log(`GAP124=${gap(`${T}/ref124/S.npy`, 330).toPrecision(8)}`);
console.log(`EIG="${Array.from(s5.slice(0, 4), (x) => (x * x) / 420).join(' ')}"`);
EOF
# shellcheck disable=SC1091
. "$T/figs"
echo "   value_bound $VB, w_max $WMAX, gap $GAP (parties 1,2,4: $GAP124)"

# tol SIGMA_EFF GAP: 4 sqrt(2k) sigma_eff (sqrt(d) + sqrt(r)) / gap
tol() {
    awk -v s="$1" -v g="$2" -v k=$KK -v d=$D -v r=$RR \
        'BEGIN { printf "%.3g", 4 * sqrt(2 * k) * s * (sqrt(d) + sqrt(r)) / g }'
}

echo "== services: aggregation-server and $K client-agents"
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/sport" --data-dir "$T/server" \
    --admin-token-file "$T/admin.token" --chunk-words 64 --log-level warn 2>>"$T/server.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/sport" ] && break; sleep 0.05; done
SURL=http://127.0.0.1:$(cat "$T/sport" 2>/dev/null)
AURL=()
for i in $(seq 1 $K); do
    "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
        --operator-token-file "$T/op.token" --poll-ms 20 --log-level warn 2>"$T/agent$i.log" &
    PIDS+=($!)
done
for i in $(seq 1 $K); do
    for _ in $(seq 100); do [ -s "$T/port$i" ] && break; sleep 0.05; done
    AURL[$i]=http://127.0.0.1:$(cat "$T/port$i" 2>/dev/null)
done
for _ in $(seq 100); do curl -sf "$SURL/readyz" >/dev/null && break; sleep 0.05; done
if curl -sf "$SURL/readyz" -o /dev/null && curl -sf "${AURL[$K]}/readyz" -o /dev/null; then
    ok "services ready"
else
    fail "services did not start: $(tail -n 3 "$T/server.log")"
    finish
fi
# the jobs pin each agent's identity (GET /v1/identity)
PINS=""
for i in $(seq 1 $K); do
    PINS="$PINS${PINS:+, }\"$(curl -sf -H "Authorization: Bearer $OP" "${AURL[$i]}/v1/identity" |
        node "$JLIB" get - .fingerprint)\""
done

# run_job NAME SPEC_JSON FAIL_AT...: create the job (admin), give invitation i
# to agent i with its dataset and fail_at ("-" = none), wait (60 s at most)
# for every participation to end: NAME.job.json, NAME.ids.json, NAME.parts.json
run_job() {
    local name=$1 spec=$2 urls=() i id
    shift 2
    curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$spec" \
        "$SURL/v1/jobs" >"$T/$name.job.json"
    if ! node "$JLIB" get "$T/$name.job.json" .job.id >/dev/null 2>&1; then
        fail "$name: POST /v1/jobs: $(head -c 400 "$T/$name.job.json")"
        return 1
    fi
    node --input-type=module - "$JLIB" "$T" "$name" "$OP" "${AURL[@]:1}" -- "${DATA[@]}" -- "$@" \
        <<'EOF' || { fail "$name: POST /v1/participations"; return 1; }
import fs from 'node:fs';
const [lib, T, name, op, ...rest] = process.argv.slice(2);
const { readJson, postJson } = await import(lib);
const s1 = rest.indexOf('--');
const urls = rest.slice(0, s1);
const rest2 = rest.slice(s1 + 1);
const s2 = rest2.indexOf('--');
const data = rest2.slice(0, s2);
const fails = rest2.slice(s2 + 1);
const job = readJson(`${T}/${name}.job.json`);
const ids = [];
for (const inv of job.invitations) {
  const i = inv.party - 1;
  const body = { invitation: inv, dataset: { path: data[i] },
                 fail_at: (fails[i] ?? '-') === '-' ? null : fails[i] };
  ids.push((await postJson(`${urls[i]}/v1/participations`, op, body)).id);
}
fs.writeFileSync(`${T}/${name}.ids.json`, JSON.stringify({ job: job.job.id, ids }));
EOF
    i=0
    for id in $(node "$JLIB" get "$T/$name.ids.json" .ids | tr -d '[]"' | tr , ' '); do
        i=$((i + 1))
        urls+=("${AURL[$i]}/v1/participations/$id")
    done
    node "$JLIB" wait-done "$T/$name.parts.json" 60 "$OP" "${urls[@]}"
    curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(node "$JLIB" get "$T/$name.ids.json" .job)" \
        >"$T/$name.status.json"
}
state_of() { node "$JLIB" get "$T/$1.parts.json" "[$2].$3"; } # NAME INDEX FIELD
pid_of() { node "$JLIB" get "$T/$1.ids.json" ".ids[$2]"; }    # NAME INDEX

# check_parties NAME REF TOL PARTIES: each listed party (1-based) is done, its
# V.npy is within TOL of REF/V.npy (projection distance of the first k
# columns), and its manifest holds the party's timings and byte counts
check_parties() {
    local name=$1 ref=$2 tolv=$3 i p dir v
    for i in ${4//,/ }; do
        if [ "$(state_of "$name" $((i - 1)) state)" != "done" ]; then
            fail "$name: party $i: $(state_of "$name" $((i - 1)) state): $(state_of "$name" $((i - 1)) error)"
            continue
        fi
        p=$(pid_of "$name" $((i - 1)))
        dir="$T/agent$i/participations/$p"
        v=$("$F" compare --a "$dir/V.npy" --b "$ref/V.npy" --metric subspace --k $KK 2>&1)
        below "$name: party $i's V.npy vs the centralised top-$KK (projection distance)" "$v" "$tolv"
        if node "$JLIB" get "$dir/manifest.json" .party_timings.compute >/dev/null &&
            node "$JLIB" get "$dir/manifest.json" .party_timings.crypto >/dev/null &&
            [ "$(node "$JLIB" get "$dir/manifest.json" .party)" = "$i" ] &&
            [ "$(node "$JLIB" get "$dir/manifest.json" .bytes_sent)" -gt 0 ] &&
            [ -s "$dir/eigenvalues.npy" ]; then
            ok "$name: party $i's manifest: party, party_timings (compute, crypto), bytes; eigenvalues.npy"
        else
            fail "$name: party $i's manifest: $(head -c 300 "$dir/manifest.json" 2>/dev/null)"
        fi
    done
}

ALL="\"parties\": $K, \"threshold\": 3, \"cols\": $D, \"party_rows\": [120, 90, 100, 110],
     \"k\": $KK, \"rank\": $RR, \"iterations\": $TT, \"sync_every\": 1, \"round_timeout_s\": 20,
     \"party_keys\": [$PINS]"

echo "== fedpower, no noise (plain uploads)"
run_job plain "{\"algorithm\": \"fedpower\", $ALL}" && {
    check_parties plain "$T/ref" 1e-10 1,2,3,4
    P=$(pid_of plain 0)
    v=$(node --input-type=module - "$JLIB" "$T/agent1/participations/$P/eigenvalues.npy" "$EIG" <<'EOF'
const [lib, file, eig] = process.argv.slice(2);
const { readNpy } = await import(lib);
const a = readNpy(file).data;
const b = eig.split(' ').map(Number);
let m = 0;
for (let i = 0; i < b.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]) / b[0]);
console.log(m.toExponential(3));
EOF
    )
    below "fedpower: eigenvalues vs S^2/N of the pooled matrix (max error / lambda_1)" "$v" 1e-10
    [ "$(node "$JLIB" get "$T/plain.status.json" .state)" = "done" ] && ok "fedpower: job done" ||
        fail "fedpower: job $(node "$JLIB" get "$T/plain.status.json" .state): $(node "$JLIB" get "$T/plain.status.json" .error)"
    # the wire documents against openapi.yaml (needs the contract tests' npm packages)
    if [ -f "$(dirname "$JLIB")/../contract/node_modules/ajv/package.json" ]; then
        curl -s -H "Authorization: Bearer $ADMIN" \
            "$SURL/v1/jobs/$(node "$JLIB" get "$T/plain.ids.json" .job)/result" >"$T/plain.result.json"
        for pair in "Job plain.status.json" "Result plain.result.json"; do
            set -- $pair
            if node "$JLIB" schema "$OPENAPI" "$1" "$T/$2" >"$T/schema.out" 2>&1; then
                ok "fedpower: the server's $1 matches openapi.yaml"
            else
                fail "fedpower: the server's $1 vs openapi.yaml: $(head -c 600 "$T/schema.out")"
            fi
        done
    fi
}

echo "== fedpower-utility, sigma 1e-3, 1024-bit Paillier noise exchange"
S_UT=1e-3
run_job utility "{\"algorithm\": \"fedpower-utility\", $ALL, \"sigma\": $S_UT, \"value_bound\": $VB,
    \"paillier_bits\": 1024, \"noise_exchange\": \"seed\"}" && {
    check_parties utility "$T/ref" "$(tol "$(awk -v w="$WMAX" -v s=$S_UT 'BEGIN { print w * s }')" "$GAP")" 1,2,3,4
    # without allow_dropouts the job has one exchange, in aggregation 0: it
    # opens when masked input of 0 closes (its selectors persisted, event
    # "exchange", before unmasking of 0 closed); each agent posts its unmask
    # message (event "reveals") before its answer (event "noise"), so the
    # server unmasks while the agents compute
    if command -v sqlite3 >/dev/null; then
        J=$(node "$JLIB" get "$T/utility.ids.json" .job)
        sqlite3 "$T/server/server.db" \
            "SELECT kind, idx, party FROM events WHERE job_id = '$J' ORDER BY seq" >"$T/u.events" 2>&1
        r=$(awk -F'|' '$1 == "close_unmask" { u++ }
            $1 == "reveals" { rv[(u + 0) "/" $3] = 1 }
            $1 == "exchange" { x++; if (u == $2) xe++ }
            $1 == "noise" { n++; if (($2 "/" $3) in rv) na++ }
            END { printf "%d %d %d %d", x, xe, n, na }' "$T/u.events")
        set -- $r
        [ "$1" = 1 ] && [ "$2" = "$1" ] && [ "$3" = "$K" ] && [ "$4" = "$3" ] &&
            ok "fedpower-utility: the job's one exchange open before its unmasking closed; all $3 answers after the party's unmask message" ||
            fail "fedpower-utility: exchanges/early, answers/after the unmask message: $r ($(head -c 300 "$T/u.events" | tr '\n' ' '))"
    fi
    # per party one selector GET (a long poll: no 409 not_ready spins) and
    # one noise-response POST, in aggregation 0 only (the request counters)
    curl -s "$SURL/metrics" >"$T/u.metrics"
    r=$(awk '/^fedsvd_http_requests_total/ && /selector"/ { if (/status="200"/) s200 += $2; else if (/status="409"/) s409 += $2 }
        /^fedsvd_http_requests_total/ && /noise-response"/ && /status="204"/ { n204 += $2 }
        END { printf "%d %d %d", s200, s409, n204 }' "$T/u.metrics")
    set -- $r
    [ "$1" = "$K" ] && [ "$2" = 0 ] && [ "$3" = "$K" ] &&
        ok "fedpower-utility: $1 selector GETs (no 409), $3 noise responses: one each per party and job" ||
        fail "fedpower-utility: selector 200/409, noise-response 204: $r (expected $K 0 $K)"
    P=$(pid_of utility 2)
    c=$(node "$JLIB" get "$T/agent3/participations/$P/manifest.json" .party_timings.crypto)
    awk -v c="$c" 'BEGIN { exit !(c > 0) }' && ok "fedpower-utility: party crypto time $c s > 0" ||
        fail "fedpower-utility: party crypto time '$c'"
    if [ -f "$(dirname "$JLIB")/../contract/node_modules/ajv/package.json" ]; then
        J=$(node "$JLIB" get "$T/utility.ids.json" .job)
        curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$J/aggregations/0" >"$T/u.agg.json"
        curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$J/result" >"$T/u.result.json"
        curl -s -H "Authorization: Bearer $OP" "${AURL[3]}/v1/participations/$P/result" >"$T/u.party.json"
        for pair in "Aggregation u.agg.json" "Result u.result.json" "Result u.party.json"; do
            set -- $pair
            if node "$JLIB" schema "$OPENAPI" "$1" "$T/$2" >"$T/schema.out" 2>&1; then
                ok "fedpower-utility: $2 matches openapi.yaml's $1"
            else
                fail "fedpower-utility: $2 vs openapi.yaml's $1: $(head -c 600 "$T/schema.out")"
            fi
        done
    fi
}

echo "== fedpower-utility, sigma 1e-3, ot noise exchange (oblivious transfer on P-256)"
# the same job with the seeds through oblivious transfer: the same accuracy
# bound, every sync leaves exactly j's noise in (all four parties answer)
run_job utility_ot "{\"algorithm\": \"fedpower-utility\", $ALL, \"sigma\": $S_UT, \"value_bound\": $VB,
    \"noise_exchange\": \"ot\"}" && {
    check_parties utility_ot "$T/ref" "$(tol "$(awk -v w="$WMAX" -v s=$S_UT 'BEGIN { print w * s }')" "$GAP")" 1,2,3,4
    J=$(node "$JLIB" get "$T/utility_ot.ids.json" .job)
    curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$J/result" >"$T/uot.result.json"
    r=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1]));
        const c = r.convergence || [];
        console.log(c.length + " " + c.filter((x) => x.noises_left === 1 &&
            JSON.stringify(x.parties) === "[1,2,3,4]").length)' "$T/uot.result.json" 2>&1)
    [ "$r" = "$TT $TT" ] && ok "fedpower-utility ot: all $TT syncs removed every noise but j's" ||
        fail "fedpower-utility ot: syncs / syncs with one noise left: '$r' (want $TT $TT)"
    [ "$(node "$JLIB" get "$T/utility_ot.status.json" .noise_exchange)" = ot ] &&
        [ -z "$(node "$JLIB" get "$T/utility_ot.status.json" .paillier_bits 2>/dev/null)" ] &&
        ok "fedpower-utility ot: the job says noise_exchange ot, no paillier_bits" ||
        fail "fedpower-utility ot: job noise_exchange '$(node "$JLIB" get "$T/utility_ot.status.json" .noise_exchange)'"
    # the key is the protocol's public point: 33 bytes, no Paillier modulus
    curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$J/exchange-key" >"$T/uot.key.json"
    r=$(node -e 'const k = JSON.parse(require("fs").readFileSync(process.argv[1]));
        console.log(Buffer.from(k.public_key, "base64url").length + " " + k.bits + " " + k.noise_exchange)' \
        "$T/uot.key.json" 2>&1)
    [ "$r" = "33 256 ot" ] && ok "fedpower-utility ot: exchange key 33 bytes, bits 256" ||
        fail "fedpower-utility ot: exchange key: '$r' ($(head -c 200 "$T/uot.key.json"))"
    if [ -f "$(dirname "$JLIB")/../contract/node_modules/ajv/package.json" ]; then
        for pair in "Job utility_ot.status.json" "Result uot.result.json" "ExchangeKey uot.key.json"; do
            set -- $pair
            if node "$JLIB" schema "$OPENAPI" "$1" "$T/$2" >"$T/schema.out" 2>&1; then
                ok "fedpower-utility ot: $2 matches openapi.yaml's $1"
            else
                fail "fedpower-utility ot: $2 vs openapi.yaml's $1: $(head -c 600 "$T/schema.out")"
            fi
        done
    fi
}
# a Paillier key size does not apply to ot
curl -s -o "$T/ot422.json" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" \
    -H 'Content-Type: application/json' -d "{\"algorithm\": \"fedpower-utility\", $ALL,
    \"sigma\": $S_UT, \"value_bound\": $VB, \"noise_exchange\": \"ot\", \"paillier_bits\": 2048}" \
    "$SURL/v1/jobs" >"$T/ot422.code"
[ "$(cat "$T/ot422.code")" = 422 ] && grep -q 'does not apply to noise_exchange ot' "$T/ot422.json" &&
    ok "fedpower-utility ot with paillier_bits: 422" ||
    fail "fedpower-utility ot with paillier_bits: $(cat "$T/ot422.code") $(head -c 300 "$T/ot422.json")"

echo "== fedpower-private, sigma 1e-3 (clip_z 1, bound_m = value bound: nothing clipped)"
S_PR=1e-3
run_job private "{\"algorithm\": \"fedpower-private\", $ALL, \"sigma\": $S_PR, \"clip_z\": 1.0,
    \"bound_m\": $VB, \"allow_weak_privacy\": true}" &&
    check_parties private "$T/ref" "$(tol "$(awk -v w="$WMAX" -v s=$S_PR -v k=$K 'BEGIN { print w * s * sqrt(k / 3) }')" "$GAP")" 1,2,3,4

echo "== dp-ppm, sigma 1e-3"
S_DP=1e-3
run_job dpppm "{\"algorithm\": \"dp-ppm\", $ALL, \"sigma\": $S_DP, \"value_bound\": $VB,
    \"allow_weak_privacy\": true}" &&
    check_parties dpppm "$T/ref" "$(tol "$(awk -v s=$S_DP -v k=$K 'BEGIN { print s * sqrt(k / 3) }')" "$GAP")" 1,2,3,4

echo "== dp-ppm, party 3 stops before its masked input of round 2 (allow_dropouts, threshold 2)"
DROP="\"parties\": $K, \"threshold\": 2, \"allow_low_threshold\": true, \"cols\": $D, \"party_rows\": [120, 90, 100, 110],
     \"k\": $KK, \"rank\": $RR, \"iterations\": $TT, \"sync_every\": 1, \"round_timeout_s\": 2,
     \"allow_dropouts\": true, \"party_keys\": [$PINS]"
run_job drop "{\"algorithm\": \"dp-ppm\", $DROP, \"sigma\": $S_DP, \"value_bound\": $VB,
    \"allow_weak_privacy\": true}" - - masked_input:2 - && {
    if [ "$(state_of drop 2 state)" = failed ] && grep -q 'fail_at masked_input' "$T/drop.parts.json"; then
        ok "drop: party 3 stopped at masked_input:2 (fail_at)"
    else
        fail "drop: party 3: $(state_of drop 2 state) $(state_of drop 2 error)"
    fi
    check_parties drop "$T/ref124" "$(tol "$(awk -v s=$S_DP 'BEGIN { print s * sqrt(3 / 2) }')" "$GAP124")" 1,2,4
    P=$(pid_of drop 0)
    m="$T/agent1/participations/$P/manifest.json"
    [ "$(node "$JLIB" get "$m" .survivors)" = "[1,2,4]" ] && [ "$(node "$JLIB" get "$m" .dropped)" = "[3]" ] &&
        ok "drop: result survivors [1,2,4], dropped [3]" ||
        fail "drop: survivors $(node "$JLIB" get "$m" .survivors) dropped $(node "$JLIB" get "$m" .dropped)"
}

echo "== fedpower, party 4 stops before its plain upload of round 1 (allow_dropouts, threshold 2)"
# no noise: the 7 iterations after the drop contract the error of the full
# data's subspace (distance ~0.1) by 0.018^7: exact to rounding again, but
# now for parties 1, 2, 3
run_job pdrop "{\"algorithm\": \"fedpower\", $DROP}" - - - plain_upload:1 && {
    if [ "$(state_of pdrop 3 state)" = failed ] && grep -q 'fail_at plain_upload' "$T/pdrop.parts.json"; then
        ok "pdrop: party 4 stopped at plain_upload:1 (fail_at)"
    else
        fail "pdrop: party 4: $(state_of pdrop 3 state) $(state_of pdrop 3 error)"
    fi
    check_parties pdrop "$T/ref123" 1e-10 1,2,3
}

echo "== a dataset that is not the party's (rows != party_rows[party-1]): 422"
curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"algorithm\": \"fedpower\", $ALL}" "$SURL/v1/jobs" >"$T/bad.job.json"
code=$(node --input-type=module - "$JLIB" "$T" "$OP" "${AURL[1]}" <<'EOF'
const [lib, T, op, url] = process.argv.slice(2);
const { readJson, request } = await import(lib);
const inv = readJson(`${T}/bad.job.json`).invitations[0];
const r = await request('POST', `${url}/v1/participations`,
  { token: op, json: { invitation: inv, dataset: { path: `${T}/p/party-3.npy` } } });
console.log(r.status, JSON.parse(r.body.toString()).detail);
EOF
)
case $code in
422*party_rows*) ok "party 1 with party 3's 100 rows: $code" ;;
*) fail "wrong dataset: $code" ;;
esac

echo "== long polls: GET /v1/jobs/{job}?wait_ms=N&phase=P&aggregation=R"
# the job above, which nobody joined: waiting_for_parties of aggregation 0
BJ=$(node "$JLIB" get "$T/bad.job.json" .job.id)
BURL="$SURL/v1/jobs/$BJ"
lp() { # QUERY: "<status> <seconds> <phase>" of GET BURL?QUERY
    curl -s -o "$T/lp.json" -w '%{http_code} %{time_total}' -H "Authorization: Bearer $ADMIN" "$BURL?$1"
    echo " $(node "$JLIB" get "$T/lp.json" .phase 2>/dev/null)"
}
r=$(lp 'wait_ms=700&phase=waiting_for_parties&aggregation=0')
awk -v r="$r" 'BEGIN { split(r, a, " "); exit !(a[1] == 200 && a[2] >= 0.6 && a[2] < 5 && a[3] == "waiting_for_parties") }' &&
    ok "long poll on the job's own position is held until wait_ms ($r)" || fail "held long poll: $r"
r=$(lp 'wait_ms=20000&phase=share_keys&aggregation=0')
awk -v r="$r" 'BEGIN { split(r, a, " "); exit !(a[1] == 200 && a[2] < 5) }' &&
    ok "long poll on another phase answers at once ($r)" || fail "long poll, other phase: $r"
r=$(lp 'wait_ms=20000&phase=waiting_for_parties&aggregation=3')
awk -v r="$r" 'BEGIN { split(r, a, " "); exit !(a[1] == 200 && a[2] < 5) }' &&
    ok "long poll on another aggregation answers at once ($r)" || fail "long poll, other aggregation: $r"
for q in 'wait_ms=x&phase=share_keys&aggregation=0' 'wait_ms=30001&phase=share_keys&aggregation=0' \
    'wait_ms=100&phase=nonsense&aggregation=0' 'wait_ms=100&phase=share_keys'; do
    r=$(lp "$q")
    [ "${r%% *}" = 400 ] && ok "long poll ?$q: 400" || fail "long poll ?$q: $r"
done
# a held poll answers as soon as the job moves (here: cancelled -> failed)
(lp 'wait_ms=20000&phase=waiting_for_parties&aggregation=0' >"$T/lp.bg") &
lp_pid=$!
sleep 0.5
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $ADMIN" "$BURL"
wait "$lp_pid"
r=$(cat "$T/lp.bg")
awk -v r="$r" 'BEGIN { split(r, a, " "); exit !(a[1] == 200 && a[2] >= 0.4 && a[2] < 5 && a[3] == "failed") }' &&
    ok "a held long poll answers when the job moves (cancelled: $r)" || fail "long poll released by a change: $r"

SECS=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "   fedpower suite: ${SECS}s"
finish
