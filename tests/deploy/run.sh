#!/usr/bin/env bash
# Offline checks of the deployment files (no Docker engine, no cluster):
#
#  1. docker-compose -f docker/docker-compose.yml config -q (Debian's
#     docker-compose 1.29; `make deps` installs it), the same for each role's
#     file in docker/compose/, and broken copies must fail;
#  2. dockerfilelint (npm, pinned in package-lock.json) on docker/Dockerfile, and
#     a broken Dockerfile must be flagged;
#  3. kubectl kustomize of docker/k8s and of each of its kustomizations (without
#     kubectl, check.mjs parses the manifests itself), and an overlay that replaces
#     the placeholder tokens, as docker/README.md shows;
#  4. check.mjs: the files against each other and against the code (Makefile
#     DEB_BUILD, the binaries' shared libraries and --help, ports, probes, secrets,
#     non-root, .dockerignore; per role: one service, TLS, the published
#     ports); then against mutated copies, where it must fail;
#  5. the placeholder tokens of docker/k8s are refused by the real binaries, and
#     the token one-liner of docker/README.md makes tokens a server accepts.
#
# npm packages are installed here (npm ci) when node_modules is missing or older
# than package-lock.json.
#
# Usage: tests/deploy/run.sh BIN_DIR (default build/bin)
# Ends with "deploy: P passed, F failed"; exits non-zero on failure.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(cd "${1:-$ROOT/build/bin}" 2>/dev/null && pwd || echo "${1:-build/bin}")
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
    echo "deploy: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
cd "$ROOT" || exit 1

# ------------------------------------------------------------------ npm packages
if [ -f "$NM/.package-lock.json" ] && [ "$NM/.package-lock.json" -nt "$HERE/package-lock.json" ]; then
    : # up to date
elif ! command -v npm >/dev/null 2>&1; then
    fail "npm not found (make deps installs nodejs and npm)"
elif (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >"$TMP/npm.log" 2>&1); then
    echo "     npm ci in tests/deploy"
else
    fail "npm ci in tests/deploy: $(tail -n 3 "$TMP/npm.log")"
fi
have_node=0
[ -x "$NM/.bin/dockerfilelint" ] && [ -f "$NM/js-yaml/package.json" ] && command -v node >/dev/null 2>&1 && have_node=1

# ----------------------------------------------------------------- 1. compose
if command -v docker-compose >/dev/null 2>&1; then
    if out=$(docker-compose -f docker/docker-compose.yml config -q 2>&1); then
        ok "docker-compose config -q (docker-compose $(docker-compose version --short 2>/dev/null))"
    else
        fail "docker-compose config -q: $out"
    fi
    # A copy in docker/'s place (relative paths resolve the same) with an unknown key.
    mkdir -p "$TMP/compose"
    sed 's/^  aggregation-server:$/&\n    no_such_option: 1/' docker/docker-compose.yml >"$TMP/compose/docker-compose.yml"
    if cmp -s docker/docker-compose.yml "$TMP/compose/docker-compose.yml"; then
        fail "the broken compose copy is unchanged (the test is stale)"
    elif docker-compose -f "$TMP/compose/docker-compose.yml" config -q >/dev/null 2>&1; then
        fail "docker-compose config -q accepts a compose file with an unknown option"
    else
        ok "docker-compose config -q rejects a compose file with an unknown option"
    fi
    # The per-role files of docker/compose/ (one organisation each).
    for f in docker/compose/*.yml; do
        if out=$(docker-compose -f "$f" config -q 2>&1); then
            ok "docker-compose -f $f config -q"
        else
            fail "docker-compose -f $f config -q: $out"
        fi
    done
    mkdir -p "$TMP/role"
    sed 's/^  client-agent:$/&\n    no_such_option: 1/' docker/compose/site.yml >"$TMP/role/site.yml"
    if cmp -s docker/compose/site.yml "$TMP/role/site.yml"; then
        fail "the broken copy of docker/compose/site.yml is unchanged (the test is stale)"
    elif docker-compose -f "$TMP/role/site.yml" config -q >/dev/null 2>&1; then
        fail "docker-compose config -q accepts docker/compose/site.yml with an unknown option"
    else
        ok "docker-compose config -q rejects docker/compose/site.yml with an unknown option"
    fi
else
    fail "docker-compose not found: install Debian's docker-compose (make deps)"
fi
# Compose v2, where present, must accept the file too.
if docker compose version >/dev/null 2>&1; then
    if out=$(docker compose -f docker/docker-compose.yml config -q 2>&1); then
        ok "docker compose (v2) config -q"
    else
        fail "docker compose (v2) config -q: $out"
    fi
fi

# ------------------------------------------------------------ 2. dockerfilelint
if [ "$have_node" -eq 1 ]; then
    if out=$("$NM/.bin/dockerfilelint" -c "$HERE" docker/Dockerfile 2>&1); then
        ok "dockerfilelint $(node -p "require('$NM/dockerfilelint/package.json').version") docker/Dockerfile"
    else
        fail "dockerfilelint docker/Dockerfile:"
        echo "$out" | sed 's/^/     /'
    fi
    printf 'FROM debian:latest\nRUN apt-get install curl\nEXPOSE 80/xyz\n' >"$TMP/Dockerfile.bad"
    if "$NM/.bin/dockerfilelint" -c "$HERE" "$TMP/Dockerfile.bad" >/dev/null 2>&1; then
        fail "dockerfilelint passes a broken Dockerfile"
    else
        ok "dockerfilelint flags a broken Dockerfile"
    fi
else
    fail "dockerfilelint/js-yaml/node not available (npm ci in tests/deploy failed?)"
fi

# ------------------------------------------------------------------ 3. kustomize
K8S_ARGS=(--k8s-src docker/k8s)
if command -v kubectl >/dev/null 2>&1; then
    for k in docker/k8s docker/k8s/servers docker/k8s/client-agent; do
        if kubectl kustomize "$k" >"$TMP/k8s.yaml" 2>"$TMP/k8s.err"; then
            ok "kubectl kustomize $k ($(grep -c '^kind:' "$TMP/k8s.yaml") objects)"
        else
            fail "kubectl kustomize $k: $(tail -n 3 "$TMP/k8s.err")"
        fi
    done
    kubectl kustomize docker/k8s >"$TMP/k8s.yaml" 2>/dev/null && K8S_ARGS=(--k8s "$TMP/k8s.yaml")
    # The overlay of docker/README.md: real tokens replace the placeholders.
    mkdir -p "$TMP/overlay"
    printf 'tok-%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$TMP/overlay/aggregation-admin-token"
    printf 'tok-%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$TMP/overlay/masking-admin-token"
    cat >"$TMP/overlay/kustomization.yaml" <<EOF
resources:
  - $(realpath --relative-to="$TMP/overlay" "$ROOT/docker/k8s/servers")
secretGenerator:
  - name: aggregation-server-admin-token
    behavior: replace
    files: [admin-token=aggregation-admin-token]
  - name: masking-server-admin-token
    behavior: replace
    files: [admin-token=masking-admin-token]
images:
  - name: fedsvd/aggregation-server
    newName: registry.example.org/fedsvd/aggregation-server
    newTag: "1.0.0"
EOF
    want=$(base64 -w0 <"$TMP/overlay/aggregation-admin-token")
    if kubectl kustomize "$TMP/overlay" >"$TMP/overlay.yaml" 2>"$TMP/overlay.err" &&
        grep -q "admin-token: $want" "$TMP/overlay.yaml" &&
        grep -q 'image: registry.example.org/fedsvd/aggregation-server:1.0.0' "$TMP/overlay.yaml" &&
        ! grep -q "admin-token: $(base64 -w0 <docker/k8s/servers/secrets/aggregation-admin-token)" "$TMP/overlay.yaml"; then
        ok "an overlay as in docker/README.md replaces the placeholder tokens and the image"
    else
        fail "the overlay of docker/README.md: $(tail -n 3 "$TMP/overlay.err")"
    fi
else
    echo "skip kubectl not found: the manifests are parsed by check.mjs without kustomize"
fi

# ------------------------------------------------------------------ 4. check.mjs
count_check() { # count ok/FAIL lines of a check.mjs run (output in $1)
    local p f
    p=$(grep -c '^ok ' "$1")
    f=$(grep -c '^FAIL ' "$1")
    passed=$((passed + p))
    failed=$((failed + f))
}
if [ "$have_node" -eq 1 ]; then
    node "$HERE/check.mjs" --bin "$BIN" "${K8S_ARGS[@]}" >"$TMP/check.out" 2>&1
    rc=$?
    grep -E '^(ok|FAIL|skip) ' "$TMP/check.out"
    count_check "$TMP/check.out"
    if [ "$rc" -ne 0 ] || ! grep -q '^ok ' "$TMP/check.out"; then
        fail "check.mjs crashed (exit $rc): $(grep -vE '^(ok|FAIL|skip) ' "$TMP/check.out" | tail -n 5)"
    fi

    # Mutations: each must make check.mjs report a FAIL matching EXPECT.
    mutant() { # NAME FILE-KIND SED-EXPRESSION EXPECT
        local name=$1 kind=$2 expr=$3 expect=$4 orig args=()
        case $kind in
        dockerfile)
            orig=docker/Dockerfile
            args=(--dockerfile "$TMP/mutant")
            ;;
        compose)
            orig=docker/docker-compose.yml
            args=(--compose "$TMP/mutant" --compose-dir "$ROOT/docker")
            ;;
        masking | aggregation | site | sharded)
            orig=docker/compose/$kind.yml
            args=("--compose-$kind" "$TMP/mutant")
            ;;
        k8s)
            [ "${K8S_ARGS[0]}" = "--k8s" ] || return 0 # needs the rendered output
            orig=${K8S_ARGS[1]}
            args=(--k8s "$TMP/mutant")
            ;;
        esac
        sed "$expr" "$orig" >"$TMP/mutant"
        if cmp -s "$orig" "$TMP/mutant"; then
            fail "mutation '$name' changed nothing (the test is stale)"
            return
        fi
        node "$HERE/check.mjs" --bin "$BIN" "${K8S_ARGS[@]}" "${args[@]}" >"$TMP/mut.out" 2>&1
        if grep '^FAIL ' "$TMP/mut.out" | grep -qF -- "$expect"; then
            ok "check.mjs catches: $name ($(grep '^FAIL ' "$TMP/mut.out" | grep -F -- "$expect" | head -n 1 | cut -c6-))"
        else
            fail "check.mjs misses: $name (no FAIL line with '$expect')"
        fi
    }
    if [ ! -x "$BIN/client-agent" ] || [ ! -x "$BIN/fedsvd" ]; then
        fail "mutations that need the binaries not run: client-agent or fedsvd not built in $BIN"
    else
        mutant "a flag the agent does not have" dockerfile 's/"--operator-token-file", "\/run\/secrets\/operator-token"/&, "--no-such-flag", "1"/' \
            "client-agent --help lists --no-such-flag"
        mutant "a runtime library left out" dockerfile 's/ libjansson4 / /' "libjansson.so.4 from libjansson4"
        mutant "an unknown FEDSVD_ variable" compose 's/^    image: fedsvd\/client-agent:dev$/&\n    environment:\n      FEDSVD_NO_SUCH_SETTING: "1"/' \
            "client-agent --help lists FEDSVD_NO_SUCH_SETTING"
    fi
    mutant "a build package left out" dockerfile 's/ libsqlite3-dev / /' "Makefile DEB_BUILD"
    mutant "EXPOSE and --listen disagree" dockerfile 's/^EXPOSE 8443$/EXPOSE 9443/' "EXPOSE 8443"
    mutant "running as root" dockerfile 's/^USER 10001:10001$/USER root/' "runs as USER 10001"
    mutant "a health check on the wrong port" compose '0,/127.0.0.1:8443\/readyz/s//127.0.0.1:8444\/readyz/' "healthcheck GETs /readyz on 8443"
    mutant "a port published on all interfaces" compose 's/"127.0.0.1:8452:8444"/"8452:8444"/' "bound to 127.0.0.1"
    mutant "a secret mounted where the agent does not look" compose '0,/target: operator-token/s//target: token/' "mounted at /run/secrets/operator-token"
    mutant "plain HTTP in a role's compose file" site 's/^      FEDSVD_CA_FILE: .*$/&\n      FEDSVD_INSECURE_HTTP: "1"/' \
        "no FEDSVD_INSECURE_HTTP"
    mutant "both servers in one organisation's file" masking 's/^services:$/&\n  aggregation-server:\n    image: fedsvd\/aggregation-server:dev/' \
        "runs masking-server and nothing else"
    mutant "the agent's operator API on every interface" site 's/"127.0.0.1:8444:8444"/"8444:8444"/' \
        "operator API published on the host's loopback only"
    mutant "a server without its certificate" aggregation '/^      FEDSVD_TLS_CERT: /d' "FEDSVD_TLS_CERT names a mounted secret"
    mutant "a shard peer left out of FEDSVD_SHARD_PEERS" sharded 's/,https:\/\/${SHARD_HOST:-aggregation.example.org}:8448"$/"/' \
        "FEDSVD_SHARD_PEERS lists https URLs of shards 1, 2, 3"
    mutant "a shard peer without the peer token" sharded '0,/FEDSVD_PEER_TOKEN_FILE: \/run\/secrets\/peer-token/s//FEDSVD_PEER_TOKEN_FILE: \/run\/secrets\/admin-token/' \
        "FEDSVD_PEER_TOKEN_FILE names the mounted peer-token secret"
    mutant "more shard pods than the coordinator lists" k8s 's/^  replicas: 3$/  replicas: 4/' \
        "lists every peer pod with --shard-peer"
    mutant "a readiness probe on /healthz" k8s '0,/path: \/readyz/s//path: \/healthz/' "readinessProbe GET /readyz"
    mutant "a writable root filesystem" k8s '0,/readOnlyRootFilesystem: true/s//readOnlyRootFilesystem: false/' "readOnlyRootFilesystem"
else
    fail "check.mjs not run (node or its packages missing)"
fi

# --------------------------------------------------------------- 5. tokens
# $1 service, $2 token flag, $3 token file: the binary must exit non-zero at
# once, saying why, and never start listening.
refuses_token() {
    local svc=$1 flag=$2 file=$3 d rc
    if [ ! -x "$BIN/$svc" ]; then
        if [ -d "services/$svc" ]; then
            fail "$svc is not built in $BIN (run make all): placeholder $file not tried"
        else
            echo "skip $svc not written yet (no services/$svc): placeholder $file not tried"
        fi
        return
    fi
    d=$(mktemp -d "$TMP/refuse.XXXX")
    timeout 10 "$BIN/$svc" --listen 127.0.0.1:0 --data-dir "$d/data" "$flag" "$file" >"$d/out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qi 'token' "$d/out"; then
        ok "$svc refuses the placeholder $file (exit $rc)"
    else
        fail "$svc with placeholder $file: exit $rc, $(tail -n 2 "$d/out")"
    fi
}
refuses_token aggregation-server --admin-token-file docker/k8s/servers/secrets/aggregation-admin-token
refuses_token masking-server --admin-token-file docker/k8s/servers/secrets/masking-admin-token
refuses_token client-agent --operator-token-file docker/k8s/client-agent/secrets/operator-token
# The peer token placeholder, with a real admin token beside it.
if [ -x "$BIN/aggregation-server" ]; then
    d=$(mktemp -d "$TMP/refuse.XXXX")
    printf 'tok-%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$d/admin"
    chmod 600 "$d/admin"
    timeout 10 "$BIN/aggregation-server" --listen 127.0.0.1:0 --data-dir "$d/data" --admin-token-file "$d/admin" \
        --peer-token-file docker/k8s/servers/secrets/aggregation-peer-token >"$d/out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qi 'peer token' "$d/out"; then
        ok "aggregation-server refuses the placeholder peer token (exit $rc)"
    else
        fail "aggregation-server with the placeholder peer token: exit $rc, $(tail -n 2 "$d/out")"
    fi
fi

# The README's one-liner, run in a scratch directory: five 0600 files named as
# compose's secrets, and the aggregation server accepts its token.
line=$(grep -m1 '^(umask 077 && mkdir -p docker/secrets' docker/README.md)
if [ -z "$line" ]; then
    fail "docker/README.md: the token one-liner '(umask 077 && mkdir -p docker/secrets ...' not found"
else
    # As in a clone: docker/secrets/ exists (0755, with its .gitignore).
    mkdir -p "$TMP/oneliner/docker/secrets"
    chmod 755 "$TMP/oneliner/docker/secrets"
    cp docker/secrets/.gitignore "$TMP/oneliner/docker/secrets/"
    (cd "$TMP/oneliner" && bash -c "$line") 2>"$TMP/oneliner.err"
    want=$(sed -n '/^secrets:/,$p' docker/docker-compose.yml | sed -n 's/^  \([a-z0-9-]*\):$/\1/p' | sort | tr '\n' ' ')
    got=$(find "$TMP/oneliner/docker/secrets" -type f ! -name '.*' -printf '%f\n' 2>/dev/null | sort | tr '\n' ' ')
    bad_mode=$(find "$TMP/oneliner/docker/secrets" \( -type f ! -name '.*' ! -perm 0600 \) -o \( -type d ! -perm 0700 \) 2>/dev/null)
    if [ -n "$got" ] && [ "$got" = "$want" ] && [ -z "$bad_mode" ]; then
        ok "README token one-liner makes the compose secrets ($got), files 0600 in a 0700 directory"
    else
        fail "README token one-liner: made [$got], compose wants [$want]; wrong mode: [$bad_mode] $(cat "$TMP/oneliner.err")"
    fi
    tok="$TMP/oneliner/docker/secrets/aggregation-admin-token"
    if [ -x "$BIN/aggregation-server" ] && [ -f "$tok" ] && command -v curl >/dev/null 2>&1; then
        "$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$TMP/agg.port" --data-dir "$TMP/agg" \
            --admin-token-file "$tok" --log-level error >"$TMP/agg.log" 2>&1 &
        PIDS+=($!)
        for _ in $(seq 50); do [ -s "$TMP/agg.port" ] && break; sleep 0.1; done
        port=$(cat "$TMP/agg.port" 2>/dev/null)
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $(cat "$tok")" "http://127.0.0.1:${port:-1}/v1/jobs")
        ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:${port:-1}/readyz")
        if [ "$code" = 200 ] && [ "$ready" = 200 ]; then
            ok "aggregation-server accepts a README-made admin token (GET /v1/jobs 200, /readyz 200)"
        else
            fail "aggregation-server with a README-made token: /v1/jobs $code, /readyz $ready; $(tail -n 2 "$TMP/agg.log")"
        fi
        kill "${PIDS[-1]}" 2>/dev/null
        wait "${PIDS[-1]}" 2>/dev/null
    else
        fail "aggregation-server (in $BIN) or curl missing: the README token not tried against the server"
    fi
fi

finish
