#!/usr/bin/env bash
# Run every test suite and end with one line "N passed, N failed".
# Suites: unit tests (normal build), the same under AddressSanitizer and
# UndefinedBehaviorSanitizer, every tests/*/run.sh against build/bin, and the
# CLI tests against the sanitizer build.
#
# The suites run TEST_JOBS at a time (default: the number of CPUs, at most 2;
# TEST_JOBS=1 runs them one after the other); tests/contract runs alone (it
# picks 15 free ports before its proxies bind them). Each suite's output is
# kept and printed whole, in the order above, followed by "== SUITE: N s"
# (its own time, while another suite ran alongside).
# TEST_SUITES="agent lsa" runs only those tests/NAME/run.sh suites (and no
# unit tests unless it names "unit"); TEST_BUILD=DIR tests DIR/bin and
# DIR/tests instead of build/ (the sanitizer build stays build-asan/).
set -u
cd "$(dirname "$0")/.."
B=${TEST_BUILD:-build}
passed=0
failed=0
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ -z "${TEST_JOBS:-}" ] && [ "$jobs" -gt 2 ] 2>/dev/null && jobs=2
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

add_counts() { # parse "...: P passed, F failed" from the last matching line of a log
    local log=$1 line p f
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        return
    fi
    p=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) passed, [0-9]+ failed$/\1/; s/^([0-9]+) passed.*/\1/')
    f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p))
    failed=$((failed + f))
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# the steps: a title and a command line each, in the order of the report
titles=()
cmds=()
alone=()
step() { titles+=("$1"); cmds+=("$2"); alone+=("${3:-}"); }
chosen() { [ -z "${TEST_SUITES:-}" ] || [[ " $TEST_SUITES " == *" $1 "* ]]; }
# (the unit-test runner would run two programs at once itself: one here,
# the suites are what runs side by side)
ujobs=
[ "$jobs" -gt 1 ] && ujobs="TEST_JOBS=1 "
if chosen unit; then
    step "unit tests" "${ujobs}tests/run_unit.sh $B/tests unit"
    step "unit tests under ASan/UBSan" "${ujobs}ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 tests/run_unit.sh build-asan/tests asan"
fi
for suite in tests/*/run.sh; do
    [ -x "$suite" ] || continue
    name=$(basename "$(dirname "$suite")")
    chosen "$name" || continue
    step "$(dirname "$suite")" "$suite $B/bin" "$([ "$name" = contract ] && echo alone)"
done
# The CLI reads every file format: run its suite against the sanitizer build
# too, so a malformed file that crashes or leaks fails the run.
if [ -x build-asan/bin/fedsvd ] && chosen cli; then
    step "tests/cli under ASan/UBSan" "ASAN_OPTIONS=detect_leaks=1 tests/cli/run.sh build-asan/bin"
fi

# step I: its output to $out/I.log, then its time to $out/I.done
run_step() {
    local t0=$SECONDS
    env ${cmds[$1]} >"$out/$1.log" 2>&1 </dev/null
    echo $((SECONDS - t0)) >"$out/$1.tmp"
    mv "$out/$1.tmp" "$out/$1.done"
}
# start the steps in order, $jobs at a time; a step marked alone after the
# running ones end, and the next ones after it
(
    running=0
    for i in "${!cmds[@]}"; do
        if [ -n "${alone[$i]}" ]; then
            wait
            running=0
            run_step "$i"
            continue
        fi
        if [ "$running" -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
        run_step "$i" &
        running=$((running + 1))
    done
    wait
) &
starter=$!

# report each step in order once it is done
for i in "${!cmds[@]}"; do
    echo "== ${titles[$i]}"
    while [ ! -e "$out/$i.done" ] && kill -0 "$starter" 2>/dev/null; do
        sleep 0.2
    done
    if [ -e "$out/$i.done" ]; then
        cat "$out/$i.log"
        add_counts "$out/$i.log"
        echo "== ${titles[$i]}: $(cat "$out/$i.done") s"
    else
        echo "== ${titles[$i]}: did not run"
        failed=$((failed + 1))
    fi
done
wait "$starter" 2>/dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
