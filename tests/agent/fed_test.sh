#!/bin/bash
# client-agent with fedsvd/fedpca jobs against a real masking-server and
# aggregation-server on loopback, the job made with `fedsvd job create`
# (which pins each agent's identity, creates the mask set with those
# identities and registers its end token with the aggregation server; the
# invitations carry no credential for keys): 3 agents run a fedsvd and a
# fedpca job, each fetching its keys with requests signed by its identity
# key; each party's result
# files are checked against a centralised `fedsvd svd` of the pooled data;
# the server's manifest carries only what it may know. A fedpca job whose
# aggregation server is killed (-9) mid-job and restarted (event replay
# across aggregations) still gives the exact result. The job creator's
# complete view (every invitation, both servers' admin tokens) fetches no
# key and no key file (403), while each party's identity gets its own keys
# only; a finished (or cancelled) job's keys are gone (410: the aggregation
# server ended the mask set). Then the agent's refusals: an invitation
# without maskset (422), a dataset of the wrong shape (422), an agent that
# is not the pinned party; no token of any kind in any log, and agent.db
# (with its -wal) holds no party token once the participations ended.
#
#   tests/agent/fed_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/services.sh"
svc_need client-agent aggregation-server masking-server fedsvd
RS=$SVC_LIB/reqsig.mjs
jget() { node "$JLIB" get "$@"; }
F=$BIN/fedsvd
below() { awk -v v="$1" -v b="$2" 'BEGIN { exit !(v != "" && v + 0 <= b + 0) }'; }

svc_server --chunk-words 1000
svc_masking
K=3
svc_agents $K --poll-ms 50
check "servers and agents ready" curl -sf "${AURL[$K]}/readyz" -o /dev/null
# every job pins the agents' identities, as their operators would print them
svc_party_keys $K

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
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm "$alg" "${PKEYS[@]}" \
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
check "job create wrote 3 invitations with the mask set, without any mask credential" \
  bash -c "grep -q masking_url '$T/svd/invitation-3.json' && grep -q maskset '$T/svd/invitation-1.json' &&
    ! grep -q mask_token '$T'/svd/invitation-*.json"
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
# agent 3 stops itself (SIGSTOP) once its exponent of the SVD aggregation
# (aggregation 1; the statistics round is aggregation 0) is written ahead and
# before it is sent: the job is held there, the kill lands in it, and agent 3
# goes on (SIGCONT) once the server is back
svc_stop "${APID[3]}"
FEDSVD_TEST_STOP_AFTER_WAL=/aggregations/1/exponent svc_agent 3 --poll-ms 50
"$F" gen planted --rows 900 --cols 40 --rank 4 --noise 0.2 --seed 6 --out-dir "$T/big" --parties 3 \
  >/dev/null
"$F" svd --input "$T/big/party-1.npy" --input "$T/big/party-2.npy" --input "$T/big/party-3.npy" \
  --center --k 3 --out "$T/refbig" >/dev/null
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedpca --k 3 "${PKEYS[@]}" \
  --shape 900,40 --party-sizes 300,300,300 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 60 --out-dir "$T/kill" >/dev/null 2>&1
node - "$T" "$K" "$OP" "${AURL[@]:1}" <<'EOF'
const fs = require('fs');
const [T, K, op, ...urls] = process.argv.slice(2);
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
})();
EOF
check "agent 3 stopped at its exponent of the SVD aggregation" svc_wait_stopped "${APID[3]}"
curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(jget "$T/kill.ids.json" .job)" >"$T/kill.job.json"
AT="$(jget "$T/kill.job.json" .state) in $(jget "$T/kill.job.json" .phase) of aggregation \
$(jget "$T/kill.job.json" .aggregation)"
svc_stop "$SPID" KILL
check "killed the aggregation server while the job was $AT" \
  test "$AT" = "running in exponents of aggregation 1"
svc_server --chunk-words 1000
kill -CONT "${APID[3]}"
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

echo "== the job creator's complete view fetches no keys; each party only its own"
# a job not run yet: its mask set is active
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedsvd "${PKEYS[@]}" \
  --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 30 --out-dir "$T/view" >/dev/null 2>&1
MS=$(jget "$T/view/invitation-1.json" .maskset)
mstate() { curl -s -H "Authorization: Bearer $MADMIN" "$MURL/v1/masksets/$1" >"$T/mstate.json"; jget "$T/mstate.json" .state; }
check "the mask set of a job not run yet is active" [ "$(mstate "$MS")" = active ]
# every credential the job creator holds: each invitation's tokens, both servers' admin tokens
CREDS=("$ADMIN" "$MADMIN")
for p in "$T"/view/invitation-*.json; do
  for f in .token .mask_token; do v=$(jget "$p" "$f" 2>/dev/null); [ -n "$v" ] && [ "$v" != null ] && CREDS+=("$v"); done
done
codes=""
for tok in "${CREDS[@]}"; do
  for i in 1 2 3; do
    for f in keys keys/0/rows.npy keys/0/block.npy; do
      c=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" "$MURL/v1/masksets/$MS/parties/$i/$f")
      codes="$codes $c"
    done
  done
done
check "each key and key-file request with the creator's ${#CREDS[@]} credentials: 403 (got:$(echo $codes | tr ' ' '\n' | sort | uniq -c | tr '\n' ' '))" \
  bash -c '[ -n "$1" ] && [ -z "$(echo $1 | tr " " "\n" | grep -v "^403$")" ]' _ "$codes"
sget() { # KEYFILE PARTY PATH -> status (the maskset from the path)
  local id=${3#/v1/masksets/}
  curl -s -o "$T/sget.out" -w '%{http_code}' \
    -H "Authorization: $(node "$RS" header "$1" GET "$3" "${id%%/*}" "$2")" "$MURL$3"
}
check "party 1's identity gets party 1's keys" [ "$(sget "$T/agent1/identity.key" 1 "/v1/masksets/$MS/parties/1/keys")" = 200 ]
check "  ... and they are party 1's" [ "$(jget "$T/sget.out" .party)" = 1 ]
check "party 2's identity gets party 2's keys" [ "$(sget "$T/agent2/identity.key" 2 "/v1/masksets/$MS/parties/2/keys")" = 200 ]
check "party 1's identity cannot fetch party 2's keys (signed as party 1): 403" \
  [ "$(sget "$T/agent1/identity.key" 1 "/v1/masksets/$MS/parties/2/keys")" = 403 ]
check "party 1's identity cannot fetch party 2's keys (claiming party 2): 401" \
  [ "$(sget "$T/agent1/identity.key" 2 "/v1/masksets/$MS/parties/2/keys")" = 401 ]
check "party 1's identity cannot fetch party 2's key file: 403" \
  [ "$(sget "$T/agent1/identity.key" 1 "/v1/masksets/$MS/parties/2/keys/0/block.npy")" = 403 ]

echo "== a finished job's keys are gone"
SMS=$(jget "$T/svd/invitation-1.json" .maskset)
ended() { for _ in $(seq 100); do [ "$(mstate "$1")" = deleted ] && return 0; sleep 0.1; done; return 1; }
check "the aggregation server ended the finished fedsvd job's mask set" ended "$SMS"
check "its keys can no longer be downloaded, not even by the party: 410" \
  [ "$(sget "$T/agent1/identity.key" 1 "/v1/masksets/$SMS/parties/1/keys")" = 410 ]
check "  ... its seed file is gone" test ! -e "$T/masking/seeds/$SMS.seed"
check "the server log records it (registered, ended)" \
  bash -c 'grep -q "mask set registered" "$1" && grep -q "mask set ended" "$1"' _ "$T/server.log"
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(jget "$T/view/invitation-1.json" .job_id)"
check "cancelling a job ends its mask set too" ended "$MS"
check "  ... 410 for its party" [ "$(sget "$T/agent1/identity.key" 1 "/v1/masksets/$MS/parties/1/keys")" = 410 ]

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
body=$(mkbody "$INV" "$T/d/party-1.npy" 'delete inv.maskset')
check "invitation without maskset: 422" [ "$(post 1 "$body")" = 422 ]
check "  ... naming it" grep -q maskset "$T/post.out"
body=$(mkbody "$INV" "$T/d/party-2.npy")
check "dataset of another party's shape: 422" [ "$(post 1 "$body")" = 422 ]
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedsvd --allow-unpinned \
  --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 3 --out-dir "$T/unpinned" >"$T/unpinned.out" 2>&1
check "fedsvd job create without pins is refused (the mask set needs the identities)" \
  bash -c '[ ! -e "$1/invitation-1.json" ] && grep -q "party-key" "$2"' _ "$T/unpinned" "$T/unpinned.out"
# a fresh job that pins party 1 to agent 2's identity (and 2 to agent 1's): agent 1 is not party 1
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedsvd \
  --party-key "1:${PKEYS[3]#2:}" --party-key "2:${PKEYS[1]#1:}" --party-key "${PKEYS[5]}" \
  --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
  --masking-token-file "$T/madmin.token" --round-timeout 3 --out-dir "$T/bad" >/dev/null 2>&1
body=$(mkbody "$T/bad/invitation-1.json" "$T/d/party-1.npy")
code=$(post 1 "$body")
PID1=$(sed -n 's/.*"id": *"\(p-[0-9a-f]*\)".*/\1/p' "$T/post.out")
st=""
if [ "$code" = 201 ]; then
  for _ in $(seq 100); do
    st=$(curl -s -H "Authorization: Bearer $OP" "${AURL[1]}/v1/participations/$PID1")
    echo "$st" | grep -q '"state": *"failed"' && break
    sleep 0.1
  done
fi
check "an agent that is not the pinned party gets nowhere (refused: $code, or the participation fails)" \
  bash -c '[ "$1" = 422 ] || echo "$2" | grep -q "\"state\": *\"failed\""' _ "$code" "$st"

echo "== agent.db keeps no party token once the participations ended"
for i in 1 2 3; do
  toks=$(for p in "$T"/*/invitation-$i.json; do jget "$p" .token; done)
  found=0
  for tok in $toks; do
    for f in "$T/agent$i"/agent.db "$T/agent$i"/agent.db-wal; do
      [ -e "$f" ] && grep -qaF -- "$tok" "$f" && found=1
    done
  done
  check "agent $i: agent.db and its -wal hold none of its $(echo $toks | wc -w) party tokens nor a mask_token; no token file left" \
    bash -c '[ "$1" = 0 ] && ! grep -qa mask_token "$2"/agent.db* && [ -z "$(ls "$2"/participations/*/token 2>/dev/null)" ]' _ "$found" "$T/agent$i"
done

echo "== secrets stay out of logs"
for f in "$T"/*.log; do
  tokens=$(for p in "$T"/*/invitation-*.json; do jget "$p" .token; done)
  leak=0
  for tok in $tokens $ADMIN $MADMIN $OP; do grep -qF -- "$tok" "$f" && leak=1; done
  check "no token in $(basename "$f")" [ "$leak" = 0 ]
done
svc_summary
