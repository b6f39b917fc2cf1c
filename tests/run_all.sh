#!/usr/bin/env bash
# Run every test suite and end with one line "N passed, N failed".
# Suites: unit tests (normal build), the same under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the CLI tests against build/bin/fedsvd.
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0

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

log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== unit tests"
tests/run_unit.sh build/tests unit | tee "$log"
add_counts "$log"

echo "== unit tests under ASan/UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    tests/run_unit.sh build-asan/tests asan | tee "$log"
add_counts "$log"

for suite in tests/*/run.sh; do
    [ -x "$suite" ] || continue
    echo "== $(dirname "$suite")"
    t0=$SECONDS
    "$suite" build/bin | tee "$log"
    add_counts "$log"
    echo "== $(dirname "$suite"): $((SECONDS - t0)) s"
done

# The CLI reads every file format: run its suite against the sanitizer build
# too, so a malformed file that crashes or leaks fails the run.
if [ -x build-asan/bin/fedsvd ]; then
    echo "== tests/cli under ASan/UBSan"
    ASAN_OPTIONS=detect_leaks=1 tests/cli/run.sh build-asan/bin | tee "$log"
    add_counts "$log"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
