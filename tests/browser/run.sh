#!/usr/bin/env bash
# The aggregation server's dashboard in a real browser: Debian's chromium
# (headless, `make deps`) driven by playwright-core (pinned in
# package-lock.json, `make browser-deps`), against real processes on
# loopback only:
#  - a test CA made here with openssl; the masking server and the aggregation
#    server over HTTPS with a certificate for IP 127.0.0.1 (chromium trusts
#    exactly that key, --ignore-certificate-errors-spki-list), 3 client agents;
#  - a 3-party fedpca job (240 x 20, k 3) that only parties 1 and 2 join: the
#    job page must name party 3 as the one the job waits for; then party 3
#    joins and the page must show the job done and the singular values, the
#    same numbers as GET /v1/jobs/{job}/result;
#  - the cancel button cancels a second job (the API then says failed);
#  - the token is typed once, kept in sessionStorage, never in any URL the
#    page loads or a cookie; the page, script and style carry a strict
#    Content-Security-Policy (no 'unsafe-inline'), nosniff, frame-ancestors
#    'none' and no referrer; no console error while the page is used, and an
#    inline script injected at the end is refused (the policy is enforced).
# Screenshots (list, job waiting for party 3, job done, job cancelled) go to
# <BIN_DIR>/../screenshots/.
#
#   tests/browser/run.sh [BIN_DIR]      (default build/bin)
# Ends with "browser: P passed, F failed"; exits non-zero on a failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "${1:-build/bin}" 2>/dev/null && pwd || echo "${1:-build/bin}")
F=$BIN/fedsvd
SHOTS=${SCREENSHOT_DIR:-$(dirname "$BIN")/screenshots}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
pass=0
failn=0
finish() {
  echo "browser: $pass passed, $failn failed"
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
[ -x "$CHROMIUM" ] || { echo "FAIL no $CHROMIUM (make deps installs Debian's chromium)"; failn=1; }
[ -d "$HERE/node_modules/playwright-core" ] ||
  { echo "FAIL no playwright-core: make browser-deps (npm ci in tests/browser)"; failn=1; }
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

ADMIN=dashboard-admin-token-0123456789abcdef
MADMIN=masking-admin-token-0123456789abc
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$MADMIN" >"$T/madmin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

# ---- a test CA and a server certificate for IP 127.0.0.1
{
  d=$T/pki
  mkdir -p "$d" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -keyout "$d/ca.key" -out "$d/ca.pem" -subj /CN=fedsvd-browser-test-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$d/srv.key" -out "$d/srv.csr" -subj /CN=127.0.0.1 &&
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
      >"$d/ext.cnf" &&
    openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
      -days 2 -extfile "$d/ext.cnf" -out "$d/srv.pem" &&
    chmod 600 "$d"/*.key
} >"$T/openssl.log" 2>&1
CA=$T/pki/ca.pem
TLS=(--tls-cert "$T/pki/srv.pem" --tls-key "$T/pki/srv.key")
# the base64 SHA-256 of the certificate's public key: the one key chromium accepts
SPKI=$(openssl x509 -in "$T/pki/srv.pem" -pubkey -noout 2>/dev/null |
  openssl pkey -pubin -outform der 2>/dev/null | openssl dgst -sha256 -binary | base64)
check "openssl: a test CA, a certificate for IP 127.0.0.1 and its key's SPKI hash" \
  test -s "$T/pki/srv.pem" -a -n "$SPKI"

# ---- the services
wait_port() {
  for _ in $(seq 200); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1" 2>/dev/null
}
"$BIN/masking-server" --listen 127.0.0.1:0 --port-file "$T/mport" --data-dir "$T/masking" \
  --admin-token-file "$T/madmin.token" "${TLS[@]}" 2>"$T/masking.log" &
PIDS+=($!)
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/sport" --data-dir "$T/server" \
  --admin-token-file "$T/admin.token" "${TLS[@]}" 2>"$T/server.log" &
PIDS+=($!)
for i in 1 2 3; do
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" --ca-file "$CA" --poll-ms 50 2>"$T/agent$i.log" &
  PIDS+=($!)
done
MURL=https://127.0.0.1:$(wait_port "$T/mport")
SURL=https://127.0.0.1:$(wait_port "$T/sport")
AURL=()
for i in 1 2 3; do AURL[$i]=http://127.0.0.1:$(wait_port "$T/port$i"); done
ready() { # URL [curl args]
  local u=$1; shift
  for _ in $(seq 200); do curl -sf "$@" "$u/readyz" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}
check "servers (HTTPS) and agents ready" bash -c "
  $(declare -f ready); ready '$MURL' --cacert '$CA' && ready '$SURL' --cacert '$CA' &&
  ready '${AURL[1]}' && ready '${AURL[2]}' && ready '${AURL[3]}'"

# ---- data, and the two jobs (each agent's identity pinned)
"$F" gen planted --rows 240 --cols 20 --rank 4 --noise 0.2 --seed 5 --out-dir "$T/d" --parties 3 \
  --split 60,100,80 >/dev/null 2>"$T/gen.err"
PK=()
for i in 1 2 3; do
  PK+=(--party-key "$i:$("$F" agent identity --agent "${AURL[$i]}" --token-file "$T/op.token" 2>>"$T/cli.err")")
done
create() { # NAME: a 3-party fedpca job, its invitations in $T/NAME/
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --ca-file "$CA" \
    --algorithm fedpca --k 3 --name "$1" "${PK[@]}" --shape 240,20 --party-sizes 60,100,80 \
    --masking-server "$MURL" --masking-token-file "$T/madmin.token" --round-timeout 60 \
    --join-timeout 600 --out-dir "$T/$1" --format json >"$T/$1.json" 2>>"$T/cli.err"
}
create hospitals && create to-cancel
JOB=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).job.id)' "$T/hospitals.json" 2>/dev/null)
JOB2=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).job.id)' "$T/to-cancel.json" 2>/dev/null)
check "fedsvd job create: two fedpca jobs ($JOB, $JOB2)" \
  bash -c "[[ '$JOB' =~ ^j-[0-9a-f]{32}\$ && '$JOB2' =~ ^j-[0-9a-f]{32}\$ ]]"
for i in 1 2 3; do
  printf '{"invitation": %s, "dataset": {"path": "%s"}}' "$(cat "$T/hospitals/invitation-$i.json")" \
    "$T/d/party-$i.npy" >"$T/join$i.json"
done
joined=0
for i in 1 2; do
  curl -s -H "Authorization: Bearer $OP" -H 'Content-Type: application/json' \
    --data-binary @"$T/join$i.json" -o "$T/join$i.out" -w '%{http_code}' "${AURL[$i]}/v1/participations" |
    grep -q '^201$' && joined=$((joined + 1))
done
check "parties 1 and 2 join (their agents accept the invitations)" [ "$joined" -eq 2 ]

# ---- the browser
mkdir -p "$SHOTS"
cat >"$T/config.json" <<EOF
{
  "url": "$SURL",
  "admin": "$ADMIN",
  "job": "$JOB",
  "job2": "$JOB2",
  "spki": "$SPKI",
  "chromium": "$CHROMIUM",
  "shots": "$SHOTS",
  "agent3": "${AURL[3]}",
  "op": "$OP",
  "join3": "$T/join3.json"
}
EOF
chmod 600 "$T/config.json"
NODE_EXTRA_CA_CERTS=$CA NODE_PATH=$HERE/node_modules timeout 150 node "$HERE/dashboard.mjs" "$T/config.json" \
  >"$T/browser.out" 2>&1
rc=$?
cat "$T/browser.out"
line=$(grep -E '^dashboard: [0-9]+ passed, [0-9]+ failed$' "$T/browser.out" | tail -n 1)
if [ -z "$line" ]; then
  failn=$((failn + 1))
  echo "FAIL dashboard.mjs did not finish (exit $rc)"
else
  p=$(echo "$line" | sed -E 's/dashboard: ([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
  pass=$((pass + p))
  failn=$((failn + f))
fi

# ---- after the browser: the API agrees, and the token was never logged
state() { curl -sf --cacert "$CA" -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$1" |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).state))'; }
check "the API says the first job is done" [ "$(state "$JOB")" = done ]
check "the API says the cancelled job failed" [ "$(state "$JOB2")" = failed ]
check "no token in the services' logs" \
  bash -c "! grep -qF -e '$ADMIN' -e '$OP' '$T'/*.log"
check "screenshots saved in $SHOTS" bash -c "
  for s in list detail-waiting detail-done detail-cancelled; do
    [ -s '$SHOTS/dashboard-'\$s.png ] || exit 1; done"
finish
