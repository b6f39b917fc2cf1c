#!/usr/bin/env bash
# Release hygiene and the rough edges users hit, with the real binaries on
# loopback only:
#  - the version: `--version` of all four binaries (exit 0, "NAME X.Y.Z" and
#    the git revision in parentheses when built from a checkout), the same
#    release as the VERSION file and openapi.yaml's info.version; /healthz of
#    each service carries it (and matches the Liveness schema); --help lists
#    --version;
#  - logs: a 3-party fedpca job (fedsvd local) logs "listening" once per
#    service, its polls (successful GETs) at debug, what changes state at info;
#  - fedsvd local: --format json prints the summary when the job fails too;
#    the --algorithm error lists every algorithm; --k 0 names the real range;
#    directory arguments with a trailing slash print no "//";
#  - the agent's TLS flags: --tls-cert/--tls-key and FEDSVD_TLS_CERT/_KEY as
#    on the servers, the older --tls-cert-file/--tls-key-file and their
#    variables still accepted;
#  - the Makefile, on a miniature tree in a temporary directory: the
#    service, test and benchmark objects stay after linking, so make -n after
#    make (make demo after make) compiles nothing; a library change
#    recompiles that file only, a new VERSION only lib/core/version.c; outside
#    git the version is the VERSION file alone.
#
#   tests/release/run.sh [BIN_DIR]      (default build/bin)
# Ends with "release: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
F=$BIN/fedsvd
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
JLIB=$HERE/../lib/json.mjs
pass=0
failn=0
finish() {
  echo "release: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
for b in fedsvd aggregation-server masking-server client-agent; do
  [ -x "$BIN/$b" ] || { echo "FAIL $BIN/$b not built"; failn=1; }
done
for c in openssl curl node; do
  command -v "$c" >/dev/null || { echo "FAIL need $c"; failn=1; }
done
[ "$failn" -eq 0 ] || finish

T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT

VERSION=$(tr -d ' \n' <"$ROOT/VERSION" 2>/dev/null)
echo "== the version ($VERSION)"
check "VERSION holds a release number X.Y.Z" bash -c "[[ '$VERSION' =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]"
check "openapi.yaml's info.version is the release" \
  bash -c "sed -n '/^info:/,/^[a-z]/p' '$ROOT/openapi.yaml' | grep -qx '  version: $VERSION'"
for b in fedsvd aggregation-server masking-server client-agent; do
  out=$("$BIN/$b" --version 2>"$T/err")
  rc=$?
  check "$b --version: exit 0, '$out'" \
    bash -c "[ $rc -eq 0 ] && [[ '$out' =~ ^$b\ ${VERSION//./\\.}(\ \(.+\))?$ ]] && [ ! -s '$T/err' ]"
done
# from a git checkout the revision is there: "(g<commit>...)" or a tag's description
if [ -e "$ROOT/.git" ] && command -v git >/dev/null &&
  git -C "$ROOT" rev-parse --short HEAD >/dev/null 2>&1; then
  check "--version names the commit built from a git checkout" \
    bash -c "'$F' --version | grep -Eq '\((g[0-9a-f]{7,}|v?[0-9].*-g[0-9a-f]{7,}|v?[0-9][^ ]*)(-dirty)?\)$'"
fi
for b in aggregation-server masking-server client-agent; do
  check "$b --help lists --version" bash -c "'$BIN/$b' --help | grep -q -- '--version'"
done
check "--version wins over a bad command line (exit 0)" \
  bash -c "'$BIN/aggregation-server' --bogus --version >/dev/null 2>&1"

# ---- /healthz of each service
ADMIN=admin-token-0123456789abcdefghij
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token
wait_port() { # FILE: the port a service wrote, "" after 10 s
  for _ in $(seq 200); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1" 2>/dev/null
}
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/aport" --data-dir "$T/agg" \
  --admin-token-file "$T/admin.token" 2>"$T/agg.log" &
PIDS+=($!)
"$BIN/masking-server" --listen 127.0.0.1:0 --port-file "$T/mport" --data-dir "$T/msk" \
  --admin-token-file "$T/admin.token" 2>"$T/msk.log" &
PIDS+=($!)
"$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/cport" --data-dir "$T/agent" \
  --operator-token-file "$T/op.token" 2>"$T/agent.log" &
PIDS+=($!)
echo "== /healthz"
for s in a:aggregation-server m:masking-server c:client-agent; do
  p=$(wait_port "$T/${s%%:*}port")
  curl -sf "http://127.0.0.1:$p/healthz" >"$T/health-${s#*:}.json" 2>/dev/null
  v=$(node "$JLIB" get "$T/health-${s#*:}.json" .version 2>/dev/null)
  check "${s#*:} /healthz: version $v" test "$v" = "$VERSION"
  check "${s#*:} /healthz matches the Liveness schema" \
    node "$JLIB" schema "$ROOT/openapi.yaml" Liveness "$T/health-${s#*:}.json"
done

# ---- logs of a 3-party job
echo "== logs: polls at debug, listening once"
"$F" gen powerlaw --rows 120 --cols 12 --out-dir "$T/parts" --parties 3 >/dev/null 2>&1
PARTS=(--party "$T/parts/party-1.npy" --party "$T/parts/party-2.npy" --party "$T/parts/party-3.npy")
"$F" local --algorithm fedpca "${PARTS[@]}" --out "$T/pca/" >"$T/pca.out" 2>"$T/pca.err"
check "fedsvd local fedpca (3 parties) ran" test -s "$T/pca/logs/aggregation-server.log"
for l in "$T"/pca/logs/*.log; do
  n=$(grep -Ec '"level":"info","msg":"(client-agent )?listening"' "$l")
  check "$(basename "$l"): \"listening\" logged once at info (got $n)" test "$n" -eq 1
done
polls=$(cat "$T"/pca/logs/*.log |
  grep -Ec '"level":"info","msg":"request","method":"(GET|HEAD)","route":"[^"]*","status":[23][0-9][0-9],')
check "no successful GET (poll) logged at info (got $polls)" test "$polls" -eq 0
check "requests that change state still logged at info (POST)" \
  grep -Eq '"level":"info","msg":"request","method":"POST"' "$T/pca/logs/aggregation-server.log"
check "state changes still logged at info (round closed)" \
  grep -q '"level":"info","msg":"round closed"' "$T/pca/logs/aggregation-server.log"

# ---- fedsvd local's rough edges
echo "== fedsvd local: failures, messages, paths"
check "the text summary names DIR/file with no '//' (--out DIR/)" \
  bash -c "grep -q '$T/pca/' '$T/pca.out' && ! grep -q '//' '$T/pca.out'"
"$F" gen powerlaw --rows 20 --cols 4 --out-dir "$T/p2/" --parties 2 >"$T/gen.out" 2>&1
check "fedsvd gen --out-dir DIR/ prints no '//'" \
  bash -c "grep -q 'p2/party-1.npy' '$T/gen.out' && ! grep -q '//' '$T/gen.out'"
"$F" svd --input "$T/p2/party-1.npy" --out "$T/svd//" >"$T/svd.out" 2>&1
check "fedsvd svd --out DIR// prints no '//'" \
  bash -c "grep -q 'svd/' '$T/svd.out' && ! grep -q '//' '$T/svd.out'"
"$F" local --algorithm secure-sum --party "$T/p2/party-1.npy" --party "$T/p2/party-2.npy" \
  --out "$T/ss/" >"$T/ss.out" 2>/dev/null
check "fedsvd local secure-sum --out DIR/ prints DIR/sum.npy" \
  bash -c "grep -q '$T/ss/sum.npy' '$T/ss.out' && ! grep -q '//' '$T/ss.out'"

"$F" local --algorithm secure-sum --party "$T/p2/party-1.npy" --party "$T/p2/party-2.npy" \
  --out "$T/sf" --fail-party 1:masked_input --round-timeout 1 --format json \
  >"$T/sf.json" 2>"$T/sf.err"
rc=$?
st=$(node "$JLIB" get "$T/sf.json" .state 2>/dev/null)
check "local --format json, secure-sum job fails: exit $rc, summary on stdout (state $st)" \
  bash -c "[ $rc -eq 1 ] && [ '$st' = failed ] && node '$JLIB' get '$T/sf.json' .error >/dev/null"
"$F" local --algorithm fedpower --k 2 --party "$T/p2/party-1.npy" --party "$T/p2/party-2.npy" \
  --out "$T/pf" --fail-party 1:plain_upload --round-timeout 1 --format json \
  >"$T/pf.json" 2>"$T/pf.err"
rc=$?
st=$(node "$JLIB" get "$T/pf.json" .state 2>/dev/null)
check "local --format json, fedpower job fails: exit $rc, summary on stdout (state $st)" \
  bash -c "[ $rc -eq 1 ] && [ '$st' = failed ]"

ALL="secure-sum, fedsvd, fedpca, fedpower, fedpower-utility, fedpower-private or dp-ppm"
"$F" local --algorithm svd "${PARTS[@]}" --out "$T/x" >/dev/null 2>"$T/alg.err"
rc=$?
check "local --algorithm svd: exit 2, lists every algorithm" \
  bash -c "[ $rc -eq 2 ] && grep -q -- '$ALL' '$T/alg.err'"
"$F" job create --server http://127.0.0.1:9 --admin-token-file "$T/admin.token" \
  --algorithm svd --parties 2 --shape 3x3 >/dev/null 2>"$T/alg2.err"
rc=$?
check "job create --algorithm svd: exit 2, lists every algorithm" \
  bash -c "[ $rc -eq 2 ] && grep -q -- '$ALL' '$T/alg2.err'"
"$F" local --algorithm fedpca --k 0 "${PARTS[@]}" --out "$T/x" >/dev/null 2>"$T/k0.err"
rc=$?
check "local fedpca --k 0: exit 2, 'between 1 and min(N, d) = 12'" \
  bash -c "[ $rc -eq 2 ] && grep -q 'between 1 and min(N, d) = 12' '$T/k0.err'"
"$F" local --algorithm fedsvd --k 13 "${PARTS[@]}" --out "$T/x" >/dev/null 2>"$T/k13.err"
rc=$?
check "local fedsvd --k 13 (d = 12): exit 2 before any service starts, names the range" \
  bash -c "[ $rc -eq 2 ] && grep -q 'min(N, d) = 12' '$T/k13.err' && [ ! -e '$T/x/logs' ]"
"$F" local --algorithm fedpower --k 0 "${PARTS[@]}" --out "$T/x" >/dev/null 2>"$T/kp.err"
rc=$?
check "local fedpower --k 0: exit 2, 'between 1 and d = 12'" \
  bash -c "[ $rc -eq 2 ] && grep -q 'between 1 and d = 12' '$T/kp.err'"
"$F" svd --input "$T/p2/party-1.npy" --k 0 >/dev/null 2>"$T/sk0.err"
rc=$?
check "svd --k 0: exit 2, 'between 1 and min(rows, cols)'" \
  bash -c "[ $rc -eq 2 ] && grep -q 'between 1 and min(rows, cols)' '$T/sk0.err'"
"$F" svd --input "$T/p2/party-1.npy" --k 5 >/dev/null 2>"$T/sk5.err"
rc=$?
check "svd --k 5 (10 x 4): exit 2, 'between 1 and min(rows, cols) = 4'" \
  bash -c "[ $rc -eq 2 ] && grep -q 'between 1 and min(rows, cols) = 4' '$T/sk5.err'"

# ---- the agent's TLS flags
echo "== client-agent TLS flags"
mkcerts() {
  local d=$T/pki
  mkdir -p "$d" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -keyout "$d/ca.key" -out "$d/ca.pem" -subj /CN=fedsvd-test-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$d/srv.key" -out "$d/srv.csr" -subj /CN=127.0.0.1 &&
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
      >"$d/ext.cnf" &&
    openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
      -days 2 -extfile "$d/ext.cnf" -out "$d/srv.pem" &&
    chmod 600 "$d"/*.key
} >"$T/openssl.log" 2>&1
check "openssl: a test CA and a certificate for IP 127.0.0.1" mkcerts
CERT=$T/pki/srv.pem
KEY=$T/pki/srv.key
https_agent() { # NAME ENV... -- FLAGS...: the agent serves /healthz over HTTPS
  local name=$1 envs=() p pid ok=1
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/$name.port" \
    --data-dir "$T/$name" --operator-token-file "$T/op.token" "$@" 2>"$T/$name.log" &
  pid=$!
  p=$(wait_port "$T/$name.port")
  for _ in $(seq 100); do
    curl -sf --cacert "$T/pki/ca.pem" "https://127.0.0.1:$p/healthz" >/dev/null 2>&1 && { ok=0; break; }
    sleep 0.05
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return $ok
}
check "agent --tls-cert/--tls-key (the servers' spelling) serves HTTPS" \
  https_agent t1 -- --tls-cert "$CERT" --tls-key "$KEY"
check "agent FEDSVD_TLS_CERT/FEDSVD_TLS_KEY serve HTTPS" \
  https_agent t2 FEDSVD_TLS_CERT="$CERT" FEDSVD_TLS_KEY="$KEY" --
check "agent --tls-cert-file/--tls-key-file (older spelling) still serve HTTPS" \
  https_agent t3 -- --tls-cert-file "$CERT" --tls-key-file "$KEY"
check "agent FEDSVD_TLS_CERT_FILE/FEDSVD_TLS_KEY_FILE (older spelling) still serve HTTPS" \
  https_agent t4 FEDSVD_TLS_CERT_FILE="$CERT" FEDSVD_TLS_KEY_FILE="$KEY" --
check "agent --help documents --tls-cert and --tls-key" \
  bash -c "'$BIN/client-agent' --help | grep -Eq '^  --tls-cert FILE ' &&
           '$BIN/client-agent' --help | grep -Eq '^  --tls-key FILE '"
"$BIN/client-agent" --data-dir "$T/t5" --operator-token-file "$T/op.token" --tls-cert "$CERT" \
  >/dev/null 2>"$T/t5.err"
rc=$?
check "agent --tls-cert without --tls-key: exit 2, '--tls-cert and --tls-key go together'" \
  bash -c "[ $rc -eq 2 ] && grep -q -- '--tls-cert and --tls-key go together' '$T/t5.err'"

# ---- the Makefile, on a tree of its own: a few small files in a temporary
# directory laid out like the repository (no .git there: the VERSION alone)
echo "== the Makefile (a miniature tree)"
M=$T/mini
mkdir -p "$M/lib/core" "$M/cli" "$M/services/demo" "$M/tests/unit" "$M/bench"
cp "$ROOT/Makefile" "$M/" && cp "$ROOT/lib/core/version.c" "$ROOT/lib/core/version.h" "$M/lib/core/"
printf '4.5.6\n' >"$M/VERSION"
printf 'int fs_mini(void);\nint fs_mini(void)\n{\n    return 1;\n}\n' >"$M/lib/core/mini.c"
main_c='#include <stdio.h>\n#include "core/version.h"\nint main(void)\n{\n    printf("%%s\\n", fs_version_string());\n    return 0;\n}\n'
for f in cli/main.c services/demo/main.c tests/unit/test_mini.c bench/bench_mini.c; do
  printf "$main_c" >"$M/$f"
done
mk() { make -C "$M" BUILD=b "$@"; }
compiles() { mk -n all tests benches 2>/dev/null | grep -E ' -c [^ ]+\.c' | sed 's/.* -c \([^ ]*\.c\).*/\1/' | sort | tr '\n' ' '; }
check "make all tests benches (miniature tree)" bash -c "$(declare -f mk); M='$M' mk -s all tests benches >'$T/mini.log' 2>&1"
check "the service, test and benchmark objects are kept after linking" \
  test -e "$M/b/obj/services/demo/main.o" -a -e "$M/b/obj/tests/unit/test_mini.o" -a -e "$M/b/obj/bench/bench_mini.o"
c=$(compiles)
check "make -n after make compiles nothing (make demo after make: '$c')" test -z "$c"
check "outside git, --version is VERSION alone ('$("$M/b/bin/demo")')" test "$("$M/b/bin/demo")" = 4.5.6
sleep 1.1 # a newer mtime than the objects, on any file system
touch "$M/lib/core/mini.c"
c=$(compiles)
check "a library change recompiles that file only ('$c')" test "$c" = "lib/core/mini.c "
mk -s all tests benches >/dev/null 2>&1
printf '4.5.7\n' >"$M/VERSION"
c=$(compiles)
check "a new version recompiles lib/core/version.c only ('$c')" test "$c" = "lib/core/version.c "
mk -s all tests benches >/dev/null 2>&1
check "... and every binary then reports it" \
  bash -c "[ \"\$('$M/b/bin/demo')\" = 4.5.7 ] && [ \"\$('$M/b/bin/fedsvd')\" = 4.5.7 ] &&
           [ \"\$('$M/b/tests/test_mini')\" = 4.5.7 ]"
finish
