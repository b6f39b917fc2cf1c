#!/usr/bin/env bash
# The crash matrix: `fedsvd local --restart SERVICE@PHASE[:R]` runs in which
# a service is killed with SIGKILL when the job enters a phase and started
# again on its port with its data directory (docs/cli.md, "Trying the
# system's resilience"). Each case of tests/chaos/matrix.txt (algorithm,
# service, phase, expected outcome) is run and its outcome asserted against
# the table:
#   finish        the job ends done, nobody dropped, the restart fired; the
#                 result files are byte-identical (cmp) to the uninterrupted
#                 run's (secure-sum: sum.npy; fedpca: every result file, both
#                 runs with the same --test-mask-seed, so that they draw the
#                 same masks, and one BLAS thread), and for the DP
#                 algorithms party 1's privacy ledger (GET /v1/privacy-ledger
#                 on its agent, restarted on the kept data directory) holds
#                 exactly one entry for the job, spent, counted once;
#   fail-cleanly  the job fails with a reason (or the killed agent's
#                 participation error) starting "cannot resume after restart:".
# The aggregation server is killed at its testing stop point
# (FEDSVD_TEST_STOP_AT_PHASE, which fedsvd local sets for it): it holds the
# job once the phase is persisted, so its kill lands exactly there, every
# time (a server case asserts that its log says the stop point was reached,
# and fails when the kill came late or never). PHASE done kills it once the
# job's end is logged but before it is stored; PHASE begin once the key-sharing
# round's close is logged but before aggregation 0's begin is (the restarted
# server must begin it, once). An agent (agent-I or client-agent-I) is
# killed at its own stop point, set the same way: it holds its participation
# the first time a poll of its shows the job in PHASE, before it sends
# anything of that phase; the masking server at PHASE keys[:P] at its stop
# point too, once it sent party P's masks (the first party's), after which
# it holds every key request. Those cases too must be killed exactly there
# (their log says so), but an agent's in factorizing, where it has nothing
# to send and a poll of its may miss the phase. The masking server at a job
# phase (it does not know them) is killed when the CLI's polls see the
# phase: a kill that came late (the phase was over before a poll saw it) is
# run once more; the table shows the phase the service was really killed
# in. After the matrix, one fedpca run with four restarts of the
# aggregation server.
# Before the matrix: --restart's usage errors (exit 2, one line, the reason),
# and the services refusing a FEDSVD_TEST_STOP_AT_PHASE that is not theirs.
# With fedpca's uninterrupted run, one more without --test-mask-seed: its
# random masks must change the last bits of its result files (only within
# 1e-12), which shows that the test seed is what makes the cmp hold.
#
#   tests/chaos/run.sh [BIN_DIR]     (default build/bin)
#
# Environment: CHAOS_FULL=1 runs every case (make test-chaos), otherwise only
# those marked quick (make test); CHAOS_ONLY=REGEX keeps the cases whose
# "ALGORITHM SERVICE PHASE" line matches; CHAOS_ROUND_TIMEOUT (default 30)
# is each job's --round-timeout, which bounds how long a case whose party
# never comes back takes (an agent retries a server that is down after up to
# 2 s, longer on a busy host), CHAOS_CASE_TIMEOUT (default 60) each run's
# --timeout. KEEP=1 keeps the temporary directory, with the summary and the
# services' logs of every case that failed (failed-N/). Ends with
# "chaos: P passed, F failed".
set -u
BIN=${1:-build/bin}
F=$BIN/fedsvd
HERE=$(cd "$(dirname "$0")" && pwd)
JLIB=$HERE/../lib/json.mjs
MATRIX=${CHAOS_MATRIX:-$HERE/matrix.txt}
RT=${CHAOS_ROUND_TIMEOUT:-30}
CT=${CHAOS_CASE_TIMEOUT:-60}
pass=0
failn=0
finish() {
  echo "chaos: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
ok() {
  pass=$((pass + 1))
  echo "ok   $*"
}
bad() {
  failn=$((failn + 1))
  echo "FAIL $*"
}
for b in fedsvd aggregation-server masking-server client-agent; do
  [ -x "$BIN/$b" ] || bad "$BIN/$b not built"
done
for c in node curl cmp awk; do
  command -v "$c" >/dev/null || bad "need $c"
done
[ "$failn" -eq 0 ] || finish

# Bit-identical results need the same masks (an INSECURE test-only seed for
# the masking server, fedsvd local --test-mask-seed) and the same BLAS
# thread count in every run.
TSEED=0123456789abcdef0123456789abcdef
export OPENBLAS_NUM_THREADS=1
T=$(mktemp -d)
AGENT_PID=
cleanup() {
  [ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT
# fedsvd local makes its temporary directories (kept with --keep) under TMPDIR
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"

jget() { node "$JLIB" get "$1" "$2" 2>/dev/null; }

# ---- the data: 3 parties, 40 x 20 for secure-sum/fedpca, 80 x 30 for the power methods
gen() {
  for i in 1 2 3; do
    "$F" gen planted --rows 40 --cols 20 --rank 5 --noise 1 --seed $((40 + i)) \
      --out "$T/d/s-$i.npy" >/dev/null || return 1
  done
  "$F" gen planted --rows 240 --cols 30 --rank 3 --gap 0.1 --decay 0.9 --seed 11 \
    --out-dir "$T/d/pw" --parties 3 >/dev/null
}
mkdir -p "$T/d"
gen || { bad "fedsvd gen"; finish; }
SPARTS=(--party "$T/d/s-1.npy" --party "$T/d/s-2.npy" --party "$T/d/s-3.npy")
PPARTS=(--party "$T/d/pw/party-1.npy" --party "$T/d/pw/party-2.npy" --party "$T/d/pw/party-3.npy")

# ARGS=(...): the fedsvd local options of algorithm $1 (all but --out); a
# job that hangs is given up after CT seconds
args_for() {
  case $1 in
    secure-sum) ARGS=(--algorithm secure-sum "${SPARTS[@]}" --round-timeout "$RT") ;;
    fedpca | fedsvd) ARGS=(--algorithm "$1" --k 3 "${SPARTS[@]}" --round-timeout "$RT"
      --test-mask-seed "$TSEED") ;;
    fedpower) ARGS=(--algorithm fedpower --k 3 --iterations 4 --sync-every 2 "${PPARTS[@]}"
      --round-timeout "$RT") ;;
    fedpower-private)
      ARGS=(--algorithm fedpower-private --k 3 --iterations 4 --sync-every 2 --epsilon 4
        --clip-z 1 --bound-m 1 --bound-mode clip "${PPARTS[@]}" --round-timeout "$RT") ;;
    fedpower-utility)
      ARGS=(--algorithm fedpower-utility --k 3 --iterations 4 --sync-every 2 --epsilon 4
        --paillier-bits 1024 "${PPARTS[@]}" --round-timeout "$RT") ;;
    dp-ppm) ARGS=(--algorithm dp-ppm --k 3 --iterations 4 --epsilon 4 "${PPARTS[@]}"
      --round-timeout "$RT") ;;
    *) return 1 ;;
  esac
  ARGS+=(--timeout "$CT")
}

# ---- usage errors of --restart: exit 2, one line on stderr naming the reason
# expect_usage NAME EXPECTED-TEXT ARGS...: `fedsvd local ARGS` exits 2 with
# one line on stderr that holds EXPECTED-TEXT, and writes no summary
expect_usage() {
  local name=$1 want=$2
  shift 2
  rm -rf "$T/u"
  "$F" local "$@" --out "$T/u" >"$T/u.out" 2>"$T/u.err"
  local rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l <"$T/u.err")" -eq 1 ] && grep -qF -- "$want" "$T/u.err" &&
    [ ! -e "$T/u/summary.json" ]; then
    ok "usage: $name"
  else
    bad "usage: $name: exit $rc, stderr: $(head -c 300 "$T/u.err")"
  fi
}
usage() { # NAME EXPECTED-TEXT ALGORITHM SPEC
  args_for "$3"
  expect_usage "$1" "$2" "${ARGS[@]}" --restart "$4"
}
echo "== --restart usage errors"
usage "unknown service" "SERVICE must be aggregation-server, masking-server" \
  secure-sum bogus@masked_input
usage "agent index out of range" "agent number: must be between 1 and 3" secure-sum \
  agent-4@masked_input
usage "agent-0" "agent number: must be between 1 and 3" secure-sum agent-0@masked_input
usage "unknown phase" "unknown phase 'masked'" secure-sum agent-1@masked
usage "phase secure-sum never enters" "a secure-sum job never enters factorizing" secure-sum \
  aggregation-server@factorizing
usage "noise_exchange outside fedpower-utility" "a dp-ppm job never enters noise_exchange" \
  dp-ppm agent-1@noise_exchange
usage "masking-server without one" "only fedsvd and fedpca use a masking-server" dp-ppm \
  masking-server@masked_input
usage "R on a once-per-job phase" "share_keys happens once" fedpca aggregation-server@share_keys:1
usage "R on factorizing" "factorizing happens once, after the last aggregation" fedpca \
  aggregation-server@factorizing:1
usage "R on done" "done happens once, after the last aggregation" fedpca \
  aggregation-server@done:1
usage "done for an agent" "PHASE done is for the aggregation-server only" secure-sum agent-1@done
usage "begin for an agent" "PHASE begin is for the aggregation-server only" fedpca agent-1@begin
usage "R on begin" "PHASE begin is for the aggregation-server only, without :R" dp-ppm \
  aggregation-server@begin:0
usage "R not a number" "the aggregation R" dp-ppm aggregation-server@masked_input:x
usage "no @" "expected SERVICE@PHASE[:R]" dp-ppm aggregation-server
usage "consistency without --allow-dropouts" "enters consistency only with --allow-dropouts" \
  fedpca agent-1@consistency
usage "a later noise exchange without --allow-dropouts" \
  "the job's one noise exchange is in aggregation 0" fedpower-utility agent-1@noise_exchange:1
# --test-mask-seed: hex only, and only where there is a masking server
tseed_usage() { # NAME EXPECTED-TEXT ALGORITHM VALUE
  expect_usage "$1" "$2" --algorithm "$3" "${SPARTS[@]}" --test-mask-seed "$4"
}
tseed_usage "--test-mask-seed not hex" "expected an even number (2..128) of hex digits" fedpca \
  0123456789abcdeg
tseed_usage "--test-mask-seed odd length" "expected an even number (2..128) of hex digits" \
  fedpca abc
tseed_usage "--test-mask-seed with secure-sum" "only fedsvd and fedpca use a masking-server" \
  secure-sum 00ff
# known only once the job exists (5 aggregations: 4 iterations and the
# eigenvalues), before any agent joins it
args_for dp-ppm
"$F" local "${ARGS[@]}" --out "$T/u5" --restart aggregation-server@masked_input:5 >"$T/u.out" \
  2>"$T/u.err"
rc=$?
if [ "$rc" -eq 2 ] && [ "$(tail -n 1 "$T/u.err" | grep -cF "the job has 5 aggregations (R = 0..4)")" = 1 ] &&
  { p=$(jget "$T/u5/summary.json" '.parties[0].participation'); [ -z "$p" ] || [ "$p" = null ]; }; then
  ok "usage: R beyond the job's aggregations"
else
  bad "usage: R beyond the job's aggregations: exit $rc, $(tail -n 1 "$T/u.err")"
fi
"$F" local --algorithm secure-sum "${SPARTS[@]}" --out "$T/u" --restart >"$T/u.out" 2>"$T/u.err"
[ $? -eq 2 ] && grep -q "needs a value" "$T/u.err" && ok "usage: --restart without a value" ||
  bad "usage: --restart without a value: $(cat "$T/u.err")"
usage "client-agent-I out of range" "agent number: must be between 1 and 3" secure-sum \
  client-agent-4@masked_input
usage "keys for an agent" "PHASE keys is for the masking-server only" fedpca client-agent-1@keys
usage "keys:P beyond the parties" "the party P of keys:P: must be between 1 and 3" fedsvd \
  masking-server@keys:4
# the services' stop points: a value that is not one is refused at start
mkdir -p "$T/sp"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/sp/tok"
chmod 600 "$T/sp/tok"
for sv in aggregation-server:waiting_for_parties aggregation-server:masked_input:x \
  aggregation-server:begin:0 client-agent:done client-agent:begin client-agent:masked_input:x \
  masking-server:masked_input masking-server:keys:0 masking-server:keys:x; do
  s=${sv%%:*} v=${sv#*:} tf=--admin-token-file
  [ "$s" = client-agent ] && tf=--operator-token-file
  rm -rf "$T/sp/d"
  FEDSVD_TEST_STOP_AT_PHASE=$v timeout 10 "$BIN/$s" --listen 127.0.0.1:0 \
    --data-dir "$T/sp/d" "$tf" "$T/sp/tok" >"$T/sp.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "FEDSVD_TEST_STOP_AT_PHASE: " "$T/sp.log"; then
    ok "usage: $s refuses FEDSVD_TEST_STOP_AT_PHASE=$v"
  else
    bad "usage: $s with FEDSVD_TEST_STOP_AT_PHASE=$v: exit $rc, $(tail -n 1 "$T/sp.log")"
  fi
done
"$F" local --help >"$T/help" 2>&1
grep -q -- "--restart SERVICE@PHASE\[:R\]" "$T/help" && ok "--help documents --restart" ||
  bad "--help lacks --restart"
grep -q -- "--test-mask-seed HEX fedsvd/fedpca, for reproducibility tests only; never in" "$T/help" &&
  ok "--help documents --test-mask-seed as test-only" || bad "--help lacks --test-mask-seed"

# ---- the cases
CASES=()
while read -r alg svc ph expect mark rest; do
  case $alg in '' | '#'*) continue ;; esac
  if [ -z "$expect" ] || { [ "$expect" != finish ] && [ "$expect" != fail-cleanly ]; }; then
    bad "$MATRIX: bad line: $alg $svc $ph $expect"
    continue
  fi
  if [ "${CHAOS_FULL:-0}" != 1 ] && [ "$mark" != quick ]; then continue; fi
  if [ -n "${CHAOS_ONLY:-}" ] && ! printf '%s %s %s\n' "$alg" "$svc" "$ph" | grep -Eq -- "$CHAOS_ONLY"; then
    continue
  fi
  CASES+=("$alg $svc $ph $expect")
done <"$MATRIX"

FEDPCA_FILES="components singular_values explained_variance explained_variance_ratio mean
  party-1/scores party-2/scores party-3/scores"

# the uninterrupted runs the lossless results are compared with
declare -A BASE
baseline() { # ALGORITHM
  [ -n "${BASE[$1]:-}" ] && return 0
  args_for "$1"
  local t0=$SECONDS
  if "$F" local "${ARGS[@]}" --out "$T/base-$1" >"$T/base-$1.log" 2>&1; then
    ok "$1: uninterrupted run ($((SECONDS - t0)) s)"
    BASE[$1]=$T/base-$1
    [ "$1" = fedpca ] && random_masks_differ
  else
    bad "$1: uninterrupted run failed: $(tail -n 1 "$T/base-$1.log")"
    BASE[$1]=none
  fi
}

# fedpca without --test-mask-seed: fresh random masks, so some result file
# differs from the seeded run's in its last bits, and every one is within
# 1e-12 of its largest entry
random_masks_differ() {
  local a=() f v ndiff=0 why= skip=0
  for f in "${ARGS[@]}"; do # the fedpca arguments without --test-mask-seed HEX
    if [ "$f" = --test-mask-seed ]; then skip=1; elif [ "$skip" = 1 ]; then skip=0; else a+=("$f"); fi
  done
  if ! "$F" local "${a[@]}" --out "$T/random" >"$T/random.log" 2>&1; then
    bad "fedpca without --test-mask-seed failed: $(tail -n 1 "$T/random.log")"
    return
  fi
  grep -q "test-mask-seed" "$T/random.log" && why="it still warned about --test-mask-seed"
  [ "$(jget "$T/base-fedpca/summary.json" .deterministic_masks)" = true ] ||
    why="the seeded run's summary.json lacks deterministic_masks: true"
  [ -z "$(jget "$T/random/summary.json" .deterministic_masks)" ] ||
    why="its summary.json says deterministic_masks"
  for f in $FEDPCA_FILES; do
    cmp -s "$T/random/$f.npy" "$T/base-fedpca/$f.npy" || ndiff=$((ndiff + 1))
    v=$("$F" compare --a "$T/random/$f.npy" --b "$T/base-fedpca/$f.npy" --metric maxrel 2>/dev/null)
    if [ -z "$v" ] || ! awk -v v="$v" 'BEGIN { exit !(v + 0 <= 1e-12) }'; then
      why="$f.npy: max rel. difference '${v:-missing}'"
    fi
  done
  if [ -z "$why" ] && [ "$ndiff" -gt 0 ]; then
    ok "fedpca without --test-mask-seed: random masks, $ndiff of 8 files differ in the last bits (within 1e-12)"
  else
    bad "fedpca without --test-mask-seed: ${why:-every file byte-identical to the seeded run}"
  fi
  rm -rf "$T/random"
}

# WHY=...: empty when the files of run $2 equal the uninterrupted run of $1
same_result() {
  local alg=$1 out=$2 b=${BASE[$1]:-} f v
  WHY=
  case $alg in
    secure-sum)
      cmp -s "$b/sum.npy" "$out/sum.npy" || WHY="sum.npy differs from the uninterrupted run's" ;;
    fedpca) # the same --test-mask-seed: the same masks, bit-identical files
      for f in $FEDPCA_FILES; do
        if ! cmp -s "$out/$f.npy" "$b/$f.npy"; then
          v=$("$F" compare --a "$out/$f.npy" --b "$b/$f.npy" --metric maxrel 2>/dev/null)
          WHY="$f.npy differs from the uninterrupted run's (max rel. difference ${v:-missing})"
          return
        fi
      done ;;
    fedsvd) # every result file, as fedpca's
      for f in $(cd "$b" && find . -name '*.npy' | sort); do
        cmp -s "$out/$f" "$b/$f" || { WHY="$f differs from the uninterrupted run's"; return; }
      done ;;
  esac
}

# WHY=...: empty when party 1's privacy ledger charged job $2 exactly once
# (its agent started again on data directory $1/agent-1 of the kept run)
ledger_once() {
  local root=$1 job=$2 port i
  WHY=
  rm -f "$T/lport"
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/lport" --data-dir "$root/agent-1" \
    --token-file "$root/operator.token" 2>>"$T/ledger-agent.log" &
  AGENT_PID=$!
  for i in $(seq 200); do
    [ -s "$T/lport" ] && break
    sleep 0.02
  done
  port=$(cat "$T/lport" 2>/dev/null)
  if [ -z "$port" ] ||
    ! curl -sf -o "$T/ledger.json" -H "Authorization: Bearer $(cat "$root/operator.token")" \
      "http://127.0.0.1:$port/v1/privacy-ledger"; then
    WHY="GET /v1/privacy-ledger of agent-1 failed"
  else
    WHY=$(node -e '
      const l = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      const job = process.argv[2];
      const es = [];
      let spent = 0;
      for (const d of l.datasets) {
        spent += d.rho_spent;
        for (const e of d.entries) if (e.job_id === job) es.push(e);
      }
      if (es.length !== 1) console.log(`${es.length} ledger entries for the job`);
      else if (es[0].state !== "spent") console.log(`ledger entry ${es[0].state}, not spent`);
      else if (!(Math.abs(spent - es[0].rho) <= 1e-12 * es[0].rho))
        console.log(`rho spent ${spent}, the job costs ${es[0].rho}`);' "$T/ledger.json" "$job")
  fi
  kill "$AGENT_PID" 2>/dev/null
  wait "$AGENT_PID" 2>/dev/null
  AGENT_PID=
}

# 0 when the restart of service $1 at $2 is placed exactly by the service's
# testing stop point: the aggregation server's, an agent's (but in
# factorizing, where it has nothing to send: its stop point fires only when
# one of its polls falls in that phase, which may be over first), the
# masking server's at keys
by_stop() {
  case $1@$2 in
    agent-*@factorizing | client-agent-*@factorizing) return 1 ;;
    aggregation-server@* | agent-*@* | client-agent-*@* | masking-server@keys*) return 0 ;;
  esac
  return 1
}
# the process (and log) name of service $1: client-agent-N is agent-N
proc_name() { echo "${1#client-}"; }

# Run one case; GOT (finish | fail-cleanly | what happened instead), KILLED, DOWN, SECS.
run_case() { # ALGORITHM SERVICE PHASE
  local alg=$1 svc=$2 ph=$3 out=$T/case root job state err perr fired idx f n
  rm -rf "$out"
  args_for "$alg"
  # only secure-sum and jobs with --allow-dropouts have a consistency round,
  # and only the latter a noise exchange after aggregation 0
  case $alg:$ph in
    secure-sum:*) ;;
    *:consistency* | *:noise_exchange:[1-9]*) ARGS+=(--allow-dropouts) ;;
  esac
  local t0=$SECONDS
  "$F" local "${ARGS[@]}" --out "$out" --restart "$svc@$ph" --keep >"$T/case.out" 2>"$T/case.err"
  local rc=$?
  SECS=$((SECONDS - t0))
  root=$(sed -n 's/^fedsvd local: kept \(.*\) (data dirs, tokens, logs)$/\1/p' "$T/case.err")
  GOT= KILLED=- DOWN=- LATE=
  idx=-1
  case $svc in agent-* | client-agent-*) idx=$((${svc##*-} - 1)) ;; esac
  # the fields of summary.json, one a line (one node process: it starts slowly on a busy host)
  f=()
  [ -s "$out/summary.json" ] && mapfile -t f < <(node -e '
    let s = {};
    try { s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); } catch (e) {}
    const r = (s.restarts || [])[0] || {}, k = r.killed_in || {};
    const p = (s.parties || [])[Number(process.argv[2])] || {};
    const one = (v) => String(v === undefined || v === null ? "" : v).replace(/\n/g, " ");
    for (const v of [r.fired, s.state, s.error, s.job_id, k.phase, k.aggregation,
                     r.down_s === undefined ? "" : r.down_s.toFixed(2), r.late,
                     JSON.stringify(s.dropped), p.error]) console.log(one(v));' \
    "$out/summary.json" "$idx")
  fired=${f[0]:-} state=${f[1]:-} err=${f[2]:-} job=${f[3]:-} perr=${f[9]:-}
  if [ "$fired" = true ]; then
    KILLED="${f[4]}:${f[5]}"
    DOWN=${f[6]}
    [ "${f[7]}" = true ] && LATE=1
  fi
  if [ ! -s "$out/summary.json" ]; then
    GOT="no summary.json (exit $rc): $(tail -n 1 "$T/case.err")"
  elif [ "$fired" != true ]; then
    GOT="restart never fired (state $state)"
  elif [ "$rc" -eq 0 ] && [ "$state" = done ]; then
    if [ "${f[8]}" != "[]" ]; then
      GOT="done without party ${f[8]}"
    else
      same_result "$alg" "$out"
      if [ -z "$WHY" ] && { [ "$alg" = dp-ppm ] || [ "$alg" = fedpower-utility ]; }; then
        if [ -n "$root" ]; then ledger_once "$root" "$job"; else WHY="no kept directory"; fi
      fi
      GOT=${WHY:-finish}
    fi
  elif [ "${err#cannot resume after restart:}" != "$err" ] ||
    [ "${perr#cannot resume after restart:}" != "$perr" ]; then
    GOT=fail-cleanly
  else
    GOT="failed: ${err:-exit $rc}${perr:+ (party: $perr)}"
  fi
  # the kills placed by a stop point: the server's (but at
  # waiting_for_parties, which fedsvd local places itself, right after it
  # created the job), every agent's and the masking server's at keys,
  # exactly there: not late, and the service's log says it reached it
  if by_stop "$svc" "$ph" && { [ "$GOT" = finish ] || [ "$GOT" = fail-cleanly ]; }; then
    if [ -n "$LATE" ]; then
      GOT="killed late, in $KILLED"
    elif [ "$svc@$ph" != aggregation-server@waiting_for_parties ] &&
      ! grep -q '"msg":"test stop point reached' "$root/$(proc_name "$svc").log" 2>/dev/null; then
      GOT="$GOT, but not at its stop point (its log does not say it reached it)"
    fi
  fi
  # begin: the restarted server began aggregation 0 itself, exactly once
  if [ "$svc" = aggregation-server ] && [ "$ph" = begin ] && [ "$GOT" = finish ]; then
    if ! grep -q '"msg":"key sharing closed before the restart: beginning aggregation 0"' \
      "$root/aggregation-server.log" 2>/dev/null; then
      GOT="finish, but the restarted server did not begin aggregation 0 itself"
    elif command -v sqlite3 >/dev/null; then
      n=$(sqlite3 "$root/aggregation-server/server.db" "SELECT count(*) FROM events WHERE
        kind = 'begin' AND json_extract(CAST(body AS TEXT), '\$.r') = 0" 2>/dev/null)
      [ "$n" = 1 ] || GOT="finish, but aggregation 0 has ${n:-no} begin events in the server's log"
    fi
  fi
  [ -n "$root" ] && rm -rf "$root"
}

echo "== the crash matrix (${#CASES[@]} cases$([ "${CHAOS_FULL:-0}" = 1 ] || echo ", quick part; CHAOS_FULL=1 for all"))"
: >"$T/table"
for c in "${CASES[@]}"; do
  read -r alg svc ph expect <<<"$c"
  case $alg in secure-sum | fedpca | fedsvd) baseline "$alg" ;; esac
  if [ "${BASE[$alg]:-}" = none ]; then
    bad "$alg $svc@$ph: no uninterrupted run to compare with"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$alg" "$svc" "$ph" "$expect" "-" "-" "-" \
      "-" "FAIL" >>"$T/table"
    continue
  fi
  run_case "$alg" "$svc" "$ph"
  if ! by_stop "$svc" "$ph" &&
    { [ -n "$LATE" ] || [ "${GOT#restart never fired}" != "$GOT" ]; }; then
    # once more: the phase may be seen this time (on a busy host a short last
    # phase can end, and the job with it, between two of the CLI's polls;
    # the kills placed by a stop point are exact instead)
    run_case "$alg" "$svc" "$ph"
  fi
  if [ "$GOT" = "$expect" ]; then
    verdict=ok
    ok "$alg $svc@$ph: $GOT (killed in $KILLED, down $DOWN s, ${SECS} s)"
  else
    verdict=FAIL
    nfailed=$((${nfailed:-0} + 1))
    mv "$T/case" "$T/failed-$nfailed" 2>/dev/null
    cp "$T/case.err" "$T/failed-$nfailed.stderr" 2>/dev/null
    bad "$alg $svc@$ph: expected $expect, got $GOT (killed in $KILLED, ${SECS} s; KEEP=1: failed-$nfailed/)"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$alg" "$svc" "$ph" "$expect" \
    "$(printf '%s' "$GOT" | cut -c1-60)" "$KILLED${LATE:+ (late)}" "$DOWN" "$SECS" "$verdict" >>"$T/table"
done

# several NAME ALGORITHM ORDER WANT SPEC...: one run of ALGORITHM with a
# --restart per SPEC passes when it ends done, every restart fired and none
# late (each killed exactly in its phase), WANT lists them (ORDER time: in
# the order they fired; spec: sorted) and the result files are
# byte-identical to the uninterrupted run's
several() {
  local name=$1 alg=$2 order=$3 want=$4 out=$T/several a=() sp got rc
  shift 4
  for sp in "$@"; do a+=(--restart "$sp"); done
  baseline "$alg"
  args_for "$alg"
  rm -rf "$out"
  "$F" local "${ARGS[@]}" --out "$out" "${a[@]}" >"$out.out" 2>"$out.err"
  rc=$?
  got=$(node -e '
    let s = {};
    try { s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); } catch (e) {}
    const r = (s.restarts || []).filter((x) => x.fired && !x.late);
    if (process.argv[2] === "time") r.sort((a, b) => a.after_s - b.after_s);
    const l = r.map((x) => x.spec);
    if (process.argv[2] !== "time") l.sort();
    console.log(s.state + " " + l.join(","));' "$out/summary.json" "$order" 2>/dev/null)
  WHY=
  [ "${BASE[$alg]:-none}" != none ] && same_result "$alg" "$out"
  if [ "$rc" -eq 0 ] && [ "$got" = "done $want" ] && [ -z "$WHY" ]; then
    ok "$name"
  else
    bad "$name: exit $rc, got '$got'${WHY:+, $WHY}: $(tail -n 1 "$out.err")"
  fi
}
# Several restarts of the aggregation server in one fedpca run, given out of
# order: the server is started again with the next one's stop point each
# time, so each lands exactly in its phase, in the job's order, and the
# result files are still byte-identical to the uninterrupted run's.
if [ -z "${CHAOS_ONLY:-}" ] || printf 'fedpca aggregation-server several\n' | grep -Eq -- "$CHAOS_ONLY"; then
  several "fedpca: four aggregation-server restarts in one run, each exactly in its phase, same result" \
    fedpca time "aggregation-server@unmasking,aggregation-server@exponents:1,aggregation-server@factorizing,aggregation-server@done" \
    aggregation-server@done aggregation-server@exponents:1 aggregation-server@unmasking \
    aggregation-server@factorizing
fi
# An agent restarted twice and the masking server once (at keys) in one
# fedsvd run: the agent is started again with its next stop point, each
# restart lands exactly in its phase, and the result is the same.
if [ -z "${CHAOS_ONLY:-}" ] || printf 'fedsvd client-agent several\n' | grep -Eq -- "$CHAOS_ONLY"; then
  several "fedsvd: two client-agent-2 restarts and one masking-server@keys:2 in one run, each exactly in its phase, same result" \
    fedsvd spec "client-agent-2@share_keys,client-agent-2@unmasking:0,masking-server@keys:2" \
    client-agent-2@unmasking:0 masking-server@keys:2 client-agent-2@share_keys
fi

if [ -s "$T/table" ]; then
  echo
  echo "== crash matrix"
  awk -F'\t' 'BEGIN { printf "%-17s %-19s %-20s %-13s %-26s %7s %5s  %s\n", "algorithm",
      "service", "phase[:R]", "expected", "killed in", "down s", "s", "outcome" }
    { o = $9 == "ok" ? $5 : "FAIL: " $5
      printf "%-17s %-19s %-20s %-13s %-26s %7s %5s  %s\n", $1, $2, $3, $4, $6, $7, $8, o }' \
    "$T/table"
  echo
fi
left=$(pgrep -f -- "$TMPDIR/fedsvd-local-" | tr '\n' ' ')
[ -z "$left" ] && ok "no service process left" || bad "processes left: $left"
finish
