#!/usr/bin/env bash
# fedpower against fedpower-utility (seed exchange, then ot) at Netflix
# size, on one machine without network: generates the synthetic ratings
# (324 468 users x 17 711 items, 96 000 000 ratings, 100 parties as real
# processes; r = k = 10, T = 92, p = 4, sigma = 0.1; bench/scale_fedpower.sh
# does the work) and prints the job times and the ratios. Made for a machine with many cores
# and a time limit: it prints as it goes (the data generation, each run's
# job time as it ends, and every 30 s the progress of the run under way).
#
# Usage: bench/netflix_scale.sh [BUILD] [SIZE]
#   BUILD  build directory with bin/fedsvd and the services (default build;
#          built with `make BUILD=...` first if missing)
#   SIZE   fraction of the Netflix size (default 1): users and ratings times
#          SIZE, items times sqrt(SIZE); e.g. 0.01 for a quick check
# Environment: NETFLIX_PARTIES [100], NETFLIX_TIMEOUT seconds per run [300],
#   NETFLIX_DIR data and runs [/tmp/fedsvd-netflix], NETFLIX_ALGORITHMS
#   ["fedpower fedpower-utility"], NETFLIX_EXCHANGES the noise exchanges of
#   fedpower-utility, one run each ["seed ot"].
# Needs about 1.2 GB of disk and 8-12 GB of memory at SIZE 1.
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-build}
size=${2:-1}
parties=${NETFLIX_PARTIES:-100}

if ! awk -v s="$size" 'BEGIN { exit !(s > 0 && s <= 1) }'; then
    echo "netflix_scale: SIZE must be in (0, 1], got $size" >&2
    exit 2
fi
if [ ! -x "$build/bin/fedsvd" ] || [ ! -x "$build/bin/aggregation-server" ] ||
    [ ! -x "$build/bin/client-agent" ]; then
    echo "netflix_scale: building $build ..."
    make BUILD="$build" -j"$(nproc)" all >/dev/null || exit 2
fi
read -r users items ratings < <(awk -v s="$size" 'BEGIN {
    printf "%d %d %d\n", 324468 * s, (s < 1 ? 17711 * sqrt(s) : 17711), 96000000 * s }')

dir=${NETFLIX_DIR:-/tmp/fedsvd-netflix}
mkdir -p "$dir/runs" || exit 2
export FEDSVD_SCALE_DIR="$dir"
export SCALE_USERS="$users" SCALE_ITEMS="$items" SCALE_RATINGS="$ratings"
export SCALE_PARTIES="$parties" SCALE_ITERATIONS=92 SCALE_SYNC_EVERY=4 SCALE_K=10
export SCALE_ALGORITHMS="${NETFLIX_ALGORITHMS:-fedpower fedpower-utility}"
export SCALE_EXCHANGES="${NETFLIX_EXCHANGES:-seed ot}"
export SCALE_REFERENCE=none SCALE_TIMEOUT="${NETFLIX_TIMEOUT:-300}"

echo "== netflix_scale: size $size ($(nproc) cores, $(date +%T))"
start=$(date +%s)
bench/scale_fedpower.sh "$build" &
pid=$!
# progress of the run under way: the last line of its stderr every 30 s
while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do
        sleep 1
        kill -0 "$pid" 2>/dev/null || break
    done
    kill -0 "$pid" 2>/dev/null || break
    cur=$(ls -t "$dir"/runs/*/stderr.txt 2>/dev/null | head -n 1)
    line=""
    [ -n "$cur" ] && line=$(tail -n 1 "$cur" | cut -c1-150)
    echo "  [$(($(date +%s) - start)) s] ${line:-generating data}"
done
wait "$pid"
rc=$?
echo "== netflix_scale: done in $(($(date +%s) - start)) s (exit $rc)"
exit "$rc"
