#!/usr/bin/env bash
# Sharded aggregation (docs/sharding.md), with real processes on loopback:
#  - fedsvd local --shards 3 and --shards 4 (fedsvd) and --shards 3 (fedpca)
#    on 4 parties x 300 rows x 40 columns give the unsharded run's singular
#    values to 1e-12 (fedsvd compare --metric sv) and its shared factor
#    (--metric subspace), and match a centralised SVD (--verify); with
#    700-word chunks each window is many chunks; every shard peer took
#    masked chunks from the parties (its log), and
#    summary.json lists each shard's rows (the row split) and peak memory;
#  - a shard peer with another peer token: the coordinator cannot create the
#    job's window there and the job is refused with the reason; a job asking
#    for more shards than the server has peers: 400;
#  - an agent killed while it uploads resumes and sends its chunks to every
#    shard again (--shards 4 --restart agent-2@masked_input);
#  - shard peers and the coordinator killed and restarted mid-job
#    (--restart aggregation-shard-N / aggregation-server): the same result,
#    byte for byte, as the undisturbed run with the same test mask seed;
#  - the CLI's usage errors: --shards with the features partition,
#    --restart of a shard peer that is not there, with secure-sum.
#
#   tests/shards/run.sh [BIN_DIR]      (default build/bin)
# Ends with "shards: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
F=$BIN/fedsvd
SVC_SUITE=shards
SVC_OK="ok  "
. "$(dirname "$0")/../lib/services.sh"
svc_need fedsvd aggregation-server masking-server client-agent
jget() { node "$JLIB" get "$@" 2>/dev/null; }

# ---- data: 4 parties x 300 rows x 40 columns
"$F" gen powerlaw --rows 1200 --cols 40 --seed 19 --out-dir "$T/parts" --parties 4 \
  >/dev/null 2>"$T/gen.err"
PARTIES=()
for i in 1 2 3 4; do PARTIES+=(--party "$T/parts/party-$i.npy"); done
check "fedsvd gen: 4 parties of 300 x 40" test -s "$T/parts/party-4.npy"

# Small chunks (the servers read FEDSVD_CHUNK_WORDS): each shard's window
# is many chunks, the last one shorter, so the chunk numbering within the
# windows is exercised.
run_local() { # NAME ALGORITHM [extra options]: fedsvd local into $T/NAME
  local name=$1 alg=$2
  shift 2
  FEDSVD_CHUNK_WORDS=700 "$F" local --algorithm "$alg" "${PARTIES[@]}" --out "$T/$name" --verify --timeout 120 "$@" \
    >"$T/$name.out" 2>"$T/$name.err"
}

# The shard rows of summary.json: [lo, hi] of each shard, the row split
# floor(s N / S), and a peak memory per shard.
summary_ok() { # DIR S N
  node -e '
    const s = JSON.parse(require("fs").readFileSync(process.argv[1] + "/summary.json", "utf8"));
    const S = +process.argv[2], N = +process.argv[3];
    const sh = s.shards;
    if (!Array.isArray(sh) || sh.length !== S) { console.error("shards:", JSON.stringify(sh)); process.exit(1); }
    for (let i = 0; i < S; i++) {
      const e = sh[i];
      const lo = Math.floor(i * N / S), hi = Math.floor((i + 1) * N / S);
      if (e.shard !== i || !Array.isArray(e.rows) || e.rows[0] !== lo || e.rows[1] !== hi ||
          !Number.isInteger(e.peak_rss_bytes) || e.peak_rss_bytes <= 0) {
        console.error("shard", i, JSON.stringify(e)); process.exit(1);
      }
    }
  ' "$1" "$2" "$3"
}
# Every peer of the run took several masked chunks of every party (PUT
# /v1/shards/{job}/masked/{c}, 204): more than one per party.
peers_took_chunks() { # DIR S
  local s n
  for s in $(seq 1 $(($2 - 1))); do
    n=$(grep -c '"route":"/v1/shards/{job}/masked/{chunk}","status":204' \
      "$1/logs/aggregation-shard-$s.log")
    [ "$n" -gt 8 ] || { echo "     shard $s took $n chunks"; return 1; }
  done
}
sv_err() { jget "$1/summary.json" .verification.sv_error; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }

# ---- fedsvd: unsharded, 3 shards, 4 shards
run_local svd1 fedsvd
check "fedsvd local (unsharded) is done" test -s "$T/svd1/S.npy"
for S in 3 4; do
  t0=$(date +%s%N)
  # with 4 shards, agent 2 is killed while it uploads and resumes (its
  # chunks to every shard are sent again, byte for byte)
  extra=()
  [ "$S" = 3 ] && extra=(--test-mask-seed 0123abcd)
  [ "$S" = 4 ] && extra=(--restart agent-2@masked_input)
  run_local "svd$S" fedsvd --shards "$S" "${extra[@]}"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  check "fedsvd local --shards $S is done (${ms} ms)" test "$rc" -eq 0 -a -s "$T/svd$S/S.npy"
  d=$("$F" compare --a "$T/svd$S/S.npy" --b "$T/svd1/S.npy" --metric sv --tol 1e-12 2>&1)
  check "fedsvd --shards $S: singular values = the unsharded run's to 1e-12 ($d)" test $? -eq 0
  d=$("$F" compare --a "$T/svd$S/V.npy" --b "$T/svd1/V.npy" --metric subspace --tol 1e-9 2>&1)
  check "fedsvd --shards $S: V spans the unsharded V ($d)" test $? -eq 0
  e=$(sv_err "$T/svd$S")
  check "fedsvd --shards $S: singular values = the central SVD's to 1e-12 (--verify: $e)" below "$e" 1e-12
  check "fedsvd --shards $S: summary.json lists $S shards, their rows and peak memory" \
    summary_ok "$T/svd$S" "$S" 1200
  check "fedsvd --shards $S: every shard peer took the parties' masked chunks" \
    peers_took_chunks "$T/svd$S" "$S"
done
check "fedsvd --shards 4: agent 2 was killed in masked_input and resumed" \
  test "$(jget "$T/svd4/summary.json" '.restarts[0].killed_in.phase')" = masked_input

# ---- shard peers and the coordinator killed (-9) and started again: the
# peers reload their windows from disk (shard 1 after every upload, in
# consistency, which only a job with --allow-dropouts has; shard 2 as
# masked_input begins), the coordinator resumes
# from its events; with the same test mask seed the result is the
# undisturbed --shards 3 run's, byte for byte
run_local svd3r fedsvd --shards 3 --test-mask-seed 0123abcd \
  --allow-dropouts --restart aggregation-shard-1@consistency \
  --restart aggregation-shard-2@masked_input \
  --restart aggregation-server@unmasking
check "fedsvd local --shards 3 with peers and the coordinator restarted is done" \
  test $? -eq 0 -a -s "$T/svd3r/S.npy"
for f in S.npy V.npy party-1/U.npy party-4/U.npy; do
  check "restarted --shards 3: $f = the undisturbed run's (cmp)" cmp -s "$T/svd3r/$f" "$T/svd3/$f"
done
d=$("$F" compare --a "$T/svd3r/S.npy" --b "$T/svd1/S.npy" --metric sv --tol 1e-12 2>&1)
check "restarted --shards 3: singular values = the unsharded run's to 1e-12 ($d)" test $? -eq 0
check "restarted --shards 3: summary.json records the three restarts" \
  test "$(jget "$T/svd3r/summary.json" '.restarts.length')" = 3 \
  -a "$(jget "$T/svd3r/summary.json" '.restarts[0].service')" = aggregation-shard-1 \
  -a "$(jget "$T/svd3r/summary.json" '.restarts[0].fired')" = true \
  -a "$(jget "$T/svd3r/summary.json" '.restarts[2].service')" = aggregation-server
check "restarted --shards 3: shard 1 reloaded its window with the parties' chunks" \
  grep -Eq '"shard window reloaded".*"shard":1,"chunks":[1-9]' "$T/svd3r/logs/aggregation-shard-1.log"
check "the unsharded run's summary has no shards" \
  test "$(jget "$T/svd1/summary.json" .shards)" = ""

# ---- fedpca: unsharded and 3 shards
run_local pca1 fedpca --k 8
run_local pca3 fedpca --k 8 --shards 3
check "fedpca local --shards 3 is done" test -s "$T/pca3/components.npy"
d=$("$F" compare --a "$T/pca3/singular_values.npy" --b "$T/pca1/singular_values.npy" --metric sv \
  --tol 1e-12 2>&1)
check "fedpca --shards 3: singular values = the unsharded run's to 1e-12 ($d)" test $? -eq 0
d=$("$F" compare --a "$T/pca3/components.npy" --b "$T/pca1/components.npy" --metric subspace \
  --tol 1e-9 2>&1)
check "fedpca --shards 3: components span the unsharded ones ($d)" test $? -eq 0
e=$(sv_err "$T/pca3")
check "fedpca --shards 3: = the central PCA's singular values to 1e-12 (--verify: $e)" below "$e" 1e-12
check "fedpca --shards 3: summary.json lists 3 shards" summary_ok "$T/pca3" 3 1200
check "fedpca --shards 3: every shard peer took the parties' masked chunks" \
  peers_took_chunks "$T/pca3" 3

# ---- usage errors of the CLI
"$F" local --algorithm fedsvd "${PARTIES[@]}" --out "$T/u1" --partition features --shards 2 \
  >/dev/null 2>"$T/u1.err"
check "fedsvd local --shards with the features partition: usage error (exit 2)" \
  bash -c "[ $? -eq 2 ] && grep -q 'samples partition' '$T/u1.err'"
"$F" local --algorithm fedsvd "${PARTIES[@]}" --out "$T/u2" --shards 3 \
  --restart aggregation-shard-3@masked_input >/dev/null 2>"$T/u2.err"
check "fedsvd local --shards 3 --restart aggregation-shard-3: usage error, shards 1..2 (exit 2)" \
  bash -c "[ $? -eq 2 ] && grep -q 'the shard number' '$T/u2.err'"
"$F" local --algorithm fedsvd "${PARTIES[@]}" --out "$T/u4" \
  --restart aggregation-shard-1@masked_input >/dev/null 2>"$T/u4.err"
check "fedsvd local --restart aggregation-shard-1 without --shards: usage error (exit 2)" \
  bash -c "[ $? -eq 2 ] && grep -q 'only with --shards' '$T/u4.err'"
"$F" job create --server http://127.0.0.1:1 --admin-token-file /dev/null --algorithm secure-sum \
  --parties 3 --shape 2,2 --allow-unpinned --shards 2 >/dev/null 2>"$T/u3.err"
check "fedsvd job create --shards for secure-sum: usage error (exit 2)" \
  bash -c "[ $? -eq 2 ] && grep -q -- '--shards' '$T/u3.err'"

# ---- the peer token; more shards than peers
tok() { printf 'tok-%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$1"; chmod 600 "$1"; }
tok "$T/peer.token"
tok "$T/other.token"
svc_start p1 P1PORT "$BIN/aggregation-server" --data-dir "$T/p1" \
  --admin-token-file "$T/admin.token" --peer-token-file "$T/other.token"
P1=$SVC_URL
svc_start c CPORT "$BIN/aggregation-server" --data-dir "$T/c" \
  --admin-token-file "$T/admin.token" --peer-token-file "$T/peer.token" --shard-peer "$P1"
C=$SVC_URL
PK=()
for i in 1 2 3 4; do PK+=(--party-key "$i:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"); done
create() { # S: a fedsvd job of 1200 x 40 with S shards on the coordinator
  "$F" job create --server "$C" --admin-token-file "$T/admin.token" --algorithm fedsvd \
    --shape 1200,40 --party-sizes 300,300,300,300 --masking-server http://127.0.0.1:1 \
    --masking-token-file "$T/admin.token" "${PK[@]}" --shards "$1" --format json
}
create 2 >"$T/bad.out" 2>"$T/bad.err"
rc=$?
check "a shard peer with another peer token: the job is refused, naming the shard (exit $rc)" \
  bash -c "[ $rc -ne 0 ] && grep -q 'shard 1' '$T/bad.err' && grep -Eqi '401|403|token' '$T/bad.err'"
check "... and the coordinator has no job left" \
  bash -c "[ \"\$(curl -s -H 'Authorization: Bearer $ADMIN' '$C/v1/jobs' |
    node -e 'let s=\"\";process.stdin.on(\"data\",d=>s+=d).on(\"end\",()=>{const j=JSON.parse(s);const a=Array.isArray(j)?j:(j.jobs||[]);console.log(a.filter(x=>x.state===\"running\").length)})')\" = 0 ]"
code=$(curl -s -o "$T/over.json" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" \
  -H 'Content-Type: application/json' "$C/v1/jobs" --data-binary '{"algorithm": "fedsvd",
  "parties": 4, "shape": [1200, 40], "party_sizes": [300, 300, 300, 300], "shards": 3,
  "allow_unpinned": true}')
check "a job asking for 3 shards from a server with 1 peer: 400 ($code: $(jget "$T/over.json" .detail))" \
  test "$code" = 400
svc_summary
