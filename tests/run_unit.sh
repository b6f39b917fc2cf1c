#!/usr/bin/env bash
# Run every unit-test program in DIR (default build/tests) and add up the
# "<name>: P passed, F failed" lines they print. A program that crashes or
# prints no summary counts as one failure.
set -u
dir=${1:-build/tests}
label=${2:-unit}
passed=0
failed=0
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    out=$("$t" 2>&1)
    rc=$?
    line=$(printf '%s\n' "$out" | grep -E "^$name: [0-9]+ passed, [0-9]+ failed$" | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 20
        echo "$label/$name: crashed or printed no summary (exit $rc)"
        failed=$((failed + 1))
        continue
    fi
    p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    if [ "$f" -ne 0 ]; then
        printf '%s\n' "$out" | grep -E 'FAIL|not ok|ERROR|Sanitizer|runtime error' | head -n 40
    fi
    echo "$label/$line"
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "$label total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
