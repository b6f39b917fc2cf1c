#!/bin/bash
# client-agent end to end against a real aggregation-server on loopback:
# K agents, one secure-sum job, results compared with the plain sum of the
# inputs; then a run where one party stops at a round (fail_at) and the
# survivors still get the sum of the survivors; then one below threshold,
# where every participation fails with the server's reason.
#
#   tests/agent/e2e_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
for b in client-agent aggregation-server; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b"; echo "0 passed, 1 failed"; exit 1; }
done
T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap cleanup EXIT
pass=0
failn=0
check() {
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok $name"; else failn=$((failn + 1)); echo "FAIL $name"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ADMIN=admin-token-0123456789abcdefghij
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

SPORT=$(free_port)
SURL=http://127.0.0.1:$SPORT
start_server() {
  "$BIN/aggregation-server" --listen "127.0.0.1:$SPORT" --data-dir "$T/server" \
    --admin-token-file "$T/admin.token" --chunk-words 16 2>>"$T/server.log" &
  SPID=$!
  PIDS+=($SPID)
}
start_server
for _ in $(seq 100); do curl -sf "$SURL/readyz" >/dev/null && break; sleep 0.05; done
check "server ready" curl -sf "$SURL/readyz" -o /dev/null

K=4
AURL=()
for i in $(seq 1 $K); do
  rm -f "$T/port$i"
  "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/port$i" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" --poll-ms 50 2>"$T/agent$i.log" &
  PIDS+=($!)
done
for i in $(seq 1 $K); do
  for _ in $(seq 100); do [ -s "$T/port$i" ] && break; sleep 0.05; done
  AURL[$i]=http://127.0.0.1:$(cat "$T/port$i")
done
check "agents ready" curl -sf "${AURL[$K]}/readyz" -o /dev/null

# data: party i holds a ROWS x COLS matrix (values of all magnitudes and signs)
make_data() { # rows cols
  python3 - "$T" "$K" "$1" "$2" <<'EOF'
import random, sys
T, K, R, C = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
random.seed(7)
for i in range(1, K + 1):
    with open(f"{T}/x{i}.csv", "w") as f:
        for r in range(R):
            row = [random.choice([-1, 1]) * random.random() * 10 ** random.randint(-6, 6)
                   for _ in range(C)]
            f.write(",".join(repr(v) for v in row) + "\n")
EOF
  SHAPE="[$1,$2]"
}
make_data 5 7

# run_job NAME FAIL_AT_JSON_PER_PARTY...: creates a job, posts participations, waits
run_job() {
  local name=$1 threshold=$2; shift 2
  curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"algorithm\":\"secure-sum\",\"parties\":$K,\"threshold\":$threshold,\"shape\":$SHAPE,\"round_timeout_s\":3}" \
    "$SURL/v1/jobs" >"$T/$name.job.json"
  python3 - "$T" "$name" "$K" "$OP" "${AURL[@]:1}" -- "$@" <<'EOF'
import json, sys, urllib.request
T, name, K, op = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rest = sys.argv[5:]
sep = rest.index("--")
urls, fails = rest[:sep], rest[sep + 1:]
job = json.load(open(f"{T}/{name}.job.json"))
ids = []
for i in range(K):
    inv = job["invitations"][i]
    body = {"invitation": inv, "dataset": {"path": f"{T}/x{inv['party']}.csv", "format": "csv"},
            "fail_at": None if fails[i] == "-" else fails[i]}
    rq = urllib.request.Request(urls[i] + "/v1/participations", data=json.dumps(body).encode(),
                                headers={"Authorization": "Bearer " + op,
                                         "Content-Type": "application/json"})
    ids.append(json.load(urllib.request.urlopen(rq))["id"])
json.dump({"job": job["job"]["id"], "ids": ids}, open(f"{T}/{name}.ids.json", "w"))
EOF
  # wait for every participation to end
  python3 - "$T" "$name" "$OP" "${AURL[@]:1}" <<'EOF'
import json, sys, time, urllib.request
T, name, op, urls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ids = json.load(open(f"{T}/{name}.ids.json"))["ids"]
def get(u):
    rq = urllib.request.Request(u, headers={"Authorization": "Bearer " + op})
    return json.load(urllib.request.urlopen(rq))
t0 = time.time()
while time.time() - t0 < 60:
    ps = [get(f"{urls[i]}/v1/participations/{ids[i]}") for i in range(len(ids))]
    if all(p["state"] != "running" for p in ps):
        break
    time.sleep(0.2)
json.dump(ps, open(f"{T}/{name}.parts.json", "w"), indent=1)
EOF
}

# the sum of the given parties' CSVs vs an agent's sum.npy
SUMCHECK=$(cat <<'EOF'
import struct, sys, ast
T, npy, parties = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3].split(",")]
rows = {p: [[float(v) for v in line.split(",")] for line in open(f"{T}/x{p}.csv")] for p in parties}
R, C = len(rows[parties[0]]), len(rows[parties[0]][0])
b = open(npy, "rb").read()
assert b[:6] == b"\x93NUMPY"
hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
off = 10 + hl if b[6] == 1 else 12 + hl
hdr = ast.literal_eval(b[off - hl:off].decode())
assert hdr["descr"] == "<f8" and tuple(hdr["shape"]) == (R, C), hdr
vals = struct.unpack("<%dd" % (R * C), b[off:off + 8 * R * C])
get = (lambda r, c: vals[c * R + r]) if hdr["fortran_order"] else (lambda r, c: vals[r * C + c])
big = max(abs(rows[p][r][c]) for p in parties for r in range(R) for c in range(C))
err = max(abs(get(r, c) - sum(rows[p][r][c] for p in parties)) for r in range(R) for c in range(C))
print("max abs error", err, "relative to the largest entry", err / big)
sys.exit(0 if err / big < 1e-14 else 1)
EOF
)
state_of() { python3 -c "import json; print(json.load(open('$T/$1.parts.json'))[$2]['$3'])"; }
pid_of() { python3 -c "import json; print(json.load(open('$T/$1.ids.json'))['ids'][$2])"; }

# ---- 1. everyone
run_job all 3 - - - -
for i in 0 1 2 3; do
  check "all: party $((i + 1)) done" test "$(state_of all $i state)" = done
done
P=$(pid_of all 0)
curl -s -H "Authorization: Bearer $OP" "${AURL[1]}/v1/participations/$P/result" >"$T/all.result.json"
check "all: manifest lists sum.npy" grep -q '"sum.npy"' "$T/all.result.json"
curl -s -H "Authorization: Bearer $OP" -o "$T/all.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "all: sum exact to 1e-14 of the largest entry" python3 -c "$SUMCHECK" "$T" "$T/all.sum.npy" 1,2,3,4
check "all: progress 1" test "$(state_of all 0 progress)" = 1.0
check "all: bytes counted" test "$(state_of all 0 bytes_sent)" -gt 1000
check "all: the agent's copy matches the server's" cmp -s "$T/all.sum.npy" \
  "$T/agent1/participations/$P/sum.npy"

# ---- 2. party 2 stops before its masked input: the others get the sum of 1, 3, 4
run_job drop 3 - masked_input - -
check "drop: party 2 failed (fail_at)" test "$(state_of drop 1 state)" = failed
check "drop: ... saying so" bash -c "grep -q 'fail_at masked_input' '$T/drop.parts.json'"
for i in 0 2 3; do
  check "drop: party $((i + 1)) done" test "$(state_of drop $i state)" = done
done
P=$(pid_of drop 2)
curl -s -H "Authorization: Bearer $OP" -o "$T/drop.sum.npy" \
  "${AURL[3]}/v1/participations/$P/result/sum.npy"
check "drop: sum of the survivors" python3 -c "$SUMCHECK" "$T" "$T/drop.sum.npy" 1,3,4

# ---- 2b. a party stopping at consistency or unmasking is still in the sum (t = 2:
# U4 = {1,2,3}, reveals from {1,2})
run_job late 2 - - unmasking consistency
for i in 0 1; do
  check "late: party $((i + 1)) done" test "$(state_of late $i state)" = done
done
P=$(pid_of late 0)
curl -s -H "Authorization: Bearer $OP" -o "$T/late.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "late: sum of all four inputs" python3 -c "$SUMCHECK" "$T" "$T/late.sum.npy" 1,2,3,4

# ---- 3. two parties never advertise, threshold 3: the job aborts
run_job below 3 advertise_keys - advertise_keys -
for i in 1 3; do
  check "below: party $((i + 1)) failed" test "$(state_of below $i state)" = failed
done
check "below: with the server's reason" bash -c "grep -q 'job failed' '$T/below.parts.json'"
grep -h '"error"' "$T/below.parts.json" | sort | uniq -c | sed 's/^/   /'

# ---- 4. a bigger matrix: many chunks of the server's --chunk-words 16
make_data 60 50
run_job big 3 - - - -
for i in 0 1 2 3; do
  check "big: party $((i + 1)) done" test "$(state_of big $i state)" = done
done
P=$(pid_of big 3)
curl -s -H "Authorization: Bearer $OP" -o "$T/big.sum.npy" \
  "${AURL[4]}/v1/participations/$P/result/sum.npy"
check "big: sum exact" python3 -c "$SUMCHECK" "$T" "$T/big.sum.npy" 1,2,3,4

# ---- 5. the server restarts while the agents wait in key advertisement
make_data 5 7
# party 4 never shows up: R0 closes at its 3 s deadline (restarted with the server)
run_job_async() {
  curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"algorithm\":\"secure-sum\",\"parties\":$K,\"threshold\":3,\"shape\":$SHAPE,\"round_timeout_s\":3}" \
    "$SURL/v1/jobs" >"$T/restart.job.json"
  python3 - "$T" "$OP" "${AURL[@]:1}" <<'EOF'
import json, sys, urllib.request
T, op, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
job = json.load(open(f"{T}/restart.job.json"))
ids = []
for i in range(3):
    inv = job["invitations"][i]
    body = {"invitation": inv, "dataset": {"path": f"{T}/x{inv['party']}.csv"}}
    rq = urllib.request.Request(urls[i] + "/v1/participations", data=json.dumps(body).encode(),
                                headers={"Authorization": "Bearer " + op,
                                         "Content-Type": "application/json"})
    ids.append(json.load(urllib.request.urlopen(rq))["id"])
json.dump({"job": job["job"]["id"], "ids": ids}, open(f"{T}/restart.ids.json", "w"))
EOF
}
run_job_async
sleep 1
kill -9 "$SPID"; wait "$SPID" 2>/dev/null
sleep 2
start_server
python3 - "$T" "$OP" "${AURL[@]:1}" <<'EOF'
import json, sys, time, urllib.request
T, op, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
ids = json.load(open(f"{T}/restart.ids.json"))["ids"]
def get(u):
    rq = urllib.request.Request(u, headers={"Authorization": "Bearer " + op})
    return json.load(urllib.request.urlopen(rq))
t0 = time.time()
while time.time() - t0 < 60:
    ps = [get(f"{urls[i]}/v1/participations/{ids[i]}") for i in range(3)]
    if all(p["state"] != "running" for p in ps):
        break
    time.sleep(0.2)
json.dump(ps, open(f"{T}/restart.parts.json", "w"), indent=1)
EOF
for i in 0 1 2; do
  check "restart: party $((i + 1)) done after the server came back" \
    test "$(state_of restart $i state)" = done
done
P=$(pid_of restart 0)
curl -s -H "Authorization: Bearer $OP" -o "$T/restart.sum.npy" \
  "${AURL[1]}/v1/participations/$P/result/sum.npy"
check "restart: sum of parties 1-3" python3 -c "$SUMCHECK" "$T" "$T/restart.sum.npy" 1,2,3

for f in "$T"/agent*.log "$T/server.log"; do
  check "no party token in $(basename "$f")" python3 - "$f" "$T" <<'EOF'
import json, glob, sys
log = open(sys.argv[1]).read()
toks = [inv["token"] for f in glob.glob(sys.argv[2] + "/*.job.json") for inv in json.load(open(f))["invitations"]]
sys.exit(1 if any(t in log for t in toks) else 0)
EOF
done
echo "$pass passed, $failn failed"
[ "$failn" = 0 ]
