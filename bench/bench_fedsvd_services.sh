#!/usr/bin/env bash
# FedSVD with the real services (`make bench`): for each
# configuration K x N (K parties, N samples in total, d = 1000 features,
# power-law data, alpha = 1) generate the pooled matrix and its K party files
# (`fedsvd gen powerlaw --out --out-dir --parties`), time the centralised
# `fedsvd svd` of the pooled file, run `fedsvd local --algorithm fedsvd`
# (a masking-server, an aggregation-server and K client-agents as separate
# processes on loopback) and print one table from its summary.json.
#
# Columns (seconds are wall-clock unless said otherwise):
#   central   the whole `fedsvd svd` command (load .npy, thin SVD with U, error
#             check, write U/S/V) with the default BLAS threads (all cores);
#             in brackets its SVD alone
#   1-core    the same command with OPENBLAS_NUM_THREADS=1: the centralised
#             work on one core
#   fed wall  the whole `fedsvd local` command: start the services, run the
#             job, copy the results, stop everything; in brackets the job
#             alone (created -> done); ratio = fed wall / central. This run
#             uses fedsvd local's default BLAS threads (the aggregation
#             server all cores, the other processes one each); phases, bytes
#             and RSS come from it.
#   crit      critical path as if every party and each server had a machine
#             (one core) of its own, from a second `fedsvd local` run with
#             every process on one BLAS thread (OPENBLAS_NUM_THREADS=1;
#             FEDSVD_BENCH_FED_THREADS overrides), so that idle BLAS threads
#             spinning do not count:  M + P + S, each the CPU seconds (user +
#             system, all threads, whole process life, from /proc/PID/stat:
#             summary processes[].cpu_seconds) of
#               M = the masking-server (every party's slab and keys),
#               P = the slowest party: max over client-agents (keys decode,
#                   X_i B, exponent, encoding, secagg masks, uploads,
#                   recovery, writing U_i),
#               S = the aggregation-server (receiving and storing all
#                   uploads, unmasking, decoding, factorizing).
#             CPU seconds do not grow while a process waits for the others
#             or for a core, so on a busy shared machine they measure each
#             process's own work; the sum counts the three one after the
#             other (no overlap of the server's ingest with the uploads).
#             ratio = crit / 1-core central: both sides one core of this
#             machine (the target's ratio); the detail line also gives
#             crit / central (all cores), which charges the federated side
#             one core against the centralised side's two.
#             The detail line also gives the CPU seconds of every process
#             of the wall run divided by the cores: no schedule of that work
#             on this machine can take less wall time.
#   up/down   bytes per party (max over parties) sent / received, in units
#             of N*d*8 (target: upload ~ 1)
#   RSS       peak resident memory (VmHWM) of the masking-server, the
#             aggregation-server (also in units of N*d*8: target <= 4) and
#             the largest client-agent
#   ref       for 2 x 10000 only: 43.9 s (the FedSVD steps of Chai et al.'s
#             reference code, docs/references.md) / fed wall (target >= 5)
# and a line per run with
#   ingest    K*N*d*8 bytes of masked uploads / the masked_input phase of the
#             wall run (GB/s: the rate the aggregation server took the
#             uploads in, as fast as the parties produced them), beside a
#             plain in-memory sum of the same number of words on 1 and on
#             all cores, measured in the same invocation (BUILD/bench/
#             bench_ingest K N*d ... plain; `make benches` builds it)
#   agg peak  the aggregation-server's peak resident memory (VmHWM, which
#             includes some 15 MB of mapped shared libraries) in units of
#             N*d*8, raw; on the memory line also the VmHWM of an idle
#             aggregation-server of the same build (started once, ready, no
#             job: code, libraries, threads: a fixed cost of the binary) and
#             the peak above it in units of N*d*8, the part that grows with
#             the job (target: above idle <= 1.2)
# Sharded aggregation (docs/sharding.md), only when FEDSVD_BENCH_SHARDS=S is
# set (the documented configuration: FEDSVD_BENCH_SHARDS=4, 10 x 50000 x 1000):
# after the table, for each configuration of FEDSVD_BENCH_SHARD_CONFIGS
# (default 10x50000), the centralised `fedsvd svd`, an unsharded and an
# S-shard `fedsvd local` (one run each, default threads), and a line with
#   sharded   wall and ratio to central of both runs; the singular values of
#             the sharded run against the unsharded ones (fedsvd compare
#             --metric sv: max |a_i - b_i| / b_1; target <= 1e-12) and against
#             the central SVD (its S.npy); each shard's peak resident memory
#             (summary.json shards[].peak_rss_bytes, VmHWM of its process) in
#             units of N*d*8 (target <= 0.35 for 4 shards), beside the
#             unsharded aggregation-server's.
# FEDSVD_BENCH_SHARDS_ONLY=1 skips the table (the sharded runs alone).
# Each timed command starts after a `sync`, so no earlier command's file
# writeback (the 80 MB and larger outputs of the runs before) runs during it.
# Timings are noisy on a shared machine: FEDSVD_BENCH_REPEAT=R runs every
# configuration R times and prints every run (best and spread by eye).
#
# Usage: bench/bench_fedsvd_services.sh [BUILD] [KxN[xD] ...]
#        (default build; 10x10000 10x50000 2x10000 50x20000x200; D overrides
#        FEDSVD_BENCH_D for that configuration)
# Env:   FEDSVD_BENCH_REPEAT (default 1), FEDSVD_BENCH_D (default 1000),
#        FEDSVD_BENCH_FED_THREADS (BLAS threads of the federated processes, default 1),
#        FEDSVD_BENCH_ARGS (extra `fedsvd local` options, e.g. --block-size 2048),
#        FEDSVD_BENCH_CRIT=0 skips the one-BLAS-thread run (crit shows its
#        figures from the wall run instead), FEDSVD_BENCH_SHARDS,
#        FEDSVD_BENCH_SHARD_CONFIGS, FEDSVD_BENCH_SHARDS_ONLY (above),
#        FEDSVD_BENCH_SECAGG=0 / FEDSVD_BENCH_SECAGG_CONFIGS (full vs plus, below)
# Prints figures and ratios; asserts nothing. Exits non-zero only if a step
# cannot run.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${1:-build}
shift || true
configs=("$@")
[ "${#configs[@]}" -gt 0 ] || configs=(10x10000 10x50000 2x10000 50x20000x200)
repeat=${FEDSVD_BENCH_REPEAT:-1}
d=${FEDSVD_BENCH_D:-1000}
extra=${FEDSVD_BENCH_ARGS:-}
fed_threads=${FEDSVD_BENCH_FED_THREADS:-1}
crit_run=${FEDSVD_BENCH_CRIT:-1}
fedsvd="$build/bin/fedsvd"
if [ ! -x "$fedsvd" ]; then
    echo "$fedsvd not built; skipped"
    exit 1
fi
if ! command -v node >/dev/null; then
    echo "node not found (needed to read summary.json); skipped"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }

# VmHWM (bytes) of an idle aggregation-server of this build, once ready
idle_hwm() {
    local pid kb=""
    mkdir -p "$tmp/idle"
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/idle/tok"
    "$build/bin/aggregation-server" --listen 127.0.0.1:0 --data-dir "$tmp/idle/data" \
        --admin-token-file "$tmp/idle/tok" --port-file "$tmp/idle/port" 2>"$tmp/idle/log" &
    pid=$!
    for _ in $(seq 1 100); do
        [ -s "$tmp/idle/port" ] && break
        sleep 0.1
    done
    sleep 0.5
    kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "$((${kb:-0} * 1024))"
}
FEDSVD_BENCH_IDLE_HWM=$(idle_hwm)
export FEDSVD_BENCH_IDLE_HWM

echo "FedSVD with real services (fedsvd local), d = $d unless the configuration says KxNxD, power-law alpha = 1; seconds wall-clock."
echo "crit = M + P + S in CPU seconds (user + system) of the masking-server, the slowest"
echo "  client-agent and the aggregation-server: each process's own work, counted one after"
echo "  the other on one core each; its ratio is against the 1-core central run."
echo "  crit comes from a second run with OPENBLAS_NUM_THREADS=$fed_threads for every process; fed wall,"
echo "  phases, up/down and RSS from the default run. up/down and RSS (x) in units of N*d*8 bytes."
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-4s %15s %6s %19s %-26s %11s %-30s %s\n' config run "central [svd]" 1-core "fed wall [job] x" \
    "crit = M + P + S  x" "up / down" "RSS mask / agg (x) / agent" "ref"
# parse_cfg KxN[xD]: sets k, n and d (FEDSVD_BENCH_D, default 1000, when
# the configuration names no d) in the caller's scope
parse_cfg() {
    local rest=${1#*x}
    k=${1%%x*}
    n=${rest%%x*}
    d=${FEDSVD_BENCH_D:-1000}
    [ "$rest" = "$n" ] || d=${rest#*x}
}
status=0
[ "${FEDSVD_BENCH_SHARDS_ONLY:-0}" = 1 ] && [ -n "${FEDSVD_BENCH_SHARDS:-}" ] && configs=()
for cfg in "${configs[@]}"; do
    parse_cfg "$cfg"
    dir="$tmp/$cfg"
    mkdir -p "$dir"
    if ! "$fedsvd" gen powerlaw --rows "$n" --cols "$d" --seed 1 --out "$dir/x.npy" \
        --out-dir "$dir/parts" --parties "$k" >/dev/null; then
        echo "$cfg: fedsvd gen failed"
        status=1
        continue
    fi
    parties=()
    for i in $(seq 1 "$k"); do
        parties+=(--party "$dir/parts/party-$i.npy") # $tmp is absolute
    done
    for run in $(seq 1 "$repeat"); do
        sync # each timed command starts with no earlier run's writeback pending
        t0=$(now)
        if ! "$fedsvd" svd --input "$dir/x.npy" --out "$dir/svd" --format json >"$dir/svd.json"; then
            echo "$cfg: fedsvd svd failed"
            status=1
            continue
        fi
        t1=$(now)
        sync
        t1s=$(now)
        if ! OPENBLAS_NUM_THREADS=1 "$fedsvd" svd --input "$dir/x.npy" --out "$dir/svd1" \
            --format json >/dev/null; then
            echo "$cfg: fedsvd svd (one core) failed"
            status=1
            continue
        fi
        t1c=$(now)
        sync
        t1cs=$(now)
        # the wall run: as a user runs it (fedsvd local's default BLAS threads)
        # shellcheck disable=SC2086
        if ! "$fedsvd" local --algorithm fedsvd "${parties[@]}" --out "$dir/fed" \
            --bin-dir "$build/bin" --format json $extra >"$dir/fed.json" 2>"$dir/fed.err"; then
            echo "$cfg: fedsvd local failed:"
            tail -n 3 "$dir/fed.err"
            status=1
            continue
        fi
        t2=$(now)
        # the critical-path run: every process on one BLAS thread
        # shellcheck disable=SC2086
        if [ "$crit_run" = 0 ]; then
            cp -r "$dir/fed" "$dir/fed1"
        elif ! OPENBLAS_NUM_THREADS=$fed_threads "$fedsvd" local --algorithm fedsvd "${parties[@]}" \
            --out "$dir/fed1" --bin-dir "$build/bin" --format json $extra >"$dir/fed1.json" \
            2>"$dir/fed1.err"; then
            echo "$cfg: fedsvd local (one BLAS thread) failed:"
            tail -n 3 "$dir/fed1.err"
            status=1
            continue
        fi
        plain="plain_gbs 1 NaN 0 NaN"
        if [ -x "$build/bench/bench_ingest" ]; then
            plain=$("$build/bench/bench_ingest" "$k" "$((n * d))" 1048576 plain 2>/dev/null) ||
                plain="plain_gbs 1 NaN 0 NaN"
        fi
        node -e '
const fs = require("fs");
const [svdf, sumf, sum1f, cfg, run, k, n, d, tc, tc1, tf, plain] = process.argv.slice(1);
const svd = JSON.parse(fs.readFileSync(svdf, "utf8"));
const s = JSON.parse(fs.readFileSync(sumf, "utf8"));
const s1 = JSON.parse(fs.readFileSync(sum1f, "utf8"));
const nd8 = Number(n) * Number(d) * 8;
const ph = s.phases || {};
const num = (v) => (typeof v === "number" ? v : NaN);
const critOf = (sum) => {
  const procs = sum.processes || [];
  const cpu = (name) => num((procs.find((p) => p.name === name) || {}).cpu_seconds);
  let pm = NaN;
  for (const p of procs) {
    if (p.name.startsWith("agent-") && !(p.cpu_seconds <= pm)) pm = num(p.cpu_seconds);
  }
  return [cpu("masking-server"), pm, cpu("aggregation-server")];
};
const [M, pmax, S] = critOf(s1);
const critWall = critOf(s).reduce((a, b) => a + b, 0);
let up = 0, down = 0, agentRss = 0;
for (const p of s.parties || []) {
  up = Math.max(up, num(p.bytes_sent));
  down = Math.max(down, num(p.bytes_received));
  agentRss = Math.max(agentRss, num(p.peak_memory_bytes));
}
const crit = M + pmax + S;
const central = Number(tc), central1 = Number(tc1), wall = Number(tf);
const mem = s.peak_memory_bytes || {};
const mib = (b) => (b / 1048576).toFixed(0);
const aggRss = num(mem["aggregation-server"]);
const ref = Number(k) === 2 && Number(n) === 10000 ? (43.9 / wall).toFixed(1) + "x" : "";
const f = (x, w, p) => x.toFixed(p).padStart(w);
console.log(
  cfg.padEnd(8) + " " + String(run).padEnd(4) + " " +
  f(central, 6, 2) + " [" + f(num(svd.seconds), 5, 2) + "] " + f(central1, 6, 2) + " " +
  f(wall, 6, 2) + " [" + f(num(s.seconds && s.seconds.job), 6, 2) + "] " + f(wall / central, 4, 1) + "  " +
  f(crit, 5, 2) + " = " + f(M, 4, 2) + " + " + f(pmax, 4, 2) + " + " + f(S, 4, 2) + " " + f(crit / central1, 4, 2) + "  " +
  f(up / nd8, 4, 2) + " / " + f(down / nd8, 4, 2) + "  " +
  (mib(num(mem["masking-server"])) + " / " + mib(aggRss) + " (" + (aggRss / nd8).toFixed(2) + ") / " +
   mib(agentRss) + " MiB").padEnd(30) + " " + ref +
  (s.state === "done" && s1.state === "done" ? "" : "  state " + s.state + "/" + s1.state));
// the performance targets (crit: 10 parties, <= 1.3 at N = 10000, <= 1.2 at N = 50000)
const mark = (ok) => (ok ? "met" : "MISSED");
const t = [];
if (Number(k) === 10 && (Number(n) === 10000 || Number(n) === 50000)) {
  const lim = Number(n) === 10000 ? 1.3 : 1.2;
  t.push("crit x <= " + lim + " " + mark(crit / central1 <= lim));
}
t.push("wall x <= 3 " + mark(wall / central <= 3));
t.push("agg RSS <= 4 " + mark(aggRss / nd8 <= 4));
t.push("upload ~ 1 " + mark(Math.abs(up / nd8 - 1) <= 0.05));
if (ref !== "") t.push("ref >= 5x " + mark(43.9 / wall >= 5));
console.log("         targets: " + t.join(", "));
const pf = Object.keys(ph).sort().map((x) => x + " " + num(ph[x]).toFixed(2)).join(", ");
console.log("         phases: " + pf);
const cores = require("os").cpus().length;
const allCpu = (s.processes || []).reduce((a, p) => a + (typeof p.cpu_seconds === "number" ? p.cpu_seconds : 0), 0);
console.log("         wall run: CPU seconds of all " + (s.processes || []).length + " processes " +
  allCpu.toFixed(2) + ", / " + cores + " cores = " + (allCpu / cores).toFixed(2) +
  " s (a floor for fed wall on this machine: " + (allCpu / cores / central).toFixed(2) + " x central)");
console.log("         crit / central (all cores) " + (crit / central).toFixed(2) +
  "; M + P + S of the wall run (default threads) " + critWall.toFixed(2) +
  "; fed wall / 1-core central " + (wall / central1).toFixed(2));
{
  const pl = String(plain).trim().split(/\s+/);
  const ingest = Number(k) * nd8 / num(ph.masked_input) / 1e9;
  console.log("         ingest " + ingest.toFixed(2) + " GB/s (" + (Number(k) * nd8 / 1e9).toFixed(2) +
    " GB in masked_input " + num(ph.masked_input).toFixed(2) + " s); plain in-memory sum of the same words " +
    Number(pl[2]).toFixed(2) + " GB/s on 1 core, " + Number(pl[4]).toFixed(2) + " GB/s on " + pl[3] +
    "; agg peak " + (aggRss / nd8).toFixed(2) + " x N*d*8 (raw; above idle on the memory line)" +
    "; ratio to central " + (wall / central).toFixed(2));
}
{
  const idle = Number(process.env.FEDSVD_BENCH_IDLE_HWM || NaN);
  const above = (aggRss - idle) / nd8;
  console.log("         memory: agg peak " + (aggRss / 1e6).toFixed(1) + " MB = " + (aggRss / nd8).toFixed(2) +
    " x N*d*8 (raw VmHWM); idle aggregation-server " + (idle / 1e6).toFixed(1) +
    " MB; peak above idle " + ((aggRss - idle) / 1e6).toFixed(1) + " MB = " + above.toFixed(2) +
    " x N*d*8 (target (above idle) <= 1.2 " + mark(above <= 1.2) + ")");
}
console.log("         wall: slowest key download " + num(ph.party_keys).toFixed(2) +
  ", server-only phases " + (num(ph.consistency) + num(ph.unmasking) + num(ph.factorizing)).toFixed(2) +
  "; rank " + s.rank + "; central svd reconstruction error " +
  num(svd.reconstruction_error).toExponential(1) + "; load " +
  require("fs").readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "));
' "$dir/svd.json" "$dir/fed/summary.json" "$dir/fed1/summary.json" "$cfg" "$run" "$k" "$n" "$d" \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
            "$(awk -v a="$t1s" -v b="$t1c" 'BEGIN { print b - a }')" \
            "$(awk -v a="$t1cs" -v b="$t2" 'BEGIN { print b - a }')" "$plain" || status=1
        rm -rf "$dir/fed" "$dir/fed1" "$dir/svd" "$dir/svd1"
    done
    rm -rf "$dir"
done

# ---- sharded aggregation (FEDSVD_BENCH_SHARDS=S)
bench_shards() { # S KxN[xD]
    local S=$1 cfg=$2 k n d dir t0 t1 t1s t2 t2s t3 parties=() sv svc
    parse_cfg "$cfg"
    dir="$tmp/shards-$cfg"
    mkdir -p "$dir"
    "$fedsvd" gen powerlaw --rows "$n" --cols "$d" --seed 1 --out "$dir/x.npy" \
        --out-dir "$dir/parts" --parties "$k" >/dev/null || return 1
    for i in $(seq 1 "$k"); do parties+=(--party "$dir/parts/party-$i.npy"); done
    sync
    t0=$(now)
    "$fedsvd" svd --input "$dir/x.npy" --out "$dir/svd" --format json >/dev/null || return 1
    t1=$(now)
    sync
    t1s=$(now)
    # shellcheck disable=SC2086
    "$fedsvd" local --algorithm fedsvd "${parties[@]}" --out "$dir/one" --bin-dir "$build/bin" \
        --format json $extra >/dev/null 2>"$dir/one.err" || { tail -n 3 "$dir/one.err"; return 1; }
    t2=$(now)
    sync
    t2s=$(now)
    # shellcheck disable=SC2086
    "$fedsvd" local --algorithm fedsvd "${parties[@]}" --out "$dir/sh" --bin-dir "$build/bin" \
        --shards "$S" --format json $extra >/dev/null 2>"$dir/sh.err" ||
        { tail -n 3 "$dir/sh.err"; return 1; }
    t3=$(now)
    sv=$("$fedsvd" compare --a "$dir/sh/S.npy" --b "$dir/one/S.npy" --metric sv) || return 1
    svc=$("$fedsvd" compare --a "$dir/sh/S.npy" --b "$dir/svd/S.npy" --metric sv) || return 1
    node -e '
const fs = require("fs");
const [onef, shf, cfg, S, n, d, tc, t1, ts, sv, svc] = process.argv.slice(1);
const one = JSON.parse(fs.readFileSync(onef, "utf8"));
const sh = JSON.parse(fs.readFileSync(shf, "utf8"));
const nd8 = Number(n) * Number(d) * 8;
const mark = (ok) => (ok ? "met" : "MISSED");
const peaks = (sh.shards || []).map((e) => e.peak_rss_bytes / nd8);
const worst = Math.max(...peaks);
const aggOne = (one.peak_memory_bytes || {})["aggregation-server"] / nd8;
const lim = 1.4 / Number(S); /* 0.35 for 4 shards */
console.log("sharded  " + cfg + " S=" + S + ": central " + Number(tc).toFixed(2) + " s; unsharded wall " +
  Number(t1).toFixed(2) + " s (" + (t1 / tc).toFixed(2) + " x central, job " + one.seconds.job.toFixed(2) +
  " s); sharded wall " + Number(ts).toFixed(2) + " s (" + (ts / tc).toFixed(2) + " x central, job " +
  sh.seconds.job.toFixed(2) + " s)");
console.log("         singular values vs unsharded " + Number(sv).toExponential(2) + " (target <= 1e-12 " +
  mark(Number(sv) <= 1e-12) + "), vs central " + Number(svc).toExponential(2) +
  "; per-shard peak RSS " + (sh.shards || []).map((e) => "s" + e.shard + " [" + e.rows + "] " +
  (e.peak_rss_bytes / 1048576).toFixed(0) + " MiB = " + (e.peak_rss_bytes / nd8).toFixed(3)).join(", ") +
  " x N*d*8 (target <= " + lim.toFixed(2) + " " + mark(worst <= lim) + "); unsharded agg peak " +
  aggOne.toFixed(3) + " x N*d*8; phases " + Object.entries(sh.phases || {}).filter(([k]) =>
  ["masked_input", "unmasking", "factorizing"].includes(k)).map(([k, v]) => k + " " + v.toFixed(2)).join(", ") +
  "; load " + fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "));
' "$dir/one/summary.json" "$dir/sh/summary.json" "$cfg" "$S" "$n" "$d" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
        "$(awk -v a="$t1s" -v b="$t2" 'BEGIN { print b - a }')" \
        "$(awk -v a="$t2s" -v b="$t3" 'BEGIN { print b - a }')" "$sv" "$svc" || return 1
    rm -rf "$dir"
}
# ---- secure aggregation with every pair (full) vs SecAgg+ (plus), many parties
# (FEDSVD_BENCH_SECAGG_CONFIGS, default 50x20000x200, at least 20 parties as
# SecAgg+ needs; FEDSVD_BENCH_SECAGG=0 skips):
# the parties' CPU seconds (keys, masks, uploads: the whole agent process)
# and the job time of each mode, from the same data in the same invocation.
bench_secagg() { # KxN[xD]
    local cfg=$1 k n d dir parties=() mode
    parse_cfg "$cfg"
    dir="$tmp/secagg-$cfg"
    mkdir -p "$dir"
    "$fedsvd" gen powerlaw --rows "$n" --cols "$d" --seed 1 --out-dir "$dir/parts" \
        --parties "$k" >/dev/null || return 1
    for i in $(seq 1 "$k"); do parties+=(--party "$dir/parts/party-$i.npy"); done
    for mode in full plus; do
        # shellcheck disable=SC2086
        "$fedsvd" local --algorithm fedsvd "${parties[@]}" --out "$dir/$mode" --bin-dir "$build/bin" \
            --secagg "$mode" --format json $extra >/dev/null 2>"$dir/$mode.err" ||
            { tail -n 3 "$dir/$mode.err"; return 1; }
    done
    node -e '
const fs = require("fs");
const [dir, cfg] = process.argv.slice(1);
const f = (m) => JSON.parse(fs.readFileSync(dir + "/" + m + "/summary.json", "utf8"));
const agents = (s) => s.processes.filter((p) => p.name.startsWith("agent-")).map((p) => p.cpu_seconds);
const sum = (a) => a.reduce((x, y) => x + y, 0);
const full = f("full"), plus = f("plus");
const af = agents(full), ap = agents(plus);
console.log("secagg   " + cfg + ": parties CPU full " + sum(af).toFixed(2) + " s (slowest " +
  Math.max(...af).toFixed(2) + "), plus " + sum(ap).toFixed(2) + " s (slowest " + Math.max(...ap).toFixed(2) +
  "), full / plus " + (sum(af) / sum(ap)).toFixed(2) + "; job full " + full.seconds.job.toFixed(2) +
  " s, plus " + plus.seconds.job.toFixed(2) + " s; masked_input full " +
  (full.phases.masked_input || 0).toFixed(2) + " s, plus " + (plus.phases.masked_input || 0).toFixed(2) + " s");
' "$dir" "$cfg" || return 1
    rm -rf "$dir"
}
if [ "${FEDSVD_BENCH_SECAGG:-1}" != 0 ] && [ "${FEDSVD_BENCH_SHARDS_ONLY:-0}" != 1 ]; then
    for cfg in ${FEDSVD_BENCH_SECAGG_CONFIGS:-50x20000x200}; do
        bench_secagg "$cfg" || { echo "$cfg: the secagg runs failed"; status=1; }
    done
fi
if [ -n "${FEDSVD_BENCH_SHARDS:-}" ]; then
    for cfg in ${FEDSVD_BENCH_SHARD_CONFIGS:-10x50000}; do
        bench_shards "$FEDSVD_BENCH_SHARDS" "$cfg" || { echo "$cfg: the sharded runs failed"; status=1; }
    done
fi
exit "$status"
