#!/usr/bin/env bash
# Contract tests of openapi.yaml against the services as built:
#
#  1. lint: @redocly/cli with tests/contract/redocly.yaml (recommended-strict),
#     and a deliberately broken copy must fail the linter;
#  2. a secure-sum scenario through validating proxies: the real
#     aggregation-server and 3 client-agents on 127.0.0.1, each behind a
#     splitter (splitter.mjs) that sends JSON traffic through a Prism proxy
#     (`prism proxy openapi.yaml <service> --errors`) and checks binary (.npy)
#     traffic itself; the agents reach the server only through its proxy (the
#     invitations carry the proxy's URL). scenario.mjs drives every operation
#     of both services, error responses included; `fedsvd job` commands run
#     against the proxied server too. Any request or response that does not
#     match the spec fails the suite (Prism's "Violation" log lines, its
#     sl-violations header, the splitter's VIOLATION lines).
#
# See tests/contract/README.md for why binary bodies bypass Prism.
#
# Usage: tests/contract/run.sh BIN_DIR (default build/bin)
# Ends with "contract: P passed, F failed".
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(cd "${1:-build/bin}" 2>/dev/null && pwd || echo "${1:-build/bin}")
SPEC="$ROOT/openapi.yaml"
NM="$HERE/node_modules"
passed=0
failed=0

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $*"
}

finish() {
    echo "contract: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1

if ! command -v node >/dev/null 2>&1; then
    fail "node is not installed (make deps)"
    finish
fi
if [ ! -x "$NM/.bin/redocly" ] || [ ! -x "$NM/.bin/prism" ] || [ ! -d "$NM/js-yaml" ]; then
    fail "npm packages missing: run 'make contract-deps' (npm ci in tests/contract)"
    finish
fi

T=$(mktemp -d)
PIDS=()
cleanup() {
    local p
    # Only the processes this script started, by pid: TERM, then KILL.
    for p in "${PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for _ in $(seq 1 50); do
        local alive=0
        for p in "${PIDS[@]}"; do
            kill -0 "$p" 2>/dev/null && alive=1
        done
        [ "$alive" -eq 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

echo "== lint openapi.yaml (@redocly/cli $("$NM/.bin/redocly" --version 2>/dev/null))"
if "$NM/.bin/redocly" lint --config "$HERE/redocly.yaml" "$SPEC" >"$T/lint.log" 2>&1; then
    ok "redocly lint (recommended-strict): $(grep -c . "$T/lint.log") lines, no problem"
else
    fail "redocly lint:"
    sed 's/^/     /' "$T/lint.log" | head -n 40
fi
sed 's|\$ref: "#/components/schemas/JobSpec"|$ref: "#/components/schemas/NoSuchSchema"|' "$SPEC" >"$T/broken.yaml"
if "$NM/.bin/redocly" lint --config "$HERE/redocly.yaml" "$T/broken.yaml" >"$T/lint2.log" 2>&1; then
    fail "the linter accepts a spec with a dangling \$ref"
else
    ok "the linter rejects a spec with a dangling \$ref"
fi

echo "== services behind validating proxies"
for b in fedsvd aggregation-server client-agent masking-server; do
    if [ ! -x "$BIN/$b" ]; then
        fail "$BIN/$b not built"
    fi
done
[ "$failed" -eq 0 ] || finish
F="$BIN/fedsvd"

token() { # FILE: a fresh 43-character base64url token, mode 0600
    (umask 077 && head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=\n' >"$1")
}
token "$T/admin.token"
token "$T/operator.token"
token "$T/masking.token"

mkdir -p "$T/data" "$T/out"
for i in 1 2 3; do
    "$F" gen planted --rows 40 --cols 12 --rank 3 --noise 1 --seed "$i" --out "$T/data/p-$i.npy" \
        >/dev/null || fail "gen p-$i"
done
"$F" gen planted --rows 40 --cols 11 --rank 3 --seed 9 --out "$T/data/wrong.npy" >/dev/null

# 15 distinct free ports: server, 3 agents, 4 Prism proxies, 4 splitters, and
# the masking server with its own Prism proxy and splitter (its JSON, the
# mask sets and the keys manifests, goes through Prism; its .npy key files
# through the splitter).
mapfile -t PORTS < <(node -e '
const net = require("net"); const socks = [];
(async () => { for (let i = 0; i < 15; i++) { const s = net.createServer();
  await new Promise(r => s.listen(0, "127.0.0.1", r)); socks.push(s); }
  socks.forEach(s => console.log(s.address().port)); socks.forEach(s => s.close()); })();')
if [ "${#PORTS[@]}" -ne 15 ]; then
    fail "cannot pick free ports"
    finish
fi

start() { # NAME LOG CMD...: start in the background, remember the pid
    local name=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 &
    PIDS+=($!)
    echo "   started $name (pid $!)"
}

wait_port() { # PORT SECONDS
    local i
    for i in $(seq 1 $(($2 * 10))); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

SRV_P=${PORTS[0]}
start aggregation-server "$T/server.log" "$BIN/aggregation-server" --listen "127.0.0.1:$SRV_P" \
    --data-dir "$T/server" --admin-token-file "$T/admin.token" --openapi "$SPEC"
MSK_P=${PORTS[12]}
start masking-server "$T/masking.log" "$BIN/masking-server" --listen "127.0.0.1:$MSK_P" \
    --data-dir "$T/masking" --admin-token-file "$T/masking.token"
for i in 1 2 3; do
    start "client-agent $i" "$T/agent-$i.log" "$BIN/client-agent" --listen "127.0.0.1:${PORTS[$i]}" \
        --data-dir "$T/agent-$i" --token-file "$T/operator.token" --openapi "$SPEC"
done
names=(server agent-1 agent-2 agent-3 masking)
for k in 0 1 2 3 4; do
    up=${PORTS[$k]}
    pp=${PORTS[$((k + 4))]}
    sp=${PORTS[$((k + 8))]}
    if [ "$k" -eq 4 ]; then
        up=$MSK_P
        pp=${PORTS[13]}
        sp=${PORTS[14]}
    fi
    start "prism proxy for ${names[$k]}" "$T/prism-${names[$k]}.log" "$NM/.bin/prism" proxy "$SPEC" \
        "http://127.0.0.1:$up" --errors --host 127.0.0.1 --port "$pp"
    start "splitter for ${names[$k]}" "$T/splitter-${names[$k]}.log" node "$HERE/splitter.mjs" \
        --listen "$sp" --prism "http://127.0.0.1:$pp" --upstream "http://127.0.0.1:$up" --spec "$SPEC" \
        --log "$T/splitter-${names[$k]}.violations"
done
ready=1
for k in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do
    wait_port "${PORTS[$k]}" 60 || {
        ready=0
        fail "nothing listens on port ${PORTS[$k]} (process $k)"
    }
done
if [ "$ready" -eq 0 ]; then
    tail -n 5 "$T"/*.log
    finish
fi
ok "server, 3 agents, the masking server, 5 Prism proxies and 5 splitters listening"
S="http://127.0.0.1:${PORTS[8]}"

cat >"$T/scenario.json" <<EOF
{"server": "$S",
 "agents": ["http://127.0.0.1:${PORTS[9]}", "http://127.0.0.1:${PORTS[10]}", "http://127.0.0.1:${PORTS[11]}"],
 "adminToken": "$(cat "$T/admin.token")", "operatorToken": "$(cat "$T/operator.token")",
 "parties": ["$T/data/p-1.npy", "$T/data/p-2.npy", "$T/data/p-3.npy"],
 "wrongShape": "$T/data/wrong.npy", "shape": [40, 12], "out": "$T/out",
 "masking": "http://127.0.0.1:${PORTS[14]}", "maskingToken": "$(cat "$T/masking.token")"}
EOF
chmod 600 "$T/scenario.json"

echo "== scenario (scenario.mjs)"
node "$HERE/scenario.mjs" "$T/scenario.json" | tee "$T/scenario.out"
line=$(grep -E '^scenario: [0-9]+ passed, [0-9]+ failed$' "$T/scenario.out" | tail -n 1)
if [ -z "$line" ]; then
    fail "scenario did not finish"
else
    p=$(echo "$line" | sed -E 's/scenario: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p))
    failed=$((failed + f))
fi

echo "== fedsvd job commands through the proxy"
JOB=$(cat "$T/out/job-id" 2>/dev/null)
if [ -n "$JOB" ]; then
    if "$F" job status --server "$S" --job "$JOB" --token-file "$T/admin.token" >"$T/st.out" 2>&1 &&
        grep -q '^state *done' "$T/st.out"; then
        ok "fedsvd job status: done"
    else
        fail "fedsvd job status: $(head -c 300 "$T/st.out")"
    fi
    if "$F" job status --server "$S" --job "$JOB" --token-file "$T/out/party1.token" --format json \
        >"$T/st.json" 2>&1 && grep -q '"dropped": \[3\]' "$T/st.json"; then
        ok "fedsvd job status --format json with a party token: dropped [3]"
    else
        fail "fedsvd job status json: $(head -c 300 "$T/st.json")"
    fi
    if "$F" job watch --server "$S" --job "$JOB" --token-file "$T/admin.token" >"$T/w.out" 2>"$T/w.err"; then
        ok "fedsvd job watch on a finished job: exit 0"
    else
        fail "fedsvd job watch: $(cat "$T/w.err")"
    fi
    if "$F" job result --server "$S" --job "$JOB" --token-file "$T/admin.token" --out "$T/res" \
        >"$T/r.out" 2>&1 && cmp -s "$T/res/sum.npy" "$T/out/server-sum.npy"; then
        ok "fedsvd job result --out: sum.npy downloaded, sha256 checked"
    else
        fail "fedsvd job result: $(head -c 300 "$T/r.out")"
    fi
    if "$F" job list --server "$S" --admin-token-file "$T/admin.token" | grep -q "$JOB"; then
        ok "fedsvd job list"
    else
        fail "fedsvd job list"
    fi
    if "$F" job status --server "$S" --job j-0123456789abcdef0123456789abcdef --token-file \
        "$T/admin.token" >"$T/nf.out" 2>&1; then
        fail "job status of an unknown job succeeded"
    else
        grep -q '404' "$T/nf.out" && ok "fedsvd job status, unknown job: $(cat "$T/nf.out")" ||
            fail "unknown job: $(cat "$T/nf.out")"
    fi
fi
if "$F" job create --server "$S" --admin-token-file "$T/admin.token" --algorithm secure-sum \
    --parties 4 --shape 40,12 --threshold 3 --round-timeout 30 --public-url "$S" --allow-unpinned \
    --out-dir "$T/inv" --format json >"$T/c.json" 2>"$T/c.err"; then
    perms=$(stat -c %a "$T/inv/invitation-1.json" 2>/dev/null)
    if [ -s "$T/inv/invitation-4.json" ] && [ "$perms" = "600" ] &&
        grep -q "\"job_url\": \"$S/v1/jobs/j-" "$T/inv/invitation-2.json"; then
        ok "fedsvd job create --out-dir: 4 invitations, mode 600, job_url through the proxy"
    else
        fail "fedsvd job create --out-dir: perms '$perms'"
    fi
    JOB2=$(sed -n 's/.*"job": {[^}]*"id": "\(j-[0-9a-f]*\)".*/\1/p' "$T/c.json")
    [ -n "$JOB2" ] || JOB2=$(grep -o '"job_id": "j-[0-9a-f]*"' "$T/inv/invitation-1.json" | grep -o 'j-[0-9a-f]*')
    if "$F" job cancel --server "$S" --job "$JOB2" --admin-token-file "$T/admin.token" >"$T/x.out" 2>&1 &&
        grep -q 'failed' "$T/x.out"; then
        ok "fedsvd job cancel: $(cat "$T/x.out")"
    else
        fail "fedsvd job cancel: $(cat "$T/x.out")"
    fi
else
    fail "fedsvd job create: $(cat "$T/c.err")"
fi
FPR1=$(printf 'a1%.0s' $(seq 32))
FPR2=$(printf 'B2%.0s' $(seq 32))
FPR2L=$(printf 'b2%.0s' $(seq 32))
if "$F" job create --server "$S" --admin-token-file "$T/admin.token" --algorithm secure-sum \
    --parties 2 --shape 40,12 --party-key "2:$FPR2" --party-key "1:$FPR1" >"$T/c2.out" 2>"$T/c2.err" &&
    grep -q '"token"' "$T/c2.out" &&
    [ "$(node "$ROOT/tests/lib/json.mjs" get "$T/c2.out" '[1].party_keys')" = "[\"$FPR1\",\"$FPR2L\"]" ]; then
    ok "fedsvd job create --party-key: the invitations carry the pins, in party order ($(cat "$T/c2.err"))"
else
    fail "fedsvd job create to stdout: $(cat "$T/c2.err")"
fi

echo "== results"
if [ -s "$T/out/server-sum.npy" ]; then
    "$F" sum --out "$T/expected.npy" "$T/data/p-1.npy" "$T/data/p-2.npy" >/dev/null
    v=$("$F" compare --a "$T/out/server-sum.npy" --b "$T/expected.npy" --metric maxrel)
    if awk -v v="$v" 'BEGIN { exit !(v + 0 <= 1e-12) }'; then
        ok "sum.npy through the proxies = p1 + p2 (max rel error $v)"
    else
        fail "sum.npy max rel error $v"
    fi
    cmp -s "$T/out/server-sum.npy" "$T/out/agent-sum.npy" && ok "the agent's sum.npy equals the server's" ||
        fail "the agent's sum.npy differs from the server's"
fi
if [ -s "$T/out/fedsvd-p1-S.npy" ]; then
    "$F" svd --input "$T/data/p-1.npy" --input "$T/data/p-2.npy" --input "$T/data/p-3.npy" \
        --out "$T/ref" >/dev/null
    for i in 1 2 3; do
        v=$("$F" compare --a "$T/out/fedsvd-p$i-S.npy" --b "$T/ref/S.npy" --metric sv)
        w=$("$F" compare --a "$T/out/fedsvd-p$i-V.npy" --b "$T/ref/V.npy" --metric subspace)
        if awk -v v="$v" -v w="$w" 'BEGIN { exit !(v + 0 <= 1e-12 && w + 0 <= 1e-10) }'; then
            ok "fedsvd through the proxies, party $i: S ($v) and V ($w) = fedsvd svd of the pooled data"
        else
            fail "fedsvd party $i: S error $v, V projection distance $w"
        fi
    done
else
    fail "no fedsvd result from the scenario"
fi
[ -s "$T/out/fedpca-p2-components.npy" ] && ok "fedpca through the proxies: party 2's components" ||
    fail "no fedpca result from the scenario"
for n in server agent-1; do
    if served=$(node -e '
        fetch(process.argv[1] + "/openapi.yaml").then(r => r.text()).then(t => process.stdout.write(t))' \
        "http://127.0.0.1:${PORTS[$([ "$n" = server ] && echo 0 || echo 1)]}") &&
        [ "$served" = "$(cat "$SPEC")" ]; then
        ok "$n serves this openapi.yaml at /openapi.yaml"
    else
        fail "$n does not serve this openapi.yaml"
    fi
done

echo "== validation logs"
for k in 0 1 2 3 4; do
    n=${names[$k]}
    plog="$T/prism-$n.log"
    slog="$T/splitter-$n.violations"
    reqs=$(grep -c 'Request received' "$plog")
    viol=$(grep -c 'Violation:' "$plog")
    sviol=$(grep -c ' VIOLATION ' "$slog")
    serr=$(grep -c ' ERROR ' "$slog")
    checked=$(grep -cE ' (binary|direct) ' "$slog")
    if [ "$viol" -eq 0 ]; then
        ok "$n: Prism validated $reqs requests and their responses: no violation"
    else
        fail "$n: $viol Prism violations:"
        grep 'Violation:' "$plog" | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/     /'
    fi
    if [ "$sviol" -eq 0 ] && [ "$serr" -eq 0 ]; then
        ok "$n: splitter checked $checked binary/direct exchanges: no violation"
    else
        fail "$n: $sviol splitter violations, $serr upstream errors:"
        grep -E ' (VIOLATION|ERROR) ' "$slog" | head -n 10 | sed 's/^/     /'
    fi
done
uploads=$(grep -c 'binary PUT /v1/jobs/[^ ]*/masked/[0-9]* -> 204' "$T/splitter-server.violations")
[ "$uploads" -ge 2 ] && ok "masked chunk uploads went through the server's splitter ($uploads)" ||
    fail "masked uploads seen by the splitter: $uploads"
keyfiles=$(grep -cE 'binary GET /v1/masksets/[^ ]*/keys/[0-9]+/(rows|block)\.npy -> 200' "$T/splitter-masking.violations")
[ "$keyfiles" -ge 6 ] && ok "the parties' .npy key files went through the masking server's splitter ($keyfiles)" ||
    fail "key files seen by the masking splitter: $keyfiles"
manifests=$(grep -cE 'get /v1/masksets/[^ ]*/keys .*Request received' "$T/prism-masking.log")
[ "$manifests" -ge 6 ] && ok "the keys manifests went through the masking server's Prism ($manifests)" ||
    fail "keys manifests through the masking Prism: $manifests"
agent_reqs=$(grep -c 'Request received' "$T/prism-server.log")
[ "$agent_reqs" -ge 50 ] && ok "the agents' protocol traffic went through Prism ($agent_reqs requests)" ||
    fail "only $agent_reqs requests through the server's Prism"
finish
