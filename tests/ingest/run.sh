#!/usr/bin/env bash
# The aggregation server's memory on a real fedsvd and fedpca job
# (`fedsvd local`, every service a process of its own on loopback): 4
# parties, N = 10 000 samples, d = 500 features, N*d*8 = 40 MB. The server
# holds one running sum of the masked uploads (streamed into it, no chunk
# buffered), unmasks and decodes it in place and keeps only R after its QR,
# so its peak resident memory above its own footprint before any job (the
# code and shared libraries every server process maps: measured here on an
# idle server of the same binary) stays within 1.2 * N*d*8. Each job must
# also finish with the singular values of the centralised SVD (--verify).
#
#   tests/ingest/run.sh [BIN_DIR]      (default build/bin)
# Ends with "ingest: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
F=$BIN/fedsvd
pass=0
failn=0
finish() {
  echo "ingest: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit $?
}
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
for b in fedsvd aggregation-server masking-server client-agent; do
  if [ ! -x "$BIN/$b" ]; then
    echo "FAIL $BIN/$b not built"
    failn=1
  fi
done
command -v node >/dev/null || { echo "FAIL need node"; failn=1; }
[ "$failn" -eq 0 ] || finish
BIN=$(cd "$BIN" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
K=4
N=10000
D=500
ND8=$((N * D * 8))

# the footprint of an idle server of this binary (code, libraries, threads)
idle_hwm() {
  local pid port=""
  mkdir -p "$T/idle"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/idle/tok"
  "$BIN/aggregation-server" --listen 127.0.0.1:0 --data-dir "$T/idle/data" \
    --admin-token-file "$T/idle/tok" --port-file "$T/idle/port" 2>"$T/idle/log" &
  pid=$!
  for _ in $(seq 1 100); do
    [ -s "$T/idle/port" ] && break
    sleep 0.1
  done
  sleep 0.5
  awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$pid/status"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
BASE=$(idle_hwm)
echo "idle aggregation-server: VmHWM $BASE bytes; N*d*8 = $ND8 bytes"

"$F" gen powerlaw --rows "$N" --cols "$D" --seed 7 --out "$T/x.npy" --out-dir "$T/parts" \
  --parties "$K" >/dev/null || { echo "FAIL fedsvd gen"; failn=1; finish; }
PARTIES=()
for i in $(seq 1 "$K"); do
  PARTIES+=(--party "$T/parts/party-$i.npy")
done

# peak (VmHWM of the job's server, from summary.json) minus the idle footprint
mem_ok() {
  local algo=$1
  node -e '
const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const peak = (s.peak_memory_bytes || {})["aggregation-server"];
const base = Number(process.argv[2]), nd8 = Number(process.argv[3]);
const x = (peak - base) / nd8;
console.log("  " + process.argv[4] + ": aggregation-server VmHWM " + peak + " bytes = " +
  (peak / nd8).toFixed(2) + " x N*d*8; above the idle footprint " + x.toFixed(2) + " x (limit 1.2)");
process.exit(s.state === "done" && typeof peak === "number" && x <= 1.2 ? 0 : 1);
' "$T/$algo/summary.json" "$BASE" "$ND8" "$algo"
}

for algo in fedsvd fedpca; do
  if "$F" local --algorithm "$algo" "${PARTIES[@]}" --out "$T/$algo" --bin-dir "$BIN" --verify \
    --format json >"$T/$algo.json" 2>"$T/$algo.err"; then
    check "$algo: the job verifies against the centralised result" true
    check "$algo: aggregation-server peak within 1.2 x N*d*8 above its idle footprint" mem_ok "$algo"
  else
    tail -n 5 "$T/$algo.err"
    check "$algo: fedsvd local --verify" false
  fi
done
finish
