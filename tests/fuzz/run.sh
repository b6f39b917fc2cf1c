#!/usr/bin/env bash
# The fuzz corpus as regression tests: every harness (tests/fuzz/fuzz_*.c,
# linked with driver.c instead of libFuzzer) replays every input of
# tests/fuzz/corpus/<harness>/ once in the normal build and once in the
# ASan/UBSan build; a crash, a sanitizer report (leaks included) or a broken
# invariant fails the harness. The crashers fuzzing found are in the corpus.
#
#   tests/fuzz/run.sh [BIN_DIR]     (default build/bin)
#
# The builds are BIN_DIR's parent (build) and the same name with "-asan"
# (build-asan), as `make test` makes them (make tests builds the replay
# programs in <build>/fuzz-replay/).
# Ends with "fuzz: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BIN")
pass=0
failn=0
check_one() { # build label harness
  local build=$1 label=$2 h=$3 out rc
  local exe=$build/fuzz-replay/$h
  if [ ! -x "$exe" ]; then
    failn=$((failn + 1)); echo "FAIL $h ($label): $exe not built"; return
  fi
  out=$(ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout 120 "$exe" "$HERE/corpus/$h" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); echo "ok   $h ($label, $(printf '%s' "$out" | tail -n 1))"
  else
    failn=$((failn + 1)); echo "FAIL $h ($label): exit $rc"; printf '%s\n' "$out" | tail -n 30
  fi
}
t0=$SECONDS
for src in "$HERE"/fuzz_*.c; do
  h=$(basename "$src" .c)
  if [ ! -d "$HERE/corpus/$h" ]; then
    failn=$((failn + 1)); echo "FAIL $h: no corpus directory tests/fuzz/corpus/$h"; continue
  fi
  check_one "$ROOT" gcc "$h"
  check_one "$ROOT-asan" asan "$h"
done
echo "fuzz: corpus replay took $((SECONDS - t0)) s"
echo "fuzz: $pass passed, $failn failed"
[ "$failn" -eq 0 ]
