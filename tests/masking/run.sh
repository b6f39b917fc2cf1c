#!/usr/bin/env bash
# masking-server against the real binary on 127.0.0.1 with curl
# (docs/wire-fedsvd.md): configuration (flags, FEDSVD_* variables, --help),
# health/metrics/openapi, creating a mask set (each party pinned to an
# identity key), each party downloading its own keys with requests signed by
# its identity (the manifest and every .npy file, checked for dtype, shape and
# SHA-256; the files come from the key cache, not a new generation), every
# error reply (401/403/404/400/409/410/413/415/422, also on the key files; no
# bearer token, the admin's included, fetches keys; another party's identity,
# a bad signature or a stale timestamp is refused), the end token deleting the
# mask set, ttl_s expiry, logs free of tokens, SIGTERM exit 0, a restart
# serving identical keys, DELETE destroying the seed, health answering
# while a large slab is being generated, and --insecure-test-mask-seed
# (refused off loopback, announced, an equal master seed for an equal shape).
# The numeric checks (slabs stack to an orthogonal A, B from its seed, a whole
# FedSVD on the served keys) are in tests/unit/test_masksrv_e2e.c.
#
#   tests/masking/run.sh [BIN_DIR]      (default build/bin)
# Ends with "masking: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
SRV=$BIN/masking-server
pass=0
failn=0
finish() {
  echo "masking: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
HERE=$(cd "$(dirname "$0")" && pwd)
JLIB=$HERE/../lib/json.mjs
RS=$HERE/../lib/reqsig.mjs
if [ ! -x "$SRV" ] || ! command -v curl >/dev/null || ! command -v node >/dev/null; then
  echo "FAIL need $SRV, curl and node"
  failn=1
  finish
fi

T=$(mktemp -d)
SPID=
cleanup() {
  [ -n "$SPID" ] && kill -TERM "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT

ADMIN=masking-admin-token-0123456789abcdef
printf '%s\n' "$ADMIN" >"$T/admin.token"
chmod 600 "$T/admin.token"
# identity keys: k<i> pins party i of the specs post_spec sends, o<i> those of a second set
FP=()
OFP=()
for i in 1 2 3 4 5; do
  node "$RS" keygen "$T/k$i" && node "$RS" keygen "$T/o$i"
  FP[$i]=$(node "$RS" fpr "$T/k$i")
  OFP[$i]=$(node "$RS" fpr "$T/o$i")
done
DATA=$T/data
LOG=$T/server.log

# ---- configuration
"$SRV" --help >"$T/help.txt" 2>&1
check "--help exits 0" test $? -eq 0
check "--help lists every flag and variable" bash -c '
  for f in --listen --data-dir --admin-token-file --port-file --log-level --max-parties --max-dim \
           --max-key-bytes --keygen-concurrency --keys-cache-bytes --keys-cache-ttl-s \
           --max-connections --shutdown-grace-ms --openapi \
           --tls-cert --tls-key --fsync FEDSVD_LISTEN FEDSVD_DATA_DIR FEDSVD_ADMIN_TOKEN_FILE \
           FEDSVD_MAX_PARTIES FEDSVD_MAX_DIM FEDSVD_PORT_FILE 127.0.0.1:8445; do
    grep -q -- "$f" "$1" || { echo "missing $f"; exit 1; }
  done' _ "$T/help.txt"
"$SRV" --no-such-flag 2>/dev/null
check "unknown flag exits 2" test $? -eq 2
"$SRV" --data-dir "$T/x" 2>/dev/null
check "missing --admin-token-file exits 2" test $? -eq 2
FEDSVD_MAX_DIM=abc "$SRV" --admin-token-file "$T/admin.token" 2>/dev/null
check "bad FEDSVD_MAX_DIM exits 2" test $? -eq 2

# Started from the environment only (flags are tested by the unit e2e test).
start() {
  rm -f "$T/port"
  FEDSVD_LISTEN=127.0.0.1:0 FEDSVD_PORT_FILE="$T/port" FEDSVD_DATA_DIR="$DATA" \
  FEDSVD_ADMIN_TOKEN_FILE="$T/admin.token" FEDSVD_MAX_PARTIES=4 FEDSVD_MAX_DIM=100000 \
  FEDSVD_MAX_KEY_BYTES=400000000 FEDSVD_LOG_LEVEL=debug \
    "$SRV" 2>>"$LOG" &
  SPID=$!
  for _ in $(seq 400); do [ -s "$T/port" ] && break; sleep 0.025; done
  U=http://127.0.0.1:$(cat "$T/port" 2>/dev/null)
  for _ in $(seq 200); do curl -sf "$U/readyz" >/dev/null 2>&1 && return 0; sleep 0.025; done
  return 1
}
stop() { # -> exit status of the server
  kill -TERM "$SPID"
  wait "$SPID"
  local st=$?
  SPID=
  return $st
}
check "starts from FEDSVD_* variables, writes the port file" start

# req METHOD PATH TOKEN [curl args...]: sets CODE, body in $T/body, headers in $T/hdr
req() {
  local m=$1 p=$2 tok=$3; shift 3
  local auth=()
  [ -n "$tok" ] && auth=(-H "Authorization: Bearer $tok")
  CODE=$(curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$m" "${auth[@]}" "$@" "$U$p")
}
# with_ids JSON FPR...: each party object without "identity" gets FPR[party] (JSON that
# does not parse is passed through)
with_ids() {
  node -e 'let j; try { j = JSON.parse(process.argv[1]); } catch (e) { console.log(process.argv[1]); process.exit(0); }
    const f = process.argv.slice(2);
    if (j && Array.isArray(j.parties)) for (const p of j.parties)
      if (p && typeof p === "object" && Number.isInteger(p.party) && !("identity" in p) && f[p.party - 1]) p.identity = f[p.party - 1];
    console.log(JSON.stringify(j));' "$@"
}
post_spec() { # TOKEN JSON: parties pinned to k1..k5 (IDS=o: to o1..o5)
  local ids=("${FP[@]:1}")
  [ "${IDS:-}" = o ] && ids=("${OFP[@]:1}")
  req POST /v1/masksets "$1" -H 'Content-Type: application/json' --data-binary "$(with_ids "$2" "${ids[@]}")"
}
post_raw() { # TOKEN JSON: as is
  req POST /v1/masksets "$1" -H 'Content-Type: application/json' --data-binary "$2"
}
# sreq KEYFILE PARTY PATH [TS]: GET PATH signed with KEYFILE's identity as PARTY (ts: now)
sreq() {
  local id=${3#/v1/masksets/}
  id=${id%%/*}
  CODE=$(curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' \
    -H "Authorization: $(node "$RS" header "$1" GET "$3" "$id" "$2" ${4:-})" "$U$3")
}
# jget PATH: a field of the JSON in $T/body (tests/lib/json.mjs get: .a.b[0], [*], .length)
jget() { node "$JLIB" get "$T/body" "$1"; }
is_problem() { # STATUS CODE
  [ "$CODE" = "$1" ] && grep -qi '^content-type: application/problem+json' "$T/hdr" &&
    [ "$(jget ".code")" = "$2" ] && [ "$(jget ".status")" = "$1" ]
}
expect() { # NAME STATUS CODE -- after a req
  local name=$1 st=$2 code=$3
  if is_problem "$st" "$code"; then check "$name" true; else
    echo "     got $CODE: $(head -c 300 "$T/body")"; check "$name" false; fi
}

# schema NAME FILE WHAT: the JSON in FILE matches openapi.yaml's
# components/schemas/NAME ("list:NAME": {"masksets": [NAME]}), JSON Schema
# 2020-12 with ajv (tests/lib/json.mjs schema). js-yaml and ajv are pinned in
# tests/contract/package.json; without them (make contract-deps) the check fails.
OPENAPI=$HERE/../../openapi.yaml
schema() {
  local out rc
  out=$(node "$JLIB" schema "$OPENAPI" "$1" "$2" 2>&1)
  rc=$?
  [ -n "$out" ] && echo "$out"
  check "matches the OpenAPI schema $1 ($3)" test $rc -eq 0
}

# ---- health, metrics, openapi
req GET /healthz ""
check "healthz 200" test "$CODE" = 200
req GET /readyz ""
check "readyz 200" test "$CODE" = 200
req GET /metrics ""
check "metrics (Prometheus text)" bash -c '[ "$1" = 200 ] && grep -q "^fedsvd_masksets{state=\"active\"} 0" "$2" &&
  grep -q "^# TYPE fedsvd_mask_keygen_seconds summary" "$2"' _ "$CODE" "$T/body"
req GET /openapi.yaml ""
check "openapi.yaml served and describes /v1/masksets" bash -c '[ "$1" = 200 ] && grep -q "/v1/masksets/{maskset}/parties/{party}/keys:" "$2"' _ "$CODE" "$T/body"

# ---- create
SPEC='{"job_id":"j-00112233445566778899aabbccddeeff","partition":"samples","parties":[{"party":1,"rows":30},{"party":2,"rows":45},{"party":3,"rows":25}],"cols":16}'
post_spec "$ADMIN" "$SPEC"
check "create 201" test "$CODE" = 201
cp "$T/body" "$T/created.json"
schema MaskSetCreated "$T/created.json" "create response"
with_ids "$SPEC" "${FP[@]:1}" >"$T/spec.json"
schema MaskSetSpec "$T/spec.json" "the request"
ID=$(jget ".maskset.id")
END1=$(jget ".end_token")
KB1=$(jget ".maskset.parties[0].key_bytes")
check "create: Location header" grep -qi "^location: /v1/masksets/$ID" "$T/hdr"
check "create: id and a 43-char end token" bash -c '[[ "$1" =~ ^m-[0-9a-f]{32}$ ]] && [ ${#2} -eq 43 ]' _ "$ID" "$END1"
check "create: no credential for keys in the response (no mask_token)" bash -c '! grep -q mask_token "$1"' _ "$T/created.json"
check "create: keys_url, pinned identities and status fields" node - "$T/created.json" "$U" "${FP[1]}" "${FP[2]}" "${FP[3]}" <<'JS'
const assert = require('node:assert');
const d = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
const base = process.argv[3];
const fps = process.argv.slice(4);
const m = d.maskset;
assert.deepStrictEqual(d.parties.map((p) => p.identity), fps);
assert.deepStrictEqual(m.parties.map((p) => p.identity), fps);
assert(/^\d{4}-\d\d-\d\dT/.test(m.expires_at) &&
  Date.parse(m.expires_at) - Date.parse(m.created_at) === 7 * 86400 * 1000, m.expires_at);
assert.deepStrictEqual([m.state, m.partition, m.shape], ['active', 'samples', [100, 16]]);
assert.deepStrictEqual(m.block_size, { partitioned: 100, shared: 16 });
assert.deepStrictEqual(m.parties.map((p) => p.offset), [0, 30, 75]);
assert.deepStrictEqual(m.parties.map((p) => p.rows), [30, 45, 25]);
assert(m.parties.every((p) => p.downloads === 0 && p.first_download_at === null), JSON.stringify(m.parties));
d.parties.forEach((p, i) =>
  assert.strictEqual(p.keys_url, `${base}/v1/masksets/${m.id}/parties/${i + 1}/keys`));
JS
SEED=$DATA/seeds/$ID.seed
check "seed file 0600, 32 bytes, data dir 0700" bash -c '[ "$(stat -c %a "$1")" = 600 ] && [ "$(stat -c %s "$1")" = 32 ] && [ "$(stat -c %a "$2")" = 700 ] && [ "$(stat -c %a "$2/masking.db")" = 600 ]' _ "$SEED" "$DATA"

# ---- keys: each party its own (a JSON manifest and two .npy files per slab piece)
# fetch_files MANIFEST KEYFILE DIR [QUERY]: every file of the manifest into DIR/<piece>-<name>,
# each request signed by KEYFILE's identity; fails unless each answers 200 application/x-npy
fetch_files() {
  local man=$1 key=$2 dir=$3 q=${4:-} n f party
  mkdir -p "$dir"
  party=$(node "$JLIB" get "$man" .party)
  for f in $(node -e 'const m = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
      for (const p of m.pieces) console.log(p.rows_file.name + " " + p.block_file.name);' "$man"); do
    n=${f//\//-}
    sreq "$key" "$party" "/v1/masksets/$(node "$JLIB" get "$man" .maskset)/parties/$party/keys/$f$q"
    [ "$CODE" = 200 ] && grep -qi '^content-type: application/x-npy' "$T/hdr" || { echo "     $f: $CODE"; return 1; }
    cp "$T/body" "$dir/$n"
  done
}
# npy_ok MANIFEST DIR: every file parses as .npy with the manifest's dtype, order, shape,
# length and SHA-256; row indices are distinct and < m, blocks finite; the pieces
# cover the party's range
npy_ok() {
  node - "$1" "$2" <<'JS'
const fs = require('node:fs');
const assert = require('node:assert');
const crypto = require('node:crypto');
const m = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const dir = process.argv[3];
const rowsOfA = m.partition === 'samples' ? m.rows : m.cols;
function npy(buf) {
  assert(buf.subarray(0, 6).equals(Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59])), 'magic');
  assert.strictEqual(buf[6], 1);
  const hl = buf.readUInt16LE(8);
  assert.strictEqual((10 + hl) % 64, 0, 'header padded to 64');
  const h = buf.subarray(10, 10 + hl).toString('latin1');
  const descr = /'descr': '([^']*)'/.exec(h)[1];
  const fortran = /'fortran_order': (True|False)/.exec(h)[1] === 'True';
  const shape = /'shape': \(([^)]*)\)/.exec(h)[1].split(',').map((x) => x.trim()).filter((x) => x).map(Number);
  return { descr, fortran, shape, data: buf.subarray(10 + hl) };
}
let col = m.offset;
for (const p of m.pieces) {
  assert.strictEqual(p.col0, col);
  col += p.c;
  for (const f of [p.rows_file, p.block_file]) {
    const buf = fs.readFileSync(`${dir}/${f.name.replace('/', '-')}`);
    assert.strictEqual(buf.length, f.bytes, f.name);
    assert.strictEqual(crypto.createHash('sha256').update(buf).digest('hex'), f.sha256, f.name);
    const a = npy(buf);
    assert.deepStrictEqual([a.descr, a.fortran, a.shape], [f.dtype, f.fortran_order, f.shape], f.name);
    const words = a.shape.reduce((x, y) => x * y, 1);
    assert.strictEqual(a.data.length, 8 * words, f.name);
    if (f === p.rows_file) {
      assert.deepStrictEqual(f.shape, [p.r]);
      const rows = new Set();
      for (let i = 0; i < words; i++) rows.add(Number(a.data.readBigUInt64LE(8 * i)));
      assert(rows.size === p.r && [...rows].every((r) => r < rowsOfA), 'rows distinct and < m');
    } else {
      assert.deepStrictEqual(f.shape, [p.r, p.c]);
      for (let i = 0; i < words; i++) assert(Number.isFinite(a.data.readDoubleLE(8 * i)));
    }
  }
}
assert.strictEqual(col, m.offset + m.size, 'pieces cover the range');
JS
}
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys"
cp "$T/body" "$T/man1.json"
check "party 1 gets its keys manifest (200, JSON)" bash -c '[ "$1" = 200 ] && grep -qi "^content-type: application/json" "$2"' _ "$CODE" "$T/hdr"
schema KeysManifest "$T/man1.json" "keys manifest"
KID1=$(jget .keys_id)
check "keys: X-Fedsvd-Job-Id, X-Fedsvd-Keys-Id and Cache-Control: no-store" bash -c 'grep -qi "^x-fedsvd-job-id: j-00112233445566778899aabbccddeeff" "$1" && grep -qi "^x-fedsvd-keys-id: $2" "$1" && grep -qi "^cache-control: no-store" "$1"' _ "$T/hdr" "$KID1"
check "manifest: party, geometry, seeds, one piece, bytes = key_bytes" node - "$T/man1.json" "$KB1" "$ID" <<'JS'
const assert = require('node:assert');
const m = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
assert.deepStrictEqual([m.job_id, m.maskset, m.party, m.parties, m.partition, m.rows, m.cols, m.offset, m.size, m.block_size_shared],
  ['j-00112233445566778899aabbccddeeff', process.argv[4], 1, 3, 'samples', 100, 16, 0, 30, 16]);
assert(/^[0-9a-f]{64}$/.test(m.keys_id) && /^[A-Za-z0-9_-]{43}$/.test(m.b_seed) && /^[A-Za-z0-9_-]{43}$/.test(m.group_key));
assert.strictEqual(m.pieces.length, 1);
const p = m.pieces[0];
assert.deepStrictEqual([p.piece, p.block, p.col0, p.r, p.c, p.rows_file.name, p.block_file.name], [0, 0, 0, 100, 30, '0/rows.npy', '0/block.npy']);
assert.strictEqual(m.bytes, Number(process.argv[3]));
assert.strictEqual(p.rows_file.bytes + p.block_file.bytes, m.bytes);
JS
check "party 1 fetches every .npy file of its manifest" fetch_files "$T/man1.json" "$T/k1" "$T/files1"
check "each .npy parses with the manifest's dtype, order, shape, length and SHA-256" npy_ok "$T/man1.json" "$T/files1"
req GET /metrics ""
check "manifest and files came from one generation (the files are cached, not regenerated)" bash -c 'grep -q "^fedsvd_mask_keygen_seconds_count 1$" "$1" && grep -q "^fedsvd_mask_keys_cache_entries 0$" "$1"' _ "$T/body"
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys/0/block.npy?keys_id=$KID1"
check "a file fetched again once the party had all: generated again, bit-identical" bash -c '[ "$1" = 200 ] && cmp -s "$2" "$3"' _ "$CODE" "$T/body" "$T/files1/0-block.npy"
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys/0/rows.npy?keys_id=$(printf '0%.0s' $(seq 64))"
expect "a file of other keys (keys_id differs): 409" 409 conflict
sreq "$T/k2" 2 "/v1/masksets/$ID/parties/2/keys"
cp "$T/body" "$T/man2.json"
check "party 2 gets its keys" test "$CODE" = 200
fetch_and_check() { fetch_files "$1" "$2" "$3" && npy_ok "$1" "$3"; }
check "party 2 fetches its files, which parse and match" fetch_and_check "$T/man2.json" "$T/k2" "$T/files2"
check "the parties share B's seed and the group key, not the slab" node - "$T/man1.json" "$T/man2.json" <<'JS'
const fs = require('node:fs');
const [a, b] = process.argv.slice(2).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
process.exit(a.b_seed === b.b_seed && a.group_key === b.group_key && a.keys_id !== b.keys_id &&
  a.pieces[0].block_file.sha256 !== b.pieces[0].block_file.sha256 && b.offset === 30 && b.size === 45 ? 0 : 1);
JS

# ---- keys: who may not
K1=/v1/masksets/$ID/parties/1/keys
sreq "$T/k2" 2 "$K1"
expect "party 2's identity on party 1's keys (signed as party 2): 403" 403 forbidden
check "  ... the detail names whose identity it is" grep -q "signed by party 2's identity" "$T/body"
sreq "$T/k2" 1 "$K1"
expect "party 2's identity on party 1's keys (claiming party 1): 401" 401 unauthorized
schema Problem "$T/body" "a 401"
check "401 carries WWW-Authenticate: Fedsvd-Sig" grep -qi '^www-authenticate: fedsvd-sig' "$T/hdr"
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/3/keys"
expect "party 1's identity (signed as party 1) on party 3's keys: 403" 403 forbidden
schema Problem "$T/body" "a 403"
sreq "$T/o1" 1 "$K1"
expect "an identity the mask set does not pin: 401" 401 unauthorized
sreq "$T/k1" 1 "$K1" $(($(date +%s) - 301))
expect "a signature 301 s old: 401" 401 unauthorized
check "  ... the detail says the clock" grep -q "clock" "$T/body"
sreq "$T/k1" 1 "$K1" $(($(date +%s) + 400))
expect "a signature 400 s in the future: 401" 401 unauthorized
H=$(node "$RS" header "$T/k1" GET "/v1/masksets/$ID/parties/1/keys/0/rows.npy" "$ID" 1)
req GET "$K1" "" -H "Authorization: $H"
expect "a signature of another route (a key file) on the manifest: 401" 401 unauthorized
req GET "$K1" "" -H "Authorization: ${H%?}$( [ "${H: -1}" = 0 ] && echo 1 || echo 0)"
expect "a signature with one hex digit changed: 401" 401 unauthorized
req GET "$K1" "" -H "Authorization: Fedsvd-Sig party=1,ts=1,nonce=00,sig=00"
expect "a malformed Fedsvd-Sig header: 401" 401 unauthorized
req GET "$K1" "$ADMIN"
expect "the admin token cannot download keys: 403" 403 forbidden
req GET "$K1" "$END1"
expect "the end token cannot download keys: 403" 403 forbidden
req GET "$K1" "made-up-token-0123456789abcdef"
expect "any bearer token: 403" 403 forbidden
req GET "$K1" ""
expect "no Authorization: 401" 401 unauthorized
req GET "$K1" "" -H "Authorization: Basic dXNlcjpwYXNz"
expect "other auth scheme: 401" 401 unauthorized
sreq "$T/k1" 1 "/v1/masksets/m-00000000000000000000000000000000/parties/1/keys"
expect "unknown mask set, signed: 401" 401 unauthorized
sreq "$T/k1" 1 "/v1/masksets/not-an-id/parties/1/keys"
expect "malformed mask set id, signed: 401" 401 unauthorized
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/0/keys"
expect "party 0: 403" 403 forbidden
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/abc/keys"
expect "party abc: 403" 403 forbidden
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/4/keys"
expect "party 4 of 3: 403" 403 forbidden
req POST "$K1" ""
check "POST on keys: 405" test "$CODE" = 405
F1=/v1/masksets/$ID/parties/1/keys/0
sreq "$T/k2" 2 "$F1/block.npy"
expect "party 2's identity on party 1's block.npy: 403" 403 forbidden
sreq "$T/k3" 1 "$F1/rows.npy"
expect "party 3's identity claiming party 1 on party 1's rows.npy: 401" 401 unauthorized
sreq "$T/k2" 2 "/v1/masksets/$ID/parties/2/keys/0/rows.npy"
check "party 2's own rows.npy: 200" test "$CODE" = 200
req GET "$F1/block.npy" "$ADMIN"
expect "the admin token cannot download a key file: 403" 403 forbidden
req GET "$F1/rows.npy" ""
expect "key file without Authorization: 401" 401 unauthorized
req GET "$F1/rows.npy" "made-up-token-0123456789abcdef"
expect "key file with a bearer token: 403" 403 forbidden
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys/1/block.npy"
expect "piece index out of range: 404" 404 not_found
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys/abc/rows.npy"
expect "piece index not a number: 404" 404 not_found
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys/00/rows.npy"
expect "piece index with a leading zero: 404" 404 not_found
req GET "/v1/masksets/$ID/parties/1/keys/0/other.npy" ""
check "unknown key file name: 404" test "$CODE" = 404
req POST "$F1/rows.npy" ""
check "POST on a key file: 405" test "$CODE" = 405

# a second mask set (pinned to other identities): its parties do not open the first
IDS=o post_spec "$ADMIN" '{"job_id":"j-other","partition":"features","parties":[{"party":1,"cols":3},{"party":2,"cols":4}],"rows":9}'
check "features mask set 201" test "$CODE" = 201
schema MaskSetCreated "$T/body" "features create response"
ID2=$(jget ".maskset.id")
check "features status: shape [9, 7], cols per party" bash -c '[ "$(node "$2" get "$1" ".maskset.shape") $(node "$2" get "$1" ".maskset.parties[*].cols")" = "[9,7] [3,4]" ]' _ "$T/body" "$JLIB"
sreq "$T/o1" 1 "/v1/masksets/$ID/parties/1/keys"
expect "another mask set's party 1: 401" 401 unauthorized
sreq "$T/o1" 1 "/v1/masksets/$ID2/parties/1/keys"
check "features party 1 gets its keys" test "$CODE" = 200

# ---- admin routes
req GET /v1/masksets ""
expect "list without a token: 401" 401 unauthorized
req GET /v1/masksets "$END1"
expect "list with an end token: 401" 401 unauthorized
req GET "/v1/masksets/$ID" "$END1"
expect "status with an end token: 401" 401 unauthorized
H=$(node "$RS" header "$T/k1" GET "/v1/masksets" "$ID" 1)
req GET /v1/masksets "" -H "Authorization: $H"
expect "list with a party's signature: 401" 401 unauthorized
req GET /v1/masksets "$ADMIN"
schema list:MaskSet "$T/body" "list"
check "list: both, newest first" bash -c '[ "$1" = 200 ] && [ "$(node "$3" get "$2" ".masksets[*].id")" = "[\"$5\",\"$4\"]" ]' _ "$CODE" "$T/body" "$JLIB" "$ID" "$ID2"
req GET "/v1/masksets?job_id=j-other" "$ADMIN"
check "list ?job_id filters" bash -c '[ "$1" = 200 ] && [ "$(node "$3" get "$2" ".masksets.length")" = 1 ]' _ "$CODE" "$T/body" "$JLIB"
req GET "/v1/masksets?state=bogus" "$ADMIN"
expect "list ?state=bogus: 422" 422 invalid
req GET "/v1/masksets/$ID" "$ADMIN"
schema MaskSet "$T/body" "status after downloads"
check "status: party 1 and 2 downloaded, 3 not" bash -c '[ "$1" = 200 ] && [ "$(node "$3" get "$2" ".parties[*].downloads")" = "[1,1,0]" ]' _ "$CODE" "$T/body" "$JLIB"
check "status holds no secret" bash -c '! grep -q -e "$2" -e seed -e token "$1"' _ "$T/body" "$END1"
req GET /v1/masksets/m-00000000000000000000000000000000 "$ADMIN"
expect "unknown id (admin): 404" 404 not_found
req GET /v1/masksets/whatever "$ADMIN"
expect "malformed id (admin): 404" 404 not_found
req DELETE /v1/masksets/m-00000000000000000000000000000000 "$ADMIN"
expect "delete unknown id: 404" 404 not_found

# ---- bad specs
bad() { # NAME STATUS CODE JSON
  post_spec "$ADMIN" "$4"
  expect "$1" "$2" "$3"
}
P2='"parties":[{"party":1,"rows":3},{"party":2,"rows":4}]'
post_raw "$ADMIN" "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5}"
expect "a party without identity: 400" 400 bad_request
check "  ... the detail names it" grep -q "parties\[0\].identity: missing" "$T/body"
post_raw "$ADMIN" "{\"job_id\":\"j-b\",\"partition\":\"samples\",\"parties\":[{\"party\":1,\"rows\":3,\"identity\":\"${FP[1]}\"},{\"party\":2,\"rows\":4,\"identity\":\"${FP[1]}\"}],\"cols\":5}"
expect "two parties with one identity: 422" 422 invalid
post_raw "$ADMIN" "{\"job_id\":\"j-b\",\"partition\":\"samples\",\"parties\":[{\"party\":1,\"rows\":3,\"identity\":\"abc\"}],\"cols\":5}"
expect "an identity that is not 64 hex digits: 422" 422 invalid
post_raw "$ADMIN" "{\"job_id\":\"j-b\",\"partition\":\"samples\",\"parties\":[{\"party\":1,\"rows\":3,\"identity\":7}],\"cols\":5}"
expect "an identity that is a number: 400" 400 bad_request
bad "mask_token fields are gone: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":3,"mask_token":"x"}],"cols":5}'
bad "ttl_s 0: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"ttl_s\":0}"
bad "ttl_s over 90 days: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"ttl_s\":7776001}"
bad "malformed JSON: 400" 400 bad_request '{"job_id":'
bad "not an object: 400" 400 bad_request '[1,2]'
bad "missing job_id: 400" 400 bad_request "{\"partition\":\"samples\",$P2,\"cols\":5}"
bad "missing cols: 400" 400 bad_request "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2}"
bad "rows as a string: 400" 400 bad_request '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":"3"}],"cols":5}'
bad "rows 2.5: 400" 400 bad_request '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":2.5}],"cols":5}'
bad "block_size a string: 400" 400 bad_request "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"block_size\":\"big\"}"
bad "unknown field: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"seed\":\"x\"}"
bad "unknown party field: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":3,"name":"x"}],"cols":5}'
bad "unknown block_size field: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"block_size\":{\"a\":2}}"
bad "partition bogus: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"diagonal\",$P2,\"cols\":5}"
bad "rows at top level of a samples job: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"rows\":7}"
bad "cols per party in a samples job: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"cols":3}],"cols":5}'
bad "parties out of order: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":2,"rows":3},{"party":1,"rows":4}],"cols":5}'
bad "party id gap: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":3},{"party":3,"rows":4}],"cols":5}'
bad "rows 0: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":0}],"cols":5}'
bad "cols -1: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":-1}"
bad "no parties: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[],"cols":5}'
bad "too many parties (5 > --max-parties 4): 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":1},{"party":2,"rows":1},{"party":3,"rows":1},{"party":4,"rows":1},{"party":5,"rows":1}],"cols":5}'
bad "cols over --max-dim: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":100001}"
bad "rows add up over --max-dim: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":60000},{"party":2,"rows":60000}],"cols":5}'
bad "key files over --max-key-bytes: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":90000}],"cols":5}'
bad "block_size 0: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"block_size\":0}"
bad "block_size giving a party more than 1024 slab pieces: 422" 422 invalid '{"job_id":"j-b","partition":"samples","parties":[{"party":1,"rows":1100}],"cols":5,"block_size":{"partitioned":1}}'
bad "job_id with a slash: 422" 422 invalid "{\"job_id\":\"j/../b\",\"partition\":\"samples\",$P2,\"cols\":5}"
bad "job_id too long: 422" 422 invalid "{\"job_id\":\"$(printf 'j%.0s' $(seq 65))\",\"partition\":\"samples\",$P2,\"cols\":5}"
bad "server_url not http: 422" 422 invalid "{\"job_id\":\"j-b\",\"partition\":\"samples\",$P2,\"cols\":5,\"server_url\":\"ftp://x\"}"
bad "a second active mask set for a job: 409" 409 conflict "{\"job_id\":\"j-other\",\"partition\":\"samples\",$P2,\"cols\":5}"
req POST /v1/masksets "$ADMIN" -H 'Content-Type: text/plain' --data-binary "$SPEC"
expect "wrong Content-Type: 415" 415 unsupported_media_type
{ printf '{"job_id": "j-big", "partition": "samples", "parties": [{"party": 1, "rows": 3}], "cols": 5, "pad": "'
  head -c 300000 /dev/zero | tr '\0' x
  printf '"}\n'; } >"$T/big.json"
req POST /v1/masksets "$ADMIN" -H 'Content-Type: application/json' --data-binary "@$T/big.json"
expect "body over 256 KiB: 413 (the HTTP framework's code)" 413 body_too_large
post_spec "$END1" "$SPEC"
expect "create with an end token: 401" 401 unauthorized
post_spec "" "$SPEC"
expect "create without a token: 401" 401 unauthorized
post_spec "$ADMIN" "{\"job_id\":\"j-url\",\"partition\":\"samples\",$P2,\"cols\":5,\"server_url\":\"https://mask.example:9000\"}"
check "server_url goes into keys_url" bash -c '[ "$1" = 201 ] && grep -q "\"keys_url\":\"https://mask.example:9000/v1/masksets/" "$2"' _ "$CODE" "$T/body"
req GET /healthz ""
check "still healthy after the bad requests" test "$CODE" = 200

# ---- health answers while a large slab is generated (one thread per connection)
post_spec "$ADMIN" '{"job_id":"j-slow","partition":"samples","parties":[{"party":1,"rows":6000}],"cols":8}'
BIGEND=$(jget ".end_token")
BIGID=$(jget ".maskset.id")
curl -s -o "$T/bigkeys.json" -w '%{http_code} %{time_total}\n' \
  -H "Authorization: $(node "$RS" header "$T/k1" GET "/v1/masksets/$BIGID/parties/1/keys" "$BIGID" 1)" \
  "$U/v1/masksets/$BIGID/parties/1/keys" >"$T/bigkeys.out" &
DL=$!
sleep 0.3
HZ=$(curl -s -o /dev/null -w '%{time_total}' "$U/healthz")
wait $DL
echo "     6000-row slab: $(cat "$T/bigkeys.out") (status, seconds); healthz meanwhile: ${HZ}s"
check "big slab served" bash -c '[ "$(cut -d" " -f1 "$1")" = 200 ]' _ "$T/bigkeys.out"
check "healthz answered during key generation (< 1 s)" awk -v t="$HZ" 'BEGIN { exit !(t ~ /^[0-9]+(\.[0-9]*)?$/ && t + 0 < 1.0) }'
req GET /metrics ""
check "metrics count served keys, files and generation time" bash -c 'grep -q "^fedsvd_mask_keys_served_total [1-9]" "$1" && grep -q "^fedsvd_mask_key_files_served_total [1-9]" "$1" && grep -q "^fedsvd_mask_keygen_seconds_count [1-9]" "$1" && grep -q "fedsvd_http_requests_total{method=\"GET\",route=\"/v1/masksets/{maskset}/parties/{party}/keys\",status=\"403\"}" "$1" && grep -q "fedsvd_http_requests_total{method=\"GET\",route=\"/v1/masksets/{maskset}/parties/{party}/keys/{piece}/block.npy\",status=\"403\"}" "$1"' _ "$T/body"
check "the big slab stays cached until its files are fetched" bash -c 'grep -q "^fedsvd_mask_keys_cache_entries [1-9]" "$1"' _ "$T/body"

# ---- SIGTERM, restart, same keys
stop
check "SIGTERM exits 0" test $? -eq 0
check "log says stopped" grep -q '"msg":"stopped"' "$LOG"
check "start again" start
sreq "$T/k1" 1 "/v1/masksets/$ID/parties/1/keys"
check "after a restart: the same manifest (keys_id and digests)" cmp -s "$T/body" "$T/man1.json"
same_files() { fetch_files "$1" "$2" "$3" "?keys_id=$4" && cmp -s "$3/0-block.npy" "$5/0-block.npy" && cmp -s "$3/0-rows.npy" "$5/0-rows.npy"; }
check "after a restart: byte-identical key files" same_files "$T/man1.json" "$T/k1" "$T/files1b" "$KID1" "$T/files1"
req GET "/v1/masksets/$ID" "$ADMIN"
check "after a restart: status kept (party 1's manifest downloaded twice)" bash -c '[ "$1" = 200 ] && [ "$(node "$3" get "$2" ".parties[0].downloads")" = 2 ]' _ "$CODE" "$T/body" "$JLIB"

# ---- DELETE
req DELETE "/v1/masksets/$ID" "$END1"
expect "delete with the end token (it has its own route): 401" 401 unauthorized
req DELETE "/v1/masksets/$ID" "$ADMIN"
schema MaskSet "$T/body" "delete response"
check "delete 200, state deleted" bash -c '[ "$1" = 200 ] && grep -q "\"state\":\"deleted\"" "$2"' _ "$CODE" "$T/body"
check "delete destroyed the seed file" test ! -e "$SEED"
sreq "$T/k3" 3 "/v1/masksets/$ID/parties/3/keys"
expect "keys of a deleted mask set: 410" 410 gone
schema Problem "$T/body" "a 410"
sreq "$T/k2" 2 "/v1/masksets/$ID/parties/2/keys/0/block.npy"
expect "a key file of a deleted mask set: 410" 410 gone
req DELETE "/v1/masksets/$ID" "$ADMIN"
check "delete again: 200" test "$CODE" = 200
req GET "/v1/masksets?state=deleted" "$ADMIN"
check "list ?state=deleted" bash -c '[ "$1" = 200 ] && grep -q "$3" "$2"' _ "$CODE" "$T/body" "$ID"
post_spec "$ADMIN" "$SPEC"
check "the job can get a new mask set after the delete" test "$CODE" = 201

# ---- the end token: deletes its mask set (its job ended), nothing else
END2=$(jget ".end_token")
ID3=$(jget ".maskset.id")
req POST "/v1/masksets/$ID3/end" "$ADMIN"
expect "end with the admin token: 401" 401 unauthorized
req POST "/v1/masksets/$ID3/end" "$END1"
expect "end with another mask set's end token: 401" 401 unauthorized
req POST "/v1/masksets/$ID3/end" ""
expect "end without a token: 401" 401 unauthorized
sreq "$T/k2" 2 "/v1/masksets/$ID3/parties/2/keys"
check "before the end, party 2 gets its keys" test "$CODE" = 200
req POST "/v1/masksets/$ID3/end" "$END2"
schema MaskSet "$T/body" "end response"
check "end 200: state deleted, seed destroyed" bash -c '[ "$1" = 200 ] && grep -q "\"state\":\"deleted\"" "$2" && [ ! -e "$3" ]' _ "$CODE" "$T/body" "$DATA/seeds/$ID3.seed"
sreq "$T/k2" 2 "/v1/masksets/$ID3/parties/2/keys"
expect "after the end, the keys are gone: 410" 410 gone
req POST "/v1/masksets/$ID3/end" "$END2"
check "end again: 200" test "$CODE" = 200

# ---- ttl_s: an expired mask set is deleted (on the next key request, and by the sweep)
post_spec "$ADMIN" '{"job_id":"j-ttl","partition":"samples","parties":[{"party":1,"rows":3}],"cols":2,"ttl_s":1}'
TID=$(jget ".maskset.id")
post_spec "$ADMIN" '{"job_id":"j-ttl2","partition":"samples","parties":[{"party":1,"rows":3}],"cols":2,"ttl_s":1}'
TID2=$(jget ".maskset.id")
sleep 2
sreq "$T/k1" 1 "/v1/masksets/$TID/parties/1/keys"
expect "keys after ttl_s: 410" 410 gone
check "  ... and the seed is destroyed" test ! -e "$DATA/seeds/$TID.seed"
gone_by_sweep() { for _ in $(seq 80); do [ ! -e "$1" ] && return 0; sleep 0.1; done; return 1; }
check "an expired mask set nobody asks for is deleted by the sweep" gone_by_sweep "$DATA/seeds/$TID2.seed"
req GET "/v1/masksets/$TID2" "$ADMIN"
check "  ... its status says deleted" bash -c '[ "$1" = 200 ] && grep -q "\"state\":\"deleted\"" "$2"' _ "$CODE" "$T/body"

# ---- --insecure-test-mask-seed: a deterministic master seed, for reproducibility tests only
TS=00112233445566778899aabbccddeeff
# (--insecure-http: plain HTTP off loopback would be allowed; the test seed is not)
timeout 10 "$SRV" --admin-token-file "$T/admin.token" --data-dir "$T/ts0" --listen 0.0.0.0:0 --insecure-http \
  --insecure-test-mask-seed "$TS" >/dev/null 2>"$T/ts.err"
check "test seed on a non-loopback --listen: refused (exit 2, says why)" bash -c \
  '[ "$1" = 2 ] && grep -q "refused on a --listen address that is not loopback" "$2"' _ $? "$T/ts.err"
FEDSVD_INSECURE_TEST_MASK_SEED=$TS timeout 10 "$SRV" --admin-token-file "$T/admin.token" --data-dir "$T/ts0" \
  --listen :0 --insecure-http >/dev/null 2>"$T/ts.err"
check "test seed from the environment on all interfaces: refused (exit 2)" bash -c \
  '[ "$1" = 2 ] && grep -q "insecure-test-mask-seed is refused on a --listen address that is not loopback" "$2"' _ $? "$T/ts.err"
timeout 10 "$SRV" --admin-token-file "$T/admin.token" --data-dir "$T/ts0" --listen 127.0.0.1:0 \
  --insecure-test-mask-seed 0g >/dev/null 2>"$T/ts.err"
check "test seed not hex: exit 2" bash -c '[ "$1" = 2 ] && grep -q "hex digits" "$2"' _ $? "$T/ts.err"
check "  ... nothing started in the refused data directory" test ! -e "$T/ts0/masking.db"
req GET /readyz ""
check "without a test seed: /readyz does not say deterministic_masks" bash -c \
  '[ "$1" = 200 ] && ! grep -q deterministic_masks "$2"' _ "$CODE" "$T/body"
post_spec "$ADMIN" '{"job_id":"j-rand-1","partition":"samples","parties":[{"party":1,"rows":5},{"party":2,"rows":4}],"cols":3}'
RID1=$(jget ".maskset.id")
check "  ... nor does its mask set" bash -c '[ "$1" = 201 ] && ! grep -q deterministic_masks "$2"' _ "$CODE" "$T/body"
post_spec "$ADMIN" '{"job_id":"j-rand-2","partition":"samples","parties":[{"party":1,"rows":5},{"party":2,"rows":4}],"cols":3}'
RID2=$(jget ".maskset.id")
check "  ... and two mask sets of one shape get different master seed files (CSPRNG)" bash -c \
  '[ -s "$1" ] && [ -s "$2" ] && ! cmp -s "$1" "$2"' _ "$DATA/seeds/$RID1.seed" "$DATA/seeds/$RID2.seed"
post_raw "$ADMIN" '{"job_id":"j-x","partition":"samples","parties":[{"party":1,"rows":5,"identity":"'"${FP[1]}"'"}],"cols":3,"deterministic_masks":true}'
expect "a request cannot ask for deterministic masks: 422" 422 invalid
# tstart DIR: a server with the test seed on loopback (URL in TU, pid in TPID)
tstart() {
  rm -f "$T/tport"
  "$SRV" --admin-token-file "$T/admin.token" --data-dir "$1" --listen 127.0.0.1:0 \
    --port-file "$T/tport" --insecure-test-mask-seed "$TS" 2>>"$T/ts.log" &
  TPID=$!
  for _ in $(seq 400); do [ -s "$T/tport" ] && break; sleep 0.025; done
  TU=http://127.0.0.1:$(cat "$T/tport" 2>/dev/null)
  for _ in $(seq 200); do curl -sf "$TU/readyz" >/dev/null 2>&1 && return 0; sleep 0.025; done
  return 1
}
tcreate() { # JOB -> the mask set's seed file in TSEEDF, its document in $T/tbody
  local id
  curl -s -o "$T/tbody" -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    --data-binary "$(with_ids '{"job_id":"'"$1"'","partition":"samples","parties":[{"party":1,"rows":5},{"party":2,"rows":4}],"cols":3}' "${FP[@]:1}")" \
    "$TU/v1/masksets"
  id=$(node "$JLIB" get "$T/tbody" .maskset.id)
  TSEEDF=$TDIR/seeds/$id.seed
}
TDIR=$T/ts1
check "test seed on loopback: starts" tstart "$TDIR"
check "  ... warns at start that it is insecure" grep -q '"level":"warn".*INSECURE: --insecure-test-mask-seed' "$T/ts.log"
curl -s -o "$T/tready" "$TU/readyz"
check "  ... /readyz says deterministic_masks: true" bash -c \
  '[ "$(node "$2" get "$1" .deterministic_masks)" = true ]' _ "$T/tready" "$JLIB"
schema Health "$T/tready" "/readyz with a test seed"
tcreate j-det-1
S1=$TSEEDF
check "  ... its mask set says deterministic_masks: true" bash -c \
  '[ "$(node "$2" get "$1" .maskset.deterministic_masks)" = true ]' _ "$T/tbody" "$JLIB"
node -e 'const fs = require("fs"); const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  fs.writeFileSync(process.argv[2], JSON.stringify(d.maskset));' "$T/tbody" "$T/tms.json"
schema MaskSet "$T/tms.json" "a mask set with deterministic masks"
tcreate j-det-2
S2=$TSEEDF
kill -TERM "$TPID"
wait "$TPID"
TDIR=$T/ts2
tstart "$TDIR"
tcreate j-det-other-job
S3=$TSEEDF
kill -TERM "$TPID"
wait "$TPID"
check "  ... the same master seed for the same shape, whatever the job, server or data dir" \
  bash -c '[ -s "$1" ] && cmp -s "$1" "$2" && cmp -s "$1" "$3"' _ "$S1" "$S2" "$S3"
check "  ... which is not the CSPRNG's" bash -c '! cmp -s "$1" "$2"' _ "$S1" "$DATA/seeds/$RID1.seed"
check "  ... its log does not hold the test seed" bash -c '! grep -q "$2" "$1"' _ "$T/ts.log" "$TS"

# ---- logs: JSON lines without secrets
stop
check "SIGTERM exits 0 (second run)" test $? -eq 0
check "every log line is JSON" node "$JLIB" lines "$LOG"
check "no token in the logs" bash -c '! grep -q -e "$2" -e "$3" -e "$4" -e "$5" -e Fedsvd-Sig "$1"' _ "$LOG" "$ADMIN" "$END1" "$END2" "$BIGEND"
check "log has the created/served/deleted events" bash -c 'grep -q "mask set created" "$1" && grep -q "keys served" "$1" && grep -q "mask set deleted" "$1"' _ "$LOG"

finish
