#!/bin/bash
# The partner workflow with the CLI only, on loopback: a masking server, an
# aggregation server and 3 client-agents; the coordinator pins the agents'
# identities (`fedsvd agent identity`) and creates a fedpca job (`fedsvd job
# create`); the three sites join at once (`fedsvd join --wait`, in parallel)
# and fetch their results (`fedsvd participation list|status|result`), which
# match the centralised LAPACK SVD of the pooled data. Then the refusals:
# result files already in DIR (no --force), an unknown participation id, a
# result file corrupted on the agent's disk (its sha256 no longer matches),
# a bad invitation file, a dataset the agent cannot open. Finally the join
# phase: with the default join timeout and 2 s rounds, a job whose third
# party has not joined is still waiting after 5 s (agents that joined early
# run with a 3 s stall limit, which does not apply while the job waits), its
# join deadline is a day away, Ctrl-C stops `join --wait` without stopping
# the participation, and the job completes once the third party joins.
# Last, a `fedsvd local` fedpca job whose server is held up (a test hook,
# as by a slow disk) for longer than the round timeout each time it opens an
# exponents round: every party's exponent is still taken, nobody dropped.
#
#   tests/agent/partner_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/services.sh"
svc_need client-agent aggregation-server masking-server fedsvd
jget() { node "$JLIB" get "$@"; }
F=$BIN/fedsvd
below() { awk -v v="$1" -v b="$2" 'BEGIN { exit !(v != "" && v + 0 <= b + 0) }'; }
between() { awk -v v="$1" -v a="$2" -v b="$3" 'BEGIN { exit !(v != "" && v + 0 >= a + 0 && v + 0 <= b + 0) }'; }

svc_server
svc_masking
svc_agents 3 --poll-ms 50 --stall-timeout 3
OPT=(--token-file "$T/op.token")
svc_party_keys 3
check "fedsvd agent identity --agent --token-file: 3 fingerprints" \
  bash -c '[ "$(printf "%s\n" "$@" | grep -cE "^[1-3]:[0-9a-f]{64}$")" = 3 ]' _ "${PKEYS[1]}" "${PKEYS[3]}" "${PKEYS[5]}"

"$F" gen planted --rows 240 --cols 20 --rank 4 --noise 0.2 --seed 5 --out-dir "$T/d" --parties 3 \
  --split 60,100,80 >/dev/null
"$F" svd --input "$T/d/party-1.npy" --input "$T/d/party-2.npy" --input "$T/d/party-3.npy" \
  --center --k 3 --out "$T/ref" >/dev/null
create() { # DIR [extra args]: a fedpca job, invitations in DIR
  local dir=$1; shift
  "$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm fedpca --k 3 \
    "${PKEYS[@]}" --shape 240,20 --party-sizes 60,100,80 --masking-server "$MURL" \
    --masking-token-file "$T/madmin.token" --out-dir "$dir" --format json "$@" >"$dir.json"
}

echo "== three sites join a fedpca job at once (fedsvd join --wait)"
create "$T/pca"
JOB=$(jget "$T/pca.json" .job.id)
for i in 1 2 3; do
  "$F" join --agent "${AURL[$i]}" "${OPT[@]}" --invitation "$T/pca/invitation-$i.json" \
    --data "$T/d/party-$i.npy" --wait --interval 0.1 >"$T/join$i.out" 2>"$T/join$i.err" &
  JP[$i]=$!
done
for i in 1 2 3; do
  wait "${JP[$i]}"
  check "site $i: join --wait exits 0" [ $? = 0 ]
  check "site $i: the participation id alone on stdout" grep -qxE 'p-[0-9a-f]{32}' "$T/join$i.out"
  check "site $i: progress on stderr, one line per change, ending done" bash -c '
    sed -n "s/^fedsvd join: \[ *[0-9.]*s\] //p" "$1" >"$1.lines"
    [ "$(wc -l <"$1.lines")" -ge 2 ] && [ -z "$(uniq -d "$1.lines")" ] &&
      tail -n 2 "$1" | grep -q "done" && grep -q "participation result" "$1"' _ "$T/join$i.err"
done
ID1=$(head -n 1 "$T/join1.out")

"$F" participation list --agent "${AURL[1]}" "${OPT[@]}" --format json >"$T/list.json"
check "participation list: the one participation, done, for the job" \
  [ "$(jget "$T/list.json" '.participations[*].state')" = '["done"]' -a \
    "$(jget "$T/list.json" '.participations[0].job_id')" = "$JOB" ]
check "participation list (text): id, job and state" \
  bash -c '"$1" participation list --agent "$2" --token-file "$3" | grep -q "^$4 *$5 *1 *fedpca *done"' \
  _ "$F" "${AURL[1]}" "$T/op.token" "$ID1" "$JOB"
check "participation status without ID (the only one): done" \
  bash -c '"$1" participation status --agent "$2" --token-file "$3" | grep -qx "state *done"' \
  _ "$F" "${AURL[1]}" "$T/op.token"
"$F" participation status --agent "${AURL[2]}" "${OPT[@]}" "$(head -n 1 "$T/join2.out")" --format json \
  >"$T/status2.json"
check "participation status ID --format json: party 2, progress 1" \
  [ "$(jget "$T/status2.json" .party)" = 2 -a "$(jget "$T/status2.json" .progress)" = 1 ]

for i in 1 2 3; do
  "$F" participation result --agent "${AURL[$i]}" "${OPT[@]}" --out "$T/r$i" >"$T/result$i.out" 2>"$T/result$i.err"
  check "site $i: participation result exits 0" [ $? = 0 ]
done
curl -s -H "Authorization: Bearer $(cat "$T/op.token")" "${AURL[1]}/v1/participations/$ID1/result" >"$T/doc1.json"
check "the result document lists name, bytes and sha256 of every file" bash -c '
  n=$(node "$1" get "$2" .files.length) && [ "$n" -ge 4 ] &&
  [ "$(node "$1" get "$2" ".files[*].bytes" | tr , "\n" | grep -cE "^\[?[0-9]+\]?$")" = "$n" ]' _ "$JLIB" "$T/doc1.json"
check "site 1: every listed file is in DIR with its bytes and sha256" bash -c '
  i=0
  for name in $(node "$1" get "$2" ".files[*].name" | tr -d "[]\"" | tr , " "); do
    want=$(node "$1" get "$2" ".files[$i].sha256"); bytes=$(node "$1" get "$2" ".files[$i].bytes")
    [ "$(sha256sum "$3/$name" | cut -d" " -f1)" = "$want" ] && [ "$(stat -c %s "$3/$name")" = "$bytes" ] || exit 1
    i=$((i + 1))
  done
  [ "$i" -ge 4 ] && [ -z "$(ls -A "$3" | grep "^\.")" ]' _ "$JLIB" "$T/doc1.json" "$T/r1"
for i in 1 2 3; do
  v=$("$F" compare --a "$T/r$i/singular_values.npy" --b "$T/ref/S.npy" --metric sv --k 3)
  check "site $i: singular values vs LAPACK on the pooled data ($v)" below "$v" 1e-12
  v=$("$F" compare --a "$T/r$i/components.npy" --b "$T/ref/V.npy" --metric subspace --k 3)
  check "site $i: components vs LAPACK on the pooled data ($v)" below "$v" 1e-10
done

echo "== refusals"
sum_before=$(sha256sum "$T/r1"/* | sha256sum)
"$F" participation result --agent "${AURL[1]}" "${OPT[@]}" --out "$T/r1" >/dev/null 2>"$T/again.err"
check "result into a DIR that has the files: exit 1, naming --force" \
  bash -c '[ "$1" = 1 ] && grep -q -- "--force" "$2"' _ $? "$T/again.err"
check "  ... and the files are untouched" [ "$(sha256sum "$T/r1"/* | sha256sum)" = "$sum_before" ]
"$F" participation result --agent "${AURL[1]}" "${OPT[@]}" "$ID1" --out "$T/r1" --force >/dev/null 2>&1
check "result --force replaces them: exit 0" [ $? = 0 ]
"$F" participation status --agent "${AURL[1]}" "${OPT[@]}" p-0123456789abcdef0123456789abcdef \
  >/dev/null 2>"$T/unknown.err"
check "status of an unknown id: exit 1, saying so" \
  bash -c '[ "$1" = 1 ] && grep -q "no participation p-0123456789abcdef0123456789abcdef on this agent" "$2"' \
  _ $? "$T/unknown.err"
"$F" participation result --agent "${AURL[1]}" "${OPT[@]}" p-0123456789abcdef0123456789abcdef \
  --out "$T/unknown" >/dev/null 2>"$T/unknown2.err"
check "result of an unknown id: exit 1, saying so" \
  bash -c '[ "$1" = 1 ] && grep -q "no participation" "$2"' _ $? "$T/unknown2.err"
"$F" participation status --agent "${AURL[1]}" "${OPT[@]}" not-an-id >/dev/null 2>"$T/badid.err"
check "a malformed id: usage error (exit 2)" bash -c '[ "$1" = 2 ] && grep -q "not a participation id" "$2"' _ $? "$T/badid.err"
# a result file damaged on the agent's disk: same size, one byte changed
victim="$T/agent1/participations/$ID1/components.npy"
printf '\x7f' | dd of="$victim" bs=1 seek=$(($(stat -c %s "$victim") - 3)) conv=notrunc 2>/dev/null
"$F" participation result --agent "${AURL[1]}" "${OPT[@]}" --out "$T/rc" >/dev/null 2>"$T/corrupt.err"
check "a corrupted result file: exit 1, naming the sha256 mismatch" \
  bash -c '[ "$1" = 1 ] && grep -q "components.npy" "$2" && grep -q "sha256" "$2"' _ $? "$T/corrupt.err"
check "  ... and it is not left in DIR (nor a temporary)" \
  bash -c '[ ! -e "$1/components.npy" ] && [ -z "$(ls -A "$1" | grep "^\.")" ]' _ "$T/rc"

echo '{}' >"$T/empty.json"
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --invitation "$T/empty.json" --data "$T/d/party-1.npy" \
  >/dev/null 2>"$T/badinv.err"
check "join with a bad invitation file: exit 1, saying what is wrong" \
  bash -c '[ "$1" = 1 ] && grep -q "not a valid invitation" "$2"' _ $? "$T/badinv.err"
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --invitation "$T/nonexistent.json" --data "$T/d/party-1.npy" \
  >/dev/null 2>"$T/noinv.err"
check "join with a missing invitation file: exit 1, cannot open" \
  bash -c '[ "$1" = 1 ] && grep -q "cannot open" "$2"' _ $? "$T/noinv.err"
node -e 'const fs=require("fs");const d=process.argv[1];
  fs.writeFileSync(`${d}/all.json`,JSON.stringify([1,2,3].map(i=>JSON.parse(fs.readFileSync(`${d}/pca/invitation-${i}.json`)))))' "$T"
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --invitation "$T/all.json" --data "$T/d/party-1.npy" \
  >/dev/null 2>"$T/list.err"
check "join with the creator's list of invitations: exit 1, asking for one" \
  bash -c '[ "$1" = 1 ] && grep -q "list of 3 invitations" "$2"' _ $? "$T/list.err"
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --data "$T/d/party-1.npy" >/dev/null 2>"$T/usage.err"
check "join without --invitation: usage error (exit 2)" [ $? = 2 ]

"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm secure-sum \
  --parties 2 --shape 2,2 --allow-unpinned --join-timeout 600 --format json >"$T/jt.json" 2>/dev/null
dl=$(jget "$T/jt.json" .job.deadline_in_s)
check "job create --join-timeout 600: the join closes in 600 s ($dl)" between "$dl" 590 600
"$F" job create --server "$SURL" --admin-token-file "$T/admin.token" --algorithm secure-sum \
  --parties 2 --shape 2,2 --allow-unpinned --join-timeout 604801 >/dev/null 2>"$T/jt.err"
check "job create --join-timeout above 7 days: usage error (exit 2)" \
  bash -c '[ "$1" = 2 ] && grep -q -- "--join-timeout" "$2"' _ $? "$T/jt.err"

echo "== the join phase waits for every party (default join timeout, 2 s rounds)"
create "$T/slow" --round-timeout 2
SJOB=$(jget "$T/slow.json" .job.id)
"$F" join --agent "${AURL[3]}" "${OPT[@]}" --invitation "$T/slow/invitation-3.json" \
  --data "$T/d/no-such-file.npy" >/dev/null 2>"$T/nodata.err"
check "join with a dataset the agent cannot open: exit 1, naming the agent's machine" \
  bash -c '[ "$1" = 1 ] && grep -q "cannot open" "$2" && grep -q "agent'"'"'s machine" "$2"' _ $? "$T/nodata.err"
# party 1's operator follows its participation (and later presses Ctrl-C); party 2's does not
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --invitation "$T/slow/invitation-1.json" \
  --data "$T/d/party-1.npy" --wait >"$T/slow1.id" 2>"$T/slow1.err" &
JW=$!
"$F" join --agent "${AURL[2]}" "${OPT[@]}" --invitation "$T/slow/invitation-2.json" \
  --data "$T/d/party-2.npy" >"$T/slow2.id" 2>"$T/slow2.err"
check "slow: party 2 joined (no --wait): exit 0" [ $? = 0 ]
for _ in $(seq 100); do [ -s "$T/slow1.id" ] && break; sleep 0.05; done
"$F" join --agent "${AURL[1]}" "${OPT[@]}" --invitation "$T/slow/invitation-1.json" \
  --data "$T/d/party-1.npy" >/dev/null 2>"$T/twice.err"
check "slow: joining party 1 twice is refused (exit 1)" bash -c '[ "$1" = 1 ] && grep -q "already" "$2"' _ $? "$T/twice.err"
sleep 5
"$F" job status --server "$SURL" --token-file "$T/admin.token" --job "$SJOB" --format json >"$T/slow.status.json"
check "slow: after 5 s the job still waits for its parties (running, waiting_for_parties, 1 and 2 present)" \
  [ "$(jget "$T/slow.status.json" .state)" = running -a \
    "$(jget "$T/slow.status.json" .phase)" = waiting_for_parties -a \
    "$(jget "$T/slow.status.json" .present)" = '[1,2]' ]
dl=$(jget "$T/slow.status.json" .deadline_in_s)
check "slow: the join deadline is a day away ($dl s)" between "$dl" 86000 86400
check "slow: job status (text) shows the join deadline in hours" \
  bash -c '"$1" job status --server "$2" --token-file "$3" --job "$4" | grep -qE "^join ends +86[0-9]{3}\.[0-9] s \(23 h [0-9]{2} min\)$"' \
  _ "$F" "$SURL" "$T/admin.token" "$SJOB"
for i in 1 2; do
  "$F" participation status --agent "${AURL[$i]}" "${OPT[@]}" "$(head -n 1 "$T/slow$i.id")" --format json >"$T/slow$i.json"
  check "slow: party $i's participation still running past its agent's 3 s stall limit" \
    [ "$(jget "$T/slow$i.json" .state)" = running ]
done
"$F" participation status --agent "${AURL[1]}" "${OPT[@]}" >/dev/null 2>"$T/two.err"
check "status without ID when the agent has two: usage error listing them" \
  bash -c '[ "$1" = 2 ] && grep -q "has 2 participations" "$2" && grep -q "$3" "$2"' _ $? "$T/two.err" "$ID1"
# Ctrl-C while waiting: only the waiting stops
kill -INT "$JW"
wait "$JW"
check "slow: Ctrl-C stops join --wait (exit 130), saying the participation keeps running" \
  bash -c '[ "$1" = 130 ] && grep -q "keeps running on the agent" "$2"' _ $? "$T/slow1.err"
check "  ... with a progress line that names the wait for the other parties" \
  grep -q "the job starts once every party has joined" "$T/slow1.err"
"$F" participation status --agent "${AURL[1]}" "${OPT[@]}" "$(head -n 1 "$T/slow1.id")" --format json >"$T/slow1.json"
check "  ... and party 1's participation is still running" [ "$(jget "$T/slow1.json" .state)" = running ]
"$F" join --agent "${AURL[3]}" "${OPT[@]}" --invitation "$T/slow/invitation-3.json" \
  --data "$T/d/party-3.npy" --wait >"$T/slow3.id" 2>"$T/slow3.err"
check "slow: party 3 joins late with --wait: exit 0" [ $? = 0 ]
for i in 1 2; do
  for _ in $(seq 100); do # their last step may end just after party 3's
    "$F" participation status --agent "${AURL[$i]}" "${OPT[@]}" "$(head -n 1 "$T/slow$i.id")" \
      --format json >"$T/slow$i.json"
    [ "$(jget "$T/slow$i.json" .state)" = running ] || break
    sleep 0.1
  done
  check "slow: party $i done" [ "$(jget "$T/slow$i.json" .state)" = done ]
done
"$F" participation result --agent "${AURL[3]}" "${OPT[@]}" "$(head -n 1 "$T/slow3.id")" --out "$T/rs" >/dev/null
v=$("$F" compare --a "$T/rs/components.npy" --b "$T/ref/V.npy" --metric subspace --k 3)
check "slow: party 3's components vs LAPACK ($v)" below "$v" 1e-10

echo "== a round opened while the server is held up (a slow disk) keeps its whole round timeout"
# FEDSVD_TEST_PERSIST_DELAY_MS (a test hook) makes the server take 2.5 s longer, holding the
# job's lock, to persist the job as it enters exponents: aggregation 0 at the close of
# share_keys, aggregation 1 on the worker that publishes the mean. The parties see each
# round open and send at once; their messages wait for the lock past the 2 s round timeout.
FEDSVD_TEST_PERSIST_DELAY_MS=2500@exponents TMPDIR="$T" "$F" local --algorithm fedpca --k 3 \
  --party "$T/d/party-1.npy" --party "$T/d/party-2.npy" --party "$T/d/party-3.npy" \
  --round-timeout 2 --timeout 60 --out "$T/held" >"$T/held.log" 2>&1
check "held server: the job is done with every party (exit 0, nobody dropped)" \
  bash -c '[ "$1" = 0 ] && [ "$(node "$2" get "$3/summary.json" .dropped)" = "[]" ] &&
    [ "$(node "$2" get "$3/summary.json" .survivors)" = "[1,2,3]" ]' _ $? "$JLIB" "$T/held"
[ -f "$T/held/components.npy" ] || tail -n 2 "$T/held.log"
v=$("$F" compare --a "$T/held/components.npy" --b "$T/ref/V.npy" --metric subspace --k 3 2>/dev/null)
check "held server: components vs LAPACK ($v)" below "$v" 1e-10

svc_summary
