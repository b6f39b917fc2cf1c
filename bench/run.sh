#!/usr/bin/env bash
# Run every benchmark program in BUILD/bench (bench_svd, bench_prg,
# bench_paillier, bench_fedpower: Liu et al. 2023's accuracy comparison and the
# noise exchange's costs, bench_ppm_ratio: Nicolas et al. 2024's r(k, n),
# bench_dgauss: the fast, the previous and the reference exact discrete Gaussian samplers
# side by side, bench_csr: a Netflix-sized party's A^T (A Z), the row-major
# kernel against the column-by-column loop it replaced, bench_ed25519: our
# Ed25519 verification against OpenSSL's, ...)
# and print their output, then time `fedsvd svd` end to end (including .npy
# reading and writing) on a generated 10000 x 1000 matrix. The scale experiment of the
# power methods is separate: bench/scale_fedpower.sh (see its header).
# Last, bench/bench_fedsvd_services.sh: FedSVD with the real services (the
# wall time, critical path, bytes and peak memory of every process), and the
# fedpower-utility / fedpower job-time ratio at 20 parties (scale_fedpower.sh),
# once with the seed (Paillier) exchange and once with ot.
# Prints figures and ratios; asserts nothing. Exits non-zero only if a
# benchmark program fails or a step cannot run.
#
# Usage: bench/run.sh [BUILD]   (default build)
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
status=0

found=0
for b in "$build"/bench/bench_*; do
    [ -x "$b" ] || continue
    found=1
    echo "== $(basename "$b")"
    start=$(date +%s.%N)
    "$b"
    rc=$?
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v n="$(basename "$b")" -v rc="$rc" \
        'BEGIN { printf "(%s: %.1f s, exit %d)\n", n, e - s, rc }'
    [ "$rc" -eq 0 ] || status=1
done
[ "$found" -eq 1 ] || echo "no benchmark programs in $build/bench (run: make benches)"

fedsvd="$build/bin/fedsvd"
echo "== fedsvd svd end to end (10000 x 1000 power-law, alpha = 1)"
if [ ! -x "$fedsvd" ]; then
    echo "$fedsvd not built; skipped"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

t0=$(date +%s.%N)
if ! "$fedsvd" gen powerlaw --rows 10000 --cols 1000 --seed 1 --out "$tmp/x.npy" >/dev/null; then
    echo "fedsvd gen failed"
    exit 1
fi
t1=$(date +%s.%N)
timer=()
if [ -x /usr/bin/time ]; then
    timer=(/usr/bin/time -f '%M' -o "$tmp/rss")
fi
if ! "${timer[@]}" "$fedsvd" svd --input "$tmp/x.npy" --out "$tmp/out" --format json >"$tmp/summary"; then
    echo "fedsvd svd failed"
    exit 1
fi
t2=$(date +%s.%N)
num() { sed -n "s/.*\"$1\": *\\([-+0-9.eE]*\\).*/\\1/p" "$tmp/summary" | head -n 1; }
rss=""
[ -s "$tmp/rss" ] && rss=$(tail -n 1 "$tmp/rss")
awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v f="$(num seconds)" \
    -v l="$(num load_seconds)" -v e="$(num reconstruction_error)" -v rss="$rss" 'BEGIN {
    printf "  fedsvd gen powerlaw 10000x1000   %8.3f s\n", t1 - t0
    printf "  fedsvd svd (whole command)       %8.3f s\n", t2 - t1
    printf "    of which load .npy             %8.3f s\n", l
    printf "    of which thin SVD              %8.3f s\n", f
    printf "    rest (error check, writing U/S/V, startup) %.3f s\n", (t2 - t1) - f - l
    printf "  whole command / SVD alone        %8.3f\n", (t2 - t1) / f
    printf "  reconstruction error             %8.1e\n", e
    if (rss != "") printf "  peak RSS                         %8.0f MiB\n", rss / 1024
}'
# The performance figures: fedsvd with the real services (10 x 10000, 10 x 50000,
# 2 x 10000; see the script's header for the columns and the critical path)
echo "== fedsvd with the real services (bench/bench_fedsvd_services.sh)"
bench/bench_fedsvd_services.sh "$build" || status=1
# fedpower-utility (seed exchange, then ot) against fedpower as real
# processes at a size this machine runs in well under a minute each: 20
# parties, 40 000 x 6 000, 4 000 000 ratings, r = k = 10, T = 24, p = 4,
# sigma = 0.1.
echo "== fedpower-utility / fedpower job time (bench/scale_fedpower.sh: 20 parties, 40000 x 6000," \
    "4 M ratings, k = r = 10, T = 24, p = 4, sigma 0.1, seed and ot exchanges)"
# One run's ratio swings by +-20 % with the fedpower baseline on a loaded
# 2-core machine: BENCH_RATIO_RUNS invocations [3] (the data is generated
# once), then the median ratio per exchange.
ratio_dir=$(mktemp -d)
ratio_runs=${BENCH_RATIO_RUNS:-3}
for ((run = 1; run <= ratio_runs; run++)); do
    echo "-- run $run of $ratio_runs"
    FEDSVD_SCALE_DIR="$ratio_dir" SCALE_USERS=40000 SCALE_ITEMS=6000 SCALE_RATINGS=4000000 \
        SCALE_PARTIES=20 SCALE_ITERATIONS=24 SCALE_SYNC_EVERY=4 SCALE_K=10 \
        SCALE_ALGORITHMS="fedpower fedpower-utility" SCALE_EXCHANGES="seed ot" SCALE_REFERENCE=none \
        SCALE_TIMEOUT=600 \
        bench/scale_fedpower.sh "$build" >"$ratio_dir/out.txt" 2>&1 || status=1
    cat "$ratio_dir/out.txt"
    grep '^  job time fedpower-utility' "$ratio_dir/out.txt" >>"$ratio_dir/ratios.txt"
done
for exchange in seed ot; do
    if [ "$exchange" = seed ]; then pat='utility / fedpower:'; else pat='utility (ot) / fedpower:'; fi
    grep -F "$pat" "$ratio_dir/ratios.txt" 2>/dev/null |
        awk '{ for (i = 1; i < NF; i++) if ($i == "fedpower:") print $(i + 1) }' | sort -n |
        awk -v x="$exchange" '{ v[NR] = $1 }
            END { if (NR == 0) exit
                  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                  printf "  median job time ratio fedpower-utility (%s) / fedpower over %d runs: %.2f (%.2f .. %.2f)\n", x, NR, m, v[1], v[NR] }'
done
rm -rf "$ratio_dir"
echo "== scale experiment of the power methods (not run here: 1.2 GB of synthetic Netflix-sized"
echo "   ratings, 100 parties as real processes, up to an hour per algorithm; run it by hand on a"
echo "   quiet machine): bench/scale_fedpower.sh $build   (settings: see the script's header);"
echo "   fedpower against fedpower-utility alone, printing as it goes: bench/netflix_scale.sh $build [SIZE]"
exit "$status"
