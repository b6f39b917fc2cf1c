#!/bin/bash
# client-agent with fedsvd/fedpca jobs against a real masking-server and
# aggregation-server on loopback, the job made with `fedsvd job create`
# (which creates the mask set and puts the mask tokens into the
# invitations): 3 agents run a fedsvd and a fedpca job; each party's result
# files are checked against a centralised `fedsvd svd` of the pooled data;
# the server's manifest carries only what it may know. A fedpca job whose
# aggregation server is killed (-9) mid-job and restarted (event replay
# across aggregations) still gives the exact result. Then the agent's
# refusals: an invitation without mask token (422), a dataset of the wrong
# shape (422), a wrong mask token (the participation fails naming the
# masking server's 401), and no token of any kind in any log.
#
#   tests/agent/fed_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
for b in client-agent aggregation-server masking-server fedsvd; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b"; echo "0 passed, 1 failed"; exit 1; }
done
command -v node >/dev/null || { echo "no node (the tests' JSON and HTTP helpers)"; echo "0 passed, 1 failed"; exit 1; }
JLIB=$(cd "$(dirname "$0")/../lib" && pwd)/json.mjs
jget() { node "$JLIB" get "$@"; }
F=$BIN/fedsvd
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT
pass=0
failn=0
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
below() { awk -v v="$1" -v b="$2" 'BEGIN { exit !(v != "" && v + 0 <= b + 0) }'; }

ADMIN=admin-token-0123456789abcdefghij
MADMIN=masking-admin-0123456789abcdefghi
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$MADMIN" >"$T/madmin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

wait_port() { for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done; return 1; }
"$BIN/aggregation-server" --listen 127.0.0.1:0 --port-file "$T/sport" --data-dir "$T/server" \
  --admin-token-file "$T/admin.token" --chunk-words 1000 2>>"$T/server.log" &
PIDS+=($!)
"$BIN/masking-server" --listen 127.0.0.1:0 --port-file "$T/mport" --data-dir "$T/masking" \
  --admin-token-file "$T/madmin.token" 2>>"$T/masking.log" &
PIDS+=($!)
K=3
for i in $(seq 1 $K); do
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" --poll-ms 50 2>"$T/agent$i.log" &
  PIDS+=($!)
done
wait_port "$T/sport" && wait_port "$T/mport"
SURL=http://127.0.0.1:$(cat "$T/sport")
MURL=http://127.0.0.1:$(cat "$T/mport")
AURL=()
for i in $(seq 1 $K); do
  wait_port "$T/port$i"
  AURL[$i]=http://127.0.0.1:$(cat "$T/port$i")
done
for _ in $(seq 100); do curl -sf "$SURL/readyz" >/dev/null && curl -sf "$MURL/readyz" >/dev/null && break; sleep 0.05; done
check "servers and agents ready" curl -sf "${AURL[$K]}/readyz" -o /dev/null

# data: party i holds rows of a 240 x 20 matrix
"$F" gen planted --rows 240 --cols 20 --rank 4 --noise 0.2 --seed 5 --out-dir "$T/d" --parties 3 \
  --split 60,100,80 >/dev/null
"$F" svd --input "$T/d/party-1.npy" --input "$T/d/party-2.npy" --input "$T/d/party-3.npy" \
  --out "$T/ref" >/dev/null
"$F" svd --input "$T/d/party-1.npy" --input "$T/d/party-2.npy" --input "$T/d/party-3.npy" \
  --center --out "$T/refc" >/dev/null

# join NAME ALG [extra job-create args]: job create, one participation per agent, wait
join() {
  local name=$1 alg=$2; shift 2
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm "$alg" \
    --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
    --masking-token-file "$T/madmin.token" --round-timeout 30 --out-dir "$T/$name" "$@" \
    --format json >"$T/$name.create.json" 2>"$T/$name.create.err"
  node - "$T" "$name" "$K" "$OP" "${AURL[@]:1}" <<'EOF'
const fs = require('fs');
const [T, name, K, op, ...urls] = process.argv.slice(2);
const auth = { authorization: `Bearer ${op}` };
const get = async (u) => (await fetch(u, { headers: auth })).json();
(async () => {
  const created = JSON.parse(fs.readFileSync(`${T}/${name}.create.json`, 'utf8'));
  const ids = [];
  for (let i = 0; i < Number(K); i++) {
    const inv = JSON.parse(fs.readFileSync(created.invitations[i], 'utf8'));
    const body = { invitation: inv, dataset: { path: `${T}/d/party-${inv.party}.npy` } };
    const r = await fetch(`${urls[i]}/v1/participations`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    ids.push((await r.json()).id);
  }
  let ps = [];
  const t0 = Date.now();
  while (Date.now() - t0 < 120000) {
    ps = await Promise.all(ids.map((id, i) => get(`${urls[i]}/v1/participations/${id}`)));
    if (ps.every((p) => p.state !== 'running')) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  const out = { job: created.job.id, ids, parts: ps, manifests: [] };
  for (let i = 0; i < Number(K); i++) {
    if (ps[i].state !== 'done') continue;
    const m = await get(`${urls[i]}/v1/participations/${ids[i]}/result`);
    out.manifests.push(m);
    for (const f of m.files) {
      const r = await fetch(`${urls[i]}/v1/participations/${ids[i]}/result/${f.name}`, { headers: auth });
      fs.writeFileSync(`${T}/${name}-p${i + 1}-${f.name}`, Buffer.from(await r.arrayBuffer()));
    }
  }
  fs.writeFileSync(`${T}/${name}.out.json`, JSON.stringify(out, null, 1));
})();
EOF
}

echo "== fedsvd through fedsvd job create"
join svd fedsvd
check "job create wrote 3 invitations with mask tokens" \
  bash -c "grep -q mask_token '$T/svd/invitation-1.json' && grep -q masking_url '$T/svd/invitation-3.json'"
check "invitations are 0600" bash -c "[ \"\$(stat -c %a '$T/svd/invitation-2.json')\" = 600 ]"
check "every participation done" [ "$(jget "$T/svd.out.json" '.parts[*].state')" = '["done","done","done"]' ]
for i in 1 2 3; do
  v=$("$F" compare --a "$T/svd-p$i-S.npy" --b "$T/ref/S.npy" --metric sv)
  check "party $i: S vs fedsvd svd ($v)" below "$v" 1e-12
  v=$("$F" compare --a "$T/svd-p$i-V.npy" --b "$T/ref/V.npy" --metric subspace)
  check "party $i: V vs fedsvd svd ($v)" below "$v" 1e-10
done
check "party 2's U has its 100 rows" bash -c "head -c 128 '$T/svd-p2-U.npy' | grep -q \"'shape': (100, 20)\""
JOB=$(jget "$T/svd.out.json" .job)
"$F" job result --server "$SURL" --job "$JOB" --token-file "$T/admin.token" --format json \
  --out "$T/svd-server" >"$T/svd.result.json" 2>/dev/null
check "server manifest: s.npy and vprime.npy, singular values and rank, no private factor" \
  [ "$(jget "$T/svd.result.json" '.files[*].name')" = '["s.npy","vprime.npy"]' -a \
    "$(jget "$T/svd.result.json" .rank)" = 20 -a "$(jget "$T/svd.result.json" .singular_values.length)" = 20 ]
v=$("$F" compare --a "$T/svd-server/s.npy" --b "$T/ref/S.npy" --metric sv)
check "server's s.npy are the singular values ($v)" below "$v" 1e-12
v=$("$F" compare --a "$T/svd-server/vprime.npy" --b "$T/ref/V.npy" --metric subspace --k 3 --format json |
  sed -n 's/.*"value": *\([-+0-9.eE]*\).*/\1/p')
check "the server's V' is masked: its top-3 subspace is far from V's ($v)" awk -v v="$v" 'BEGIN { exit !(v > 0.5) }'
curl -s "$MURL/metrics" >"$T/mmetrics.txt"
check "each party's keys: one manifest, its 2 .npy files, one generation (the files came from the key cache)" \
  bash -c 'grep -q "^fedsvd_mask_keys_served_total 3$" "$1" && grep -q "^fedsvd_mask_key_files_served_total 6$" "$1" &&
    grep -q "^fedsvd_mask_keygen_seconds_count 3$" "$1" && grep -q "^fedsvd_mask_keys_cache_entries 0$" "$1"' _ "$T/mmetrics.txt"

echo "== fedpca --k 3 through fedsvd job create"
join pca fedpca --k 3
for i in 1 3; do
  v=$("$F" compare --a "$T/pca-p$i-singular_values.npy" --b "$T/refc/S.npy" --metric sv --k 3)
  check "party $i: singular values vs fedsvd svd --center ($v)" below "$v" 1e-12
  v=$("$F" compare --a "$T/pca-p$i-components.npy" --b "$T/refc/V.npy" --metric subspace --k 3)
  check "party $i: components vs fedsvd svd --center ($v)" below "$v" 1e-10
done
check "party 2: scores (100 x 3), mean, explained variance (ratio)" bash -c "
  head -c 128 '$T/pca-p2-scores.npy' | grep -q \"'shape': (100, 3)\" &&
  [ -s '$T/pca-p2-mean.npy' ] && [ -s '$T/pca-p2-explained_variance_ratio.npy' ]"

echo "== the aggregation server killed (-9) in the middle of a fedpca job, restarted"
"$F" gen planted --rows 9000 --cols 40 --rank 4 --noise 0.2 --seed 6 --out-dir "$T/big" --parties 3 \
  >/dev/null
"$F" svd --input "$T/big/party-1.npy" --input "$T/big/party-2.npy" --input "$T/big/party-3.npy" \
  --center --k 3 --out "$T/refbig" >/dev/null
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedpca --k 3 \
  --shape 9000,40 --party-sizes 3000,3000,3000 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 60 --out-dir "$T/kill" >/dev/null 2>&1
SPORT=$(cat "$T/sport")
node - "$T" "$K" "$OP" "$SURL" "$ADMIN" "${AURL[@]:1}" <<'EOF'
const fs = require('fs');
const [T, K, op, surl, admin, ...urls] = process.argv.slice(2);
(async () => {
  const ids = [];
  let inv;
  for (let i = 0; i < Number(K); i++) {
    inv = JSON.parse(fs.readFileSync(`${T}/kill/invitation-${i + 1}.json`, 'utf8'));
    const body = { invitation: inv, dataset: { path: `${T}/big/party-${i + 1}.npy` } };
    const r = await fetch(`${urls[i]}/v1/participations`, {
      method: 'POST', headers: { authorization: `Bearer ${op}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    ids.push((await r.json()).id);
  }
  fs.writeFileSync(`${T}/kill.ids.json`, JSON.stringify({ job: inv.job_id, ids }));
  // wait until the job is past its first (statistics) aggregation
  const t0 = Date.now();
  while (Date.now() - t0 < 60000) {
    const j = await (await fetch(`${surl}/v1/jobs/${inv.job_id}`,
      { headers: { authorization: `Bearer ${admin}` } })).json();
    if (j.aggregation >= 1 || j.state !== 'running') {
      fs.writeFileSync(`${T}/kill.at`, `${j.phase} of aggregation ${j.aggregation}\n`);
      break;
    }
    await new Promise((res) => setTimeout(res, 10));
  }
})();
EOF
kill -9 "${PIDS[0]}" 2>/dev/null
wait "${PIDS[0]}" 2>/dev/null
check "killed the aggregation server at $(cat "$T/kill.at" 2>/dev/null)" [ -s "$T/kill.at" ]
"$BIN/aggregation-server" --listen "127.0.0.1:$SPORT" --data-dir "$T/server" \
  --admin-token-file "$T/admin.token" --chunk-words 1000 2>>"$T/server.log" &
PIDS[0]=$!
node - "$T" "$K" "$OP" "${AURL[@]:1}" <<'EOF'
const fs = require('fs');
const [T, K, op, ...urls] = process.argv.slice(2);
const auth = { authorization: `Bearer ${op}` };
(async () => {
  const { ids } = JSON.parse(fs.readFileSync(`${T}/kill.ids.json`, 'utf8'));
  let ps = [];
  const t0 = Date.now();
  while (Date.now() - t0 < 120000) {
    ps = await Promise.all(ids.map(async (id, i) =>
      (await fetch(`${urls[i]}/v1/participations/${id}`, { headers: auth })).json()));
    if (ps.every((p) => p.state !== 'running')) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  fs.writeFileSync(`${T}/kill.parts.json`, JSON.stringify(ps));
  for (let i = 0; i < Number(K); i++) {
    if (ps[i].state !== 'done') continue;
    for (const n of ['components.npy', 'singular_values.npy']) {
      const r = await fetch(`${urls[i]}/v1/participations/${ids[i]}/result/${n}`, { headers: auth });
      fs.writeFileSync(`${T}/kill-p${i + 1}-${n}`, Buffer.from(await r.arrayBuffer()));
    }
  }
})();
EOF
check "after the restart every participation is done (replayed): $(jget "$T/kill.parts.json" '[*].error')" \
  [ "$(jget "$T/kill.parts.json" '[*].state')" = '["done","done","done"]' ]
for i in 1 2 3; do
  v=$("$F" compare --a "$T/kill-p$i-components.npy" --b "$T/refbig/V.npy" --metric subspace --k 3 2>/dev/null)
  w=$("$F" compare --a "$T/kill-p$i-singular_values.npy" --b "$T/refbig/S.npy" --metric sv --k 3 2>/dev/null)
  check "party $i after the restart: components ($v) and singular values ($w) exact" \
    bash -c "awk -v v='$v' -v w='$w' 'BEGIN { exit !(v != \"\" && v + 0 <= 1e-10 && w + 0 <= 1e-12) }'"
done
grep -q '"job resumed"' "$T/server.log" && check "the server log says the job resumed" true ||
  check "the server log says the job resumed" false

echo "== refusals"
INV=$(ls "$T"/svd/invitation-1.json)
post() { # AGENT BODY -> status code
  curl -s -o "$T/post.out" -w '%{http_code}' -H "Authorization: Bearer $OP" \
    -H 'Content-Type: application/json' -d "$2" "${AURL[$1]}/v1/participations"
}
mkbody() { # INVITATION DATASET [EDIT-JS]: a participation request, the invitation edited
  node -e '
const fs = require("fs");
const inv = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
eval(process.argv[3] || "");
console.log(JSON.stringify({ invitation: inv, dataset: { path: process.argv[2] } }));' "$@"
}
body=$(mkbody "$INV" "$T/d/party-1.npy" 'delete inv.mask_token')
check "invitation without mask_token: 422" [ "$(post 1 "$body")" = 422 ]
check "  ... naming it" grep -q mask_token "$T/post.out"
body=$(mkbody "$INV" "$T/d/party-2.npy")
check "dataset of another party's shape: 422" [ "$(post 1 "$body")" = 422 ]
# a fresh job whose party 1 gets a made-up mask token
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedsvd \
  --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 3 --out-dir "$T/bad" >/dev/null 2>&1
body=$(mkbody "$T/bad/invitation-1.json" "$T/d/party-1.npy" 'inv.mask_token = "x".repeat(43)')
code=$(post 1 "$body")
PID1=$(sed -n 's/.*"id": *"\(p-[0-9a-f]*\)".*/\1/p' "$T/post.out")
check "wrong mask token: accepted ($code), then ..." [ "$code" = 201 ]
st=""
for _ in $(seq 100); do
  st=$(curl -s -H "Authorization: Bearer $OP" "${AURL[1]}/v1/participations/$PID1")
  echo "$st" | grep -q '"state": *"failed"' && break
  sleep 0.1
done
check "  ... the participation fails naming the masking server's 401" \
  bash -c "echo '$st' | grep -q 'masking server' && echo '$st' | grep -q 401"

echo "== secrets stay out of logs"
for f in "$T"/*.log; do
  tokens=$(for p in "$T"/*/invitation-*.json; do jget "$p" .token; jget "$p" .mask_token; done)
  leak=0
  for tok in $tokens $ADMIN $MADMIN $OP; do grep -qF -- "$tok" "$f" && leak=1; done
  check "no token in $(basename "$f")" [ "$leak" = 0 ]
done
echo "$pass passed, $failn failed"
[ "$failn" -eq 0 ]
