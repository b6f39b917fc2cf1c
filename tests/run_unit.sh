#!/usr/bin/env bash
# Run every unit-test program in DIR (default build/tests) and add up the
# "<name>: P passed, F failed" lines they print. A program that crashes or
# prints no summary counts as one failure. The programs run TEST_JOBS at a
# time (default: the number of CPUs, at most 2); their reports are printed
# in name order, as each is read.
set -u
dir=${1:-build/tests}
label=${2:-unit}
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 2 ] 2>/dev/null && [ -z "${TEST_JOBS:-}" ] && jobs=2
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
passed=0
failed=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

progs=()
for t in "$dir"/test_*; do
    [ -x "$t" ] && progs+=("$t")
done

# one program: its output to $out/N.out, its exit status to $out/N.rc
run_one() {
    "$1" >"$out/$2.out" 2>&1
    echo $? >"$out/$2.rc.tmp"
    mv "$out/$2.rc.tmp" "$out/$2.rc"
}
# start the programs in order, at most $jobs at once
(
    running=0
    for i in "${!progs[@]}"; do
        if [ "$running" -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
        run_one "${progs[$i]}" "$i" &
        running=$((running + 1))
    done
    wait
) &
lanes=$!

for i in "${!progs[@]}"; do
    t=${progs[$i]}
    name=$(basename "$t")
    while [ ! -e "$out/$i.rc" ]; do
        kill -0 "$lanes" 2>/dev/null || { [ -e "$out/$i.rc" ] || echo 1 >"$out/$i.rc"; break; }
        sleep 0.1
    done
    rc=$(cat "$out/$i.rc")
    line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed$" "$out/$i.out" | tail -n 1)
    if [ -z "$line" ]; then
        tail -n 20 "$out/$i.out"
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
        grep -E 'FAIL|not ok|ERROR|Sanitizer|runtime error' "$out/$i.out" | head -n 40
    fi
    echo "$label/$line"
    passed=$((passed + p))
    failed=$((failed + f))
done
wait "$lanes" 2>/dev/null
echo "$label total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
