#!/usr/bin/env bash
# The scale experiment (Liu et al. 2023, §6 at Netflix size, synthetic):
# 324 468 users x 17 711 items, 96 000 000 ratings 1..5 with power-law item
# popularity, split by users across 100 parties; r = k = 10, p = 4, T = 92,
# sigma = sigma' = 0.1; each algorithm runs as REAL processes (`fedsvd local`:
# an aggregation server and one client agent per party) and is timed. The
# paper's Table 3 took 45 min (FedPower), 25.6 h (utility-enhanced) and
# 75 min (privacy-enhanced) on 40 cores; the targets here on 2 cores are
# <= 15 min each and <= 20 min for fedpower-utility with the seed exchange.
#
# Not part of `make bench` (it needs ~1.2 GB of disk, a quiet machine and
# up to an hour): run it by hand after `make`:
#
#   bench/scale_fedpower.sh [BUILD]          (default build)
#
# Environment (defaults in brackets):
#   FEDSVD_SCALE_DIR    where the data is cached and the runs are written
#                       [/tmp/fedsvd-scale]; the data is generated once per
#                       (users, items, ratings, parties, seed) and reused
#   SCALE_USERS, SCALE_ITEMS, SCALE_RATINGS, SCALE_PARTIES, SCALE_SEED
#                       [324468, 17711, 96000000, 100, 1]
#   SCALE_ALPHA         item popularity exponent (rank^-alpha) [1]; at 1 the
#                       ~10 most popular items are rated by nearly every user
#   SCALE_K, SCALE_ITERATIONS, SCALE_SYNC_EVERY   [10, 92, 4]
#   SCALE_ALGORITHMS    ["fedpower fedpower-private fedpower-utility"]
#   SCALE_REFERENCE     auto: first a noise-free fedpower run (sigma = sigma' =
#                       0), whose V.npy is the reference for the others'
#                       subspace errors (the pooled matrix is too large for
#                       `fedsvd svd`, which is dense); none; or a d x k V.npy
#                       [auto]
#   SCALE_EXCHANGES     the noise exchanges fedpower-utility runs with, each a
#                       run of its own: seed (Paillier; the run named
#                       fedpower-utility) and ot (oblivious transfer; the run
#                       fedpower-utility-ot) ["seed ot"]
#   SCALE_TIMEOUT       seconds per run [3600]
#   SCALE_EXTRA         extra options for every `fedsvd local` []
#
# fedpower-private uses the paper's z^ = 0.2 but m^ = 25, not its 0.05:
# entries of M'_i = M_i^T M_i / s_i are at most 25 for ratings <= 5, so 25
# clips nothing and each party keeps the implicit covariance; m^ = 0.05
# would clip most diagonal entries, which forces every party to form its
# 17711 x 17711 M'_i (2.5 GB each, 250 GB for 100 parties). Its epsilon is
# meaningless either way (sigma = 0.1), hence --allow-weak-privacy.
#
# Prints the generator's time and file sizes, a line as each run ends (exit
# status, job time: summary.json's seconds.job, wall time), then one line per run: state,
# wall time, bytes sent/received per party, peak memory (largest party,
# server, and the sum over all processes), total epsilon, final projection
# distance and sin theta to the reference, last convergence change (node
# reads summary.json; without node only exit status, wall and job times), and
# the fedpower-utility / fedpower job-time ratio when both ran, one line per
# noise exchange (seed, then ot). Each run's summary.json stays in
# $FEDSVD_SCALE_DIR/runs/<run>/.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
fedsvd="$build/bin/fedsvd"
dir=${FEDSVD_SCALE_DIR:-/tmp/fedsvd-scale}
users=${SCALE_USERS:-324468}
items=${SCALE_ITEMS:-17711}
ratings=${SCALE_RATINGS:-96000000}
parties=${SCALE_PARTIES:-100}
seed=${SCALE_SEED:-1}
alpha=${SCALE_ALPHA:-1}
k=${SCALE_K:-10}
iters=${SCALE_ITERATIONS:-92}
every=${SCALE_SYNC_EVERY:-4}
algs=${SCALE_ALGORITHMS:-fedpower fedpower-private fedpower-utility}
reference=${SCALE_REFERENCE:-auto}
timeout=${SCALE_TIMEOUT:-3600}
exchanges=${SCALE_EXCHANGES:-seed ot}
read -r -a extra <<<"${SCALE_EXTRA:-}"

if [ ! -x "$fedsvd" ]; then
    echo "scale_fedpower: $fedsvd not built (run: make BUILD=$build)" >&2
    exit 2
fi
have_node=0
command -v node >/dev/null 2>&1 && have_node=1
data="$dir/ratings-u$users-i$items-m$ratings-a$alpha-p$parties-s$seed"
mkdir -p "$dir/runs" || exit 2

echo "== scale experiment: $users users x $items items, $ratings ratings, $parties parties," \
    "r = k = $k, p = $every, T = $iters ($(nproc) cores)"
if [ -f "$data/complete" ]; then
    echo "  data: cached in $data ($(cat "$data/complete"))"
else
    rm -rf "$data"
    t0=$(date +%s.%N)
    if ! "$fedsvd" gen ratings --users "$users" --items "$items" --ratings "$ratings" \
        --alpha "$alpha" --parties "$parties" --seed "$seed" --out-dir "$data" >"$dir/gen.log" 2>&1; then
        echo "scale_fedpower: fedsvd gen ratings failed:" >&2
        tail -n 5 "$dir/gen.log" >&2
        exit 1
    fi
    t1=$(date +%s.%N)
    bytes=$(cat "$data"/party-*.mtx | wc -c)
    awk -v s="$t0" -v e="$t1" -v b="$bytes" -v n="$parties" 'BEGIN {
        printf "generated in %.1f s, %d files, %.2f GB (%.1f MB a party)\n", e - s, n, b / 1e9,
            b / 1e6 / n }' >"$data/complete"
    echo "  data: $(cat "$data/complete")"
fi
party_args=()
for ((i = 1; i <= parties; i++)); do
    party_args+=(--party "$data/party-$i.mtx")
done

# one run: name, algorithm, options...
run() {
    local name=$1 alg=$2 out="$dir/runs/$1" t0 t1 rc
    shift 2
    rm -rf "$out"
    mkdir -p "$out"
    t0=$(date +%s.%N)
    "$fedsvd" local --algorithm "$alg" "${party_args[@]}" --out "$out" --k "$k" --rank "$k" \
        --iterations "$iters" --sync-every "$every" --timeout "$timeout" "$@" "${extra[@]}" \
        >"$out/stdout.txt" 2>"$out/stderr.txt"
    rc=$?
    t1=$(date +%s.%N)
    awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.1f\n", e - s }' >"$out/wall"
    echo "$rc" >"$out/rc"
    return "$rc"
}

# the job time (seconds.job of summary.json: from the job's creation to its
# end, without process start-up), or "-"
job_seconds() {
    local f="$dir/runs/$1/summary.json" v
    v=$(tr -d '\n ' <"$f" 2>/dev/null | sed -n 's/.*"seconds":{[^}]*"job":\([0-9.eE+-]*\).*/\1/p')
    if [ -n "$v" ]; then
        awk -v v="$v" 'BEGIN { printf "%.2f\n", v }'
    else
        echo "-"
    fi
}

# the CPU seconds of every process of a run (summary.json's processes), or "-"
cpu_seconds() {
    local f="$dir/runs/$1/summary.json" v
    v=$(tr -d '\n ' <"$f" 2>/dev/null | grep -o '"cpu_seconds":[0-9.eE+-]*' | cut -d: -f2 |
        awk '{ s += $1; n++ } END { if (n > 0) printf "%.2f\n", s }')
    echo "${v:--}"
}

# a table line from a run's summary.json
report() {
    local name=$1 out="$dir/runs/$1"
    if [ "$have_node" -eq 0 ]; then
        echo "  $name: exit $(cat "$out/rc"), wall $(cat "$out/wall") s, job $(job_seconds "$name") s"
        return
    fi
    node - "$name" "$out" <<'EOF'
const fs = require('fs');
const [name, out] = process.argv.slice(2);
const wall = fs.readFileSync(out + '/wall', 'utf8').trim();
const rc = fs.readFileSync(out + '/rc', 'utf8').trim();
let s;
try {
    s = JSON.parse(fs.readFileSync(out + '/summary.json', 'utf8'));
} catch (e) {
    console.log(`  ${name.padEnd(24)} exit ${rc}, no summary.json (${wall} s); see ${out}/stderr.txt`);
    process.exit(0);
}
const num = (v, d, f = 1) => (typeof v === 'number' ? (v / f).toFixed(d) : '-');
const ps = Array.isArray(s.parties) ? s.parties : [];
const mean = (key) => ps.length ? ps.reduce((a, p) => a + (p[key] || 0), 0) / ps.length : NaN;
const mem = s.peak_memory_bytes || {};
const memv = Object.values(mem).filter((v) => typeof v === 'number');
const partyMax = Math.max(...ps.map((p) => p.peak_memory_bytes || 0));
const srv = s.servers && s.servers.aggregation ? s.servers.aggregation.peak_memory_bytes : null;
const fin = s.subspace_error && s.subspace_error.final ? s.subspace_error.final : {};
const conv = Array.isArray(s.convergence) && s.convergence.length
    ? s.convergence[s.convergence.length - 1].change : null;
const eps = s.privacy ? s.privacy.eps_total : null;
console.log(`  ${name.padEnd(24)} ${String(s.state).padEnd(6)} ${wall.padStart(8)} ` +
    `${num(mean('bytes_sent'), 2, 1e6).padStart(8)} ${num(mean('bytes_received'), 2, 1e6).padStart(8)} ` +
    `${num(partyMax, 0, 1048576).padStart(9)} ${num(srv, 0, 1048576).padStart(8)} ` +
    `${num(memv.reduce((a, v) => a + v, 0), 2, 1073741824).padStart(8)} ` +
    `${(typeof eps === 'number' ? eps.toPrecision(4) : '-').padStart(10)} ` +
    `${num(fin.projection_distance, 4).padStart(9)} ${num(fin.sin_theta, 4).padStart(9)} ` +
    `${(typeof conv === 'number' ? conv.toExponential(2) : '-').padStart(9)}` +
    (s.error ? `  error: ${s.error}` : ''));
EOF
}

ref_args=()
names=()
case "$reference" in
auto)
    echo "  reference: noise-free fedpower run (sigma = sigma' = 0) ..."
    run reference fedpower --sigma 0 --sigma-server 0
    names+=(reference)
    if [ -s "$dir/runs/reference/V.npy" ]; then
        ref_args=(--reference "$dir/runs/reference/V.npy")
    else
        echo "  (the reference run failed: no subspace errors)"
    fi
    ;;
none) ;;
*) ref_args=(--reference "$reference") ;;
esac

# run_alg NAME ALG OPTIONS...: one timed run, listed in the table
run_alg() {
    local name=$1 alg=$2
    shift 2
    echo "  running $name ..."
    run "$name" "$alg" "$@" "${ref_args[@]}" || status=1
    names+=("$name")
    echo "    $name: exit $(cat "$dir/runs/$name/rc"), job $(job_seconds "$name") s," \
        "wall $(cat "$dir/runs/$name/wall") s ($(date +%T))"
}

status=0
for alg in $algs; do
    case "$alg" in
    fedpower) run_alg "$alg" "$alg" --sigma 0.1 --sigma-server 0.1 ;;
    fedpower-utility)
        # one run per noise exchange: seed keeps the name fedpower-utility
        for x in $exchanges; do
            if [ "$x" = seed ]; then
                run_alg "$alg" "$alg" --sigma 0.1 --noise-exchange seed
            else
                run_alg "$alg-$x" "$alg" --sigma 0.1 --noise-exchange "$x"
            fi
        done
        ;;
    fedpower-private) run_alg "$alg" "$alg" --sigma 0.1 --clip-z 0.2 --bound-m 25 --allow-weak-privacy ;;
    *) run_alg "$alg" "$alg" --sigma 0.1 --allow-weak-privacy ;;
    esac
done

echo
printf '  %-24s %-6s %8s %8s %8s %9s %8s %8s %10s %9s %9s %9s\n' algorithm state "wall s" \
    "sent MB" "recv MB" "party MiB" "srv MiB" "sum GiB" "total eps" "proj dist" "sin th" \
    "last chg"
printf '  %-24s %-6s %8s %8s %8s %9s %8s %8s %10s %9s %9s %9s\n' "" "" "" "/party" "/party" \
    "peak max" peak "peaks" "" "to ref" "to ref" ""
for n in "${names[@]}"; do
    report "$n"
done
echo "  (runs in $dir/runs/<name>/: summary.json, stdout.txt, stderr.txt; the paper's Table 3:" \
    "45 min, 25.6 h, 75 min on 40 cores)"
# ratio_lines RUN LABEL: the job-time and CPU ratios of RUN against fedpower
ratio_lines() {
    local run=$1 label=$2 jf ju cf cu
    jf=$(job_seconds fedpower)
    ju=$(job_seconds "$run")
    if [ "$jf" != "-" ] && [ "$ju" != "-" ]; then
        awk -v f="$jf" -v u="$ju" -v l="$label" 'BEGIN { if (f > 0) printf "  job time %s / fedpower: %.2f (%.2f s / %.2f s)\n", l, u / f, u, f }'
        # the CPU both runs used (every process, start-up included): on a busy
        # machine the job times follow the share of the cores the runs get, the
        # CPU seconds much less
        cf=$(cpu_seconds fedpower)
        cu=$(cpu_seconds "$run")
        if [ "$cf" != "-" ] && [ "$cu" != "-" ]; then
            awk -v f="$cf" -v u="$cu" -v l="$label" 'BEGIN { if (f > 0) printf "  CPU seconds (all processes) %s / fedpower: %.2f (%.2f s / %.2f s)\n", l, u / f, u, f }'
        fi
    fi
}
# seed keeps the line it always had; every other exchange gets its own
ratio_lines fedpower-utility fedpower-utility
for x in $exchanges; do
    [ "$x" = seed ] || ratio_lines "fedpower-utility-$x" "fedpower-utility ($x)"
done
exit "$status"
