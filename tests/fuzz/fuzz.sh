#!/usr/bin/env bash
# Run the libFuzzer harnesses (make fuzz builds them into FUZZ_BUILD/fuzzers),
# one after another, each for FUZZ_SECONDS (default 60) on one core, or,
# with FUZZ_RUNS=N, for N executions (no time limit), from its seed corpus
# tests/fuzz/corpus/<harness> (read only: new inputs go to
# FUZZ_BUILD/corpus/<harness>). JSON harnesses get tests/fuzz/json.dict.
# The matrix readers and the noise exchange get a smaller -max_len than
# the documents: their formats are compact, and long inputs only slow them
# (the noise-exchange harness's key makes messages of 34 to 67 bytes; a
# longer public key is a bigger Paillier key, whose checks cost more and
# test nothing more).
# A crash leaves FUZZ_BUILD/crashes/<harness>-crash-<sha1>; fix it, add that
# file to tests/fuzz/corpus/<harness>/ (a regression input) and rerun.
#
#   tests/fuzz/fuzz.sh FUZZ_BUILD [HARNESS...]
#
# Prints per harness the executions and executions per second; exits
# non-zero when a harness crashed.
set -u
FB=${1:?usage: fuzz.sh FUZZ_BUILD [HARNESS...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SECS=${FUZZ_SECONDS:-60}
RUNS=${FUZZ_RUNS:-}
if [ -n "$RUNS" ]; then
  limit=(-runs="$RUNS")
  span="$RUNS runs"
else
  limit=(-max_total_time="$SECS")
  span="$SECS s"
fi
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for src in "$HERE"/fuzz_*.c; do names+=("$(basename "$src" .c)"); done
fi
# A 32 MiB quarantine (256 by default) still catches a use after free
# within an input, and the allocator reuses memory that is still mapped (a
# quarter fewer page faults per execution); 8 frames of allocation and free
# stacks (30 by default) are enough to place a bad access and cost less to
# record on every malloc. A crash's own stack is complete either way.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32:malloc_context_size=8}
mkdir -p "$FB/crashes" "$FB/logs"
bad=0
for h in "${names[@]}"; do
  exe=$FB/fuzzers/$h
  [ -x "$exe" ] || { echo "fuzz: $exe not built"; bad=1; continue; }
  mkdir -p "$FB/corpus/$h"
  dict=()
  case $h in fuzz_npy|fuzz_csv|fuzz_mtx|fuzz_idx|fuzz_noisex|fuzz_http) ;; *) dict=(-dict="$HERE/json.dict");; esac
  maxlen=65536
  case $h in fuzz_npy|fuzz_csv|fuzz_mtx|fuzz_idx) maxlen=8192;; fuzz_noisex) maxlen=128;; esac
  log=$FB/logs/$h.log
  "$exe" "${limit[@]}" -timeout=20 -rss_limit_mb=2560 -max_len=$maxlen \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="$FB/crashes/$h-" \
    "$FB/corpus/$h" "$HERE/corpus/$h" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
  if [ $rc -eq 0 ]; then
    echo "fuzz: $h: ${execs:-?} executions, ${rate:-?}/s, ${cov:-cov: ?} in ${span}"
  else
    bad=1
    echo "fuzz: $h: CRASH (exit $rc) after ${execs:-?} executions; log $log"
    grep -m 3 'ERROR\|SUMMARY\|invariant failed\|runtime error' "$log"
  fi
done
exit $bad
