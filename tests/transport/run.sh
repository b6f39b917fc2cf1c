#!/usr/bin/env bash
# Transport security of the three services and the clients, with real
# processes on loopback only:
#  - a test CA made here with openssl (certificate for IP 127.0.0.1); all
#    three services over HTTPS; a whole fedsvd job runs over TLS with
#    --ca-file (the CLI, the agents' calls to both servers, curl to the
#    agents), and a CA that did not sign the certificate is refused;
#  - TLS versions: openssl s_client -tls1 and -tls1_1 fail to connect (the
#    client is allowed the old versions with @SECLEVEL=0, so it is the server
#    that refuses), -tls1_2 and -tls1_3 connect with an AEAD suite;
#  - plain HTTP off loopback: each service refuses to listen on 0.0.0.0
#    without TLS (exit 2, a clear message), starts with --insecure-http or
#    FEDSVD_INSECURE_HTTP=1 and warns in its log; the CLI and the agent
#    refuse http:// URLs to a host that is not loopback (192.0.2.1, a
#    documentation address) before any connection is tried;
#  - slow clients: with --max-connections 48 and --max-connections-per-ip 40,
#    50 connections from 127.0.0.1 that trickle their headers leave room for
#    a client on 127.0.0.2, and --request-timeout-s cuts them although they
#    keep sending;
#  - file modes: data directories 0700 (a 0755 one is tightened, with a
#    warning), server.db / masking.db / agent.db and their -wal/-shm 0600.
# No traffic is sent to any address outside 127.0.0.0/8.
#
#   tests/transport/run.sh [BIN_DIR]      (default build/bin)
# Ends with "transport: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
F=$BIN/fedsvd
pass=0
failn=0
finish() {
  echo "transport: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
HERE=$(cd "$(dirname "$0")" && pwd)
JLIB=$HERE/../lib/json.mjs
for b in fedsvd aggregation-server masking-server client-agent; do
  if [ ! -x "$BIN/$b" ]; then
    echo "FAIL $BIN/$b not built"
    failn=1
  fi
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

ADMIN=admin-token-0123456789abcdefghij
MADMIN=masking-admin-token-0123456789abc
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$MADMIN" >"$T/madmin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

# ---- a test CA and a certificate for 127.0.0.1 signed by it (and an unrelated CA)
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
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -keyout "$d/other.key" -out "$d/other.pem" -subj /CN=other-ca &&
    chmod 600 "$d"/*.key
} >"$T/openssl.log" 2>&1
check "openssl: a test CA and a certificate for IP 127.0.0.1" mkcerts
CA=$T/pki/ca.pem
CERT=$T/pki/srv.pem
KEY=$T/pki/srv.key
TLS=(--tls-cert "$CERT" --tls-key "$KEY")

# wait_port FILE: the port a service wrote, "" after 10 s
wait_port() {
  for _ in $(seq 200); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1" 2>/dev/null
}
ready() { # URL: /readyz answers over HTTPS with the test CA
  for _ in $(seq 200); do curl -sf --cacert "$CA" "$1/readyz" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}

# ---- the three services over TLS
"$BIN/masking-server" --listen 127.0.0.1:0 --port-file "$T/mport" --data-dir "$T/masking" \
  --admin-token-file "$T/madmin.token" "${TLS[@]}" 2>"$T/masking.log" &
PIDS+=($!)
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/aport" --data-dir "$T/server" \
  --admin-token-file "$T/admin.token" "${TLS[@]}" 2>"$T/server.log" &
PIDS+=($!)
mkdir -m 0755 "$T/agent1" # an existing data directory open to others: tightened at start
for i in 1 2 3; do
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" --ca-file "$CA" "${TLS[@]}" --poll-ms 50 \
    2>"$T/agent$i.log" &
  PIDS+=($!)
done
MURL=https://127.0.0.1:$(wait_port "$T/mport")
SURL=https://127.0.0.1:$(wait_port "$T/aport")
AURL=()
for i in 1 2 3; do AURL[$i]=https://127.0.0.1:$(wait_port "$T/port$i"); done
check "masking-server ready over HTTPS (test CA)" ready "$MURL"
check "aggregation-server ready over HTTPS (test CA)" ready "$SURL"
check "client-agents ready over HTTPS (test CA)" bash -c "
  for u in ${AURL[*]}; do for _ in \$(seq 200); do
    curl -sf --cacert '$CA' \"\$u/readyz\" >/dev/null 2>&1 && continue 2; sleep 0.05; done; exit 1; done"
check "a CA that did not sign the certificate is refused (curl)" \
  bash -c "! curl -sf --cacert '$T/pki/other.pem' '$SURL/readyz' >/dev/null 2>&1"

# ---- TLS versions (the client may use the old ones: only the server's refusal counts)
HP=${SURL#https://}
s_client() { # VERSION-FLAG [extra]: exit 0 when a session was negotiated
  local out
  out=$(echo | timeout 10 openssl s_client -connect "$HP" -CAfile "$CA" -verify_return_error \
    "$@" 2>&1)
  local rc=$?
  printf '%s\n' "$out" >>"$T/s_client.log"
  [ $rc -eq 0 ] && printf '%s' "$out" | grep -Eq '^ *(Protocol *:|New, TLSv)' &&
    ! printf '%s' "$out" | grep -q 'Cipher is (NONE)'
}
refused() { ! s_client "$@"; }
check "openssl s_client -tls1 fails (TLS 1.0 refused)" refused -tls1 -cipher DEFAULT@SECLEVEL=0
check "openssl s_client -tls1_1 fails (TLS 1.1 refused)" refused -tls1_1 -cipher DEFAULT@SECLEVEL=0
check "openssl s_client -tls1_2 connects" s_client -tls1_2
check "openssl s_client -tls1_3 connects" s_client -tls1_3
check "TLS 1.2: a forward-secret AEAD suite (ECDHE, GCM or ChaCha20)" bash -c "
  echo | timeout 10 openssl s_client -connect '$HP' -CAfile '$CA' -tls1_2 2>/dev/null |
    grep -qE 'Cipher *(is|:) *ECDHE-(ECDSA|RSA)-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)'"
check "TLS 1.2: a CBC suite is refused" bash -c "
  ! echo | timeout 10 openssl s_client -connect '$HP' -CAfile '$CA' -tls1_2 \
      -cipher ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA 2>/dev/null | grep -q 'Cipher is ECDHE'"
MHP=${MURL#https://}
check "masking-server: TLS 1.1 refused, TLS 1.2 accepted" bash -c "
  ! echo | timeout 10 openssl s_client -connect '$MHP' -CAfile '$CA' -tls1_1 \
      -cipher DEFAULT@SECLEVEL=0 2>/dev/null | grep -q 'New, TLSv' &&
  echo | timeout 10 openssl s_client -connect '$MHP' -CAfile '$CA' -tls1_2 2>/dev/null |
    grep -q 'New, TLSv1.2'"

# ---- a fedsvd job over TLS: the CLI to both servers and to the agents, the agents to both
D=$T/data
mkdir -p "$D"
"$F" gen powerlaw --rows 90 --cols 6 --seed 5 --out "$D/full.npy" --out-dir "$D/s" --parties 3 \
  >/dev/null 2>"$T/gen.err"
check "fedsvd gen: 3 parties of 30 x 6" test -s "$D/s/party-3.npy"
PK=()
for i in 1 2 3; do
  fpr=$("$F" agent identity --agent "${AURL[$i]}" --token-file "$T/op.token" --ca-file "$CA" \
    2>>"$T/cli.err")
  PK+=(--party-key "$i:$fpr")
done
check "fedsvd agent identity over HTTPS (--ca-file): three fingerprints" \
  bash -c "[ \$(printf '%s\n' \"\$@\" | grep -cE '^[1-3]:[0-9a-f]{64}\$') -eq 3 ]" _ \
  "${PK[1]}" "${PK[3]}" "${PK[5]}"
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --ca-file "$CA" \
  --algorithm fedsvd --shape 90,6 --party-sizes 30,30,30 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" "${PK[@]}" --out-dir "$T/inv" --format json \
  >"$T/create.json" 2>>"$T/cli.err"
check "fedsvd job create over HTTPS (--ca-file): a job and three invitations" \
  test -s "$T/inv/invitation-3.json"
JOB=$(node "$JLIB" get "$T/create.json" .job.id 2>/dev/null)
check "the invitations carry https:// URLs" grep -q "\"$SURL/v1/jobs/" "$T/inv/invitation-1.json"
IDS=()
for i in 1 2 3; do
  printf '{"invitation": %s, "dataset": {"path": "%s"}}' "$(cat "$T/inv/invitation-$i.json")" \
    "$D/s/party-$i.npy" >"$T/part$i.json"
  curl -s --cacert "$CA" -H "Authorization: Bearer $OP" -H 'Content-Type: application/json' \
    --data-binary @"$T/part$i.json" -o "$T/part$i.out" "${AURL[$i]}/v1/participations"
  IDS[$i]=$(node "$JLIB" get "$T/part$i.out" .id 2>/dev/null)
done
check "the agents accept the invitations over HTTPS" test -n "${IDS[3]}"
"$F" job watch --server "$SURL" --token-file "$T/admin.token" --ca-file "$CA" --job "$JOB" \
  --timeout 120 >"$T/watch.out" 2>>"$T/cli.err"
check "fedsvd job watch over HTTPS: the job is done" test $? -eq 0
parts_done() {
  local i
  for i in 1 2 3; do
    curl -sf --cacert "$CA" -H "Authorization: Bearer $OP" \
      "${AURL[$i]}/v1/participations/${IDS[$i]}" | grep -Eq '"state": *"done"' || return 1
  done
}
# the job is done once the server has published; each agent then fetches the
# result and recovers its own factor, so give them a moment
for _ in $(seq 300); do parts_done && break; sleep 0.1; done
check "each agent's participation is done (the agents talked to both servers over TLS)" parts_done
"$F" job result --server "$SURL" --token-file "$T/admin.token" --ca-file "$CA" --job "$JOB" \
  --out "$T/result" >/dev/null 2>>"$T/cli.err"
check "fedsvd job result over HTTPS: the result files downloaded and checked" \
  bash -c "ls '$T/result'/*.npy >/dev/null 2>&1"
"$F" job status --server "$SURL" --token-file "$T/admin.token" --job "$JOB" >/dev/null 2>"$T/noca.err"
check "without --ca-file the CLI refuses the server's certificate" \
  bash -c "[ $? -ne 0 ] && grep -qi 'certificate\|TLS\|verif' '$T/noca.err'"

# ---- file modes after the job
mode() { stat -c '%a' "$1"; }
modes_ok() {
  local f bad=0
  for f in "$T/server" "$T/masking" "$T/agent1" "$T/agent2" "$T/agent3"; do
    [ "$(mode "$f")" = 700 ] || { echo "     $f: $(mode "$f")"; bad=1; }
  done
  for f in "$T/server/server.db" "$T/masking/masking.db" "$T"/agent?/agent.db; do
    for s in "" -wal -shm; do
      [ -e "$f$s" ] || { [ -z "$s" ] && { echo "     $f missing"; bad=1; }; continue; }
      [ "$(mode "$f$s")" = 600 ] || { echo "     $f$s: $(mode "$f$s")"; bad=1; }
    done
  done
  return $bad
}
check "data directories 0700, databases and their -wal/-shm 0600 (all three services)" modes_ok
check "... with -wal and -shm present" test -e "$T/server/server.db-wal" -a -e "$T/server/server.db-shm"
check "no file of the aggregation server readable by others" \
  bash -c "[ -z \"\$(find '$T/server' -perm /077 | head -n 3)\" ]"
check "a 0755 data directory was tightened, with a warning" \
  grep -q 'data directory was open to other users: made it private' "$T/agent1.log"

# ---- clients refuse plain HTTP to hosts that are not loopback (nothing is sent there)
# Binaries without the rule would try to connect: then these checks fail
# without running anything.
if ! "$F" job status --help 2>/dev/null | grep -q -- --insecure-http ||
  ! "$BIN/client-agent" --help 2>/dev/null | grep -q -- --insecure-http; then
  check "the CLI and the agent know --insecure-http (the client checks are skipped)" false
else
t0=$(date +%s%N)
"$F" job status --server http://192.0.2.1:1 --token-file "$T/admin.token" --job x \
  >/dev/null 2>"$T/cli-http.err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "fedsvd job status --server http://192.0.2.1:1 is refused at once (${ms} ms)" \
  bash -c "[ $rc -ne 0 ] && [ $ms -lt 1500 ] && grep -q 'not a loopback address' '$T/cli-http.err'"
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --ca-file "$CA" \
  --algorithm secure-sum --parties 3 --shape 2,2 --allow-unpinned \
  --public-url http://192.0.2.1:1 >/dev/null 2>"$T/cli-pub.err"
check "fedsvd job create --public-url http://192.0.2.1:1 is refused" \
  bash -c "[ $? -eq 2 ] && grep -q -- '--public-url: refusing plain HTTP' '$T/cli-pub.err'"
check "fedsvd agent identity --agent http://192.0.2.1:1 is refused" bash -c "
  ! '$F' agent identity --agent http://192.0.2.1:1 --token-file '$T/op.token' 2>'$T/cli-agent.err' &&
  grep -q 'not a loopback address' '$T/cli-agent.err'"
# an invitation naming a plain-HTTP server elsewhere: 422 from the agent
node --input-type=module - "$JLIB" "$T/part1.json" "$T/part-http.json" <<'EOF'
import fs from 'node:fs';
const [lib, src, dst] = process.argv.slice(2);
const { readJson } = await import(lib);
const b = readJson(src);
b.invitation.job_url = b.invitation.job_url.replace(/^https:\/\/127\.0\.0\.1:[0-9]+/, 'http://192.0.2.1:1');
fs.writeFileSync(dst, JSON.stringify(b));
EOF
code=$(curl -s --cacert "$CA" -H "Authorization: Bearer $OP" -H 'Content-Type: application/json' \
  --data-binary @"$T/part-http.json" -o "$T/part-http.out" -w '%{http_code}' \
  "${AURL[1]}/v1/participations")
check "client-agent refuses an invitation with job_url http://192.0.2.1:1 (422)" \
  bash -c "[ '$code' = 422 ] && grep -q 'not a loopback address' '$T/part-http.out' &&
           grep -q 'insecure-http' '$T/part-http.out'"
fi

# ---- services refuse plain HTTP on a non-loopback address (0.0.0.0); no traffic is sent
refuses() { # NAME ARGS...: exit 2, says why, listens nowhere
  local name=$1; shift
  timeout 10 "$BIN/$name" --listen 0.0.0.0:0 --port-file "$T/$name.p0" --data-dir "$T/$name.d0" \
    "$@" >"$T/$name.refuse.out" 2>&1
  [ $? -eq 2 ] && [ ! -e "$T/$name.p0" ] &&
    grep -q 'refusing to listen on 0.0.0.0 without TLS' "$T/$name.refuse.out" &&
    grep -q -- '--insecure-http' "$T/$name.refuse.out"
}
starts_warned() { # NAME VIA ARGS...: starts with --insecure-http (flag or env), warns
  local name=$1 via=$2 pid port; shift 2
  rm -f "$T/$name.p1"
  if [ "$via" = env ]; then
    FEDSVD_INSECURE_HTTP=1 "$BIN/$name" --listen 0.0.0.0:0 --port-file "$T/$name.p1" \
      --data-dir "$T/$name.d1" "$@" 2>"$T/$name.insecure.log" &
  else
    "$BIN/$name" --listen 0.0.0.0:0 --insecure-http --port-file "$T/$name.p1" \
      --data-dir "$T/$name.d1" "$@" 2>"$T/$name.insecure.log" &
  fi
  pid=$!
  port=$(wait_port "$T/$name.p1")
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  [ -n "$port" ] && grep -q '"level":"warn","msg":"plain HTTP on a non-loopback address' \
    "$T/$name.insecure.log"
}
starts_tls() { # NAME ARGS...: TLS on 0.0.0.0 needs no flag and gives no warning
  local name=$1 pid port; shift
  rm -f "$T/$name.p2"
  "$BIN/$name" --listen 0.0.0.0:0 --port-file "$T/$name.p2" --data-dir "$T/$name.d2" \
    "${TLS[@]}" "$@" 2>"$T/$name.tls.log" &
  pid=$!
  port=$(wait_port "$T/$name.p2")
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  [ -n "$port" ] && ! grep -q 'plain HTTP' "$T/$name.tls.log"
}
SRVARGS=(--admin-token-file "$T/admin.token")
AGARGS=(--operator-token-file "$T/op.token")
check "aggregation-server refuses 0.0.0.0 without TLS (exit 2)" refuses aggregation-server "${SRVARGS[@]}"
check "masking-server refuses 0.0.0.0 without TLS (exit 2)" refuses masking-server "${SRVARGS[@]}"
check "client-agent refuses 0.0.0.0 without TLS (exit 2)" refuses client-agent "${AGARGS[@]}"
check "aggregation-server: --insecure-http starts it, with a warning" \
  starts_warned aggregation-server flag "${SRVARGS[@]}"
check "masking-server: FEDSVD_INSECURE_HTTP=1 starts it, with a warning" \
  starts_warned masking-server env "${SRVARGS[@]}"
check "client-agent: --insecure-http starts it, with a warning" \
  starts_warned client-agent flag "${AGARGS[@]}"
check "aggregation-server: with TLS, 0.0.0.0 needs no flag (no warning)" \
  starts_tls aggregation-server "${SRVARGS[@]}"

# ---- slow clients: a per-IP cap and a whole-request deadline (plain HTTP on loopback)
rm -f "$T/sport"
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/sport" --data-dir "$T/slow" \
  --admin-token-file "$T/admin.token" --max-connections 48 --max-connections-per-ip 40 \
  --request-timeout-s 2 --threads 2 2>"$T/slow.log" &
PIDS+=($!)
SPORT=$(wait_port "$T/sport")
node --input-type=module - "$SPORT" >"$T/slow.json" 2>"$T/slow.err" <<'EOF'
import net from 'node:net';
const port = Number(process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const socks = [];
for (let i = 0; i < 50; i++) {
  const s = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.1' });
  s.info = { closedAt: null };
  s.on('error', () => {});
  s.on('close', () => { s.info.closedAt = Date.now() - t0; });
  s.on('connect', () => s.write('GET /readyz HTTP/1.1\r\nHost: t\r\n'));
  socks.push(s);
}
// every 250 ms each open connection sends one more header byte
const timer = setInterval(() => { for (const s of socks) if (s.info.closedAt === null) s.write('X'); }, 250);
await sleep(500);
const refused = socks.filter((s) => s.info.closedAt !== null).length;
// another client (127.0.0.2) asks for /readyz
const other = await new Promise((resolve) => {
  const c0 = Date.now();
  let buf = '';
  const c = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' }, () =>
    c.write('GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'));
  c.setTimeout(3000, () => { c.destroy(); resolve({ status: 0, ms: Date.now() - c0 }); });
  c.on('data', (d) => { buf += d; });
  c.on('error', () => resolve({ status: -1, ms: Date.now() - c0 }));
  c.on('close', () => resolve({ status: Number(buf.slice(9, 12)) || 0, ms: Date.now() - c0 }));
});
await sleep(3500 - (Date.now() - t0));
clearInterval(timer);
const held = socks.filter((s) => s.info.closedAt === null || s.info.closedAt > 500);
const cut = held.filter((s) => s.info.closedAt !== null).map((s) => s.info.closedAt);
for (const s of socks) s.destroy();
console.log(JSON.stringify({ refused, held: held.length, other, cut: cut.length,
  cut_min: Math.min(...cut), cut_max: Math.max(...cut) }));
EOF
cat "$T/slow.json"
sj() { node "$JLIB" get "$T/slow.json" "$1"; }
check "50 trickling connections from 127.0.0.1: the 10 over --max-connections-per-ip 40 are closed" \
  test "$(sj .refused)" = 10
check "... while they hold 40 of --max-connections 48, a client on 127.0.0.2 is served at once" \
  bash -c "[ '$(sj .other.status)' = 200 ] && [ '$(sj .other.ms)' -lt 1500 ]"
check "--request-timeout-s 2 cuts all 40 though they keep sending (after 1.5..3.4 s)" \
  bash -c "[ '$(sj .cut)' = 40 ] && [ '$(sj .cut_min)' -ge 1500 ] && [ '$(sj .cut_max)' -le 3400 ]"
check "... and logs it" grep -q 'request too slow: connection closed' "$T/slow.log"
check "the server still serves afterwards" curl -sf "http://127.0.0.1:$SPORT/readyz" -o /dev/null

# ---- nothing secret in the logs
check "no token in any log" bash -c "! grep -l -e '$ADMIN' -e '$MADMIN' -e '$OP' '$T'/*.log"
finish
