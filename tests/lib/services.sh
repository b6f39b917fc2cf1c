# Shared setup of the shell suites that run real services on loopback
# (tests/agent/*.sh, tests/lsa/sites.sh, tests/disk/run.sh). Source it after
# setting BIN (the directory of the binaries):
#
#   . "$(dirname "$0")/../lib/services.sh"
#
# It defines JLIB (tests/lib/json.mjs), T (a fresh temporary directory,
# removed at exit unless KEEP is set; every process started here is stopped
# first, then svc_on_exit runs if the script defines it) with the token
# files of ADMIN, MADMIN and OP, the check counters pass/failn with ok, bad,
# check and svc_summary, and the start-up helpers below. Each service is
# started with --port-file (port 0: a free port the first time, the same one
# when it is started again), its stderr appended to $T/NAME.log (through a
# pipe when SVC_LOG_PIPE is set: a file-size limit put on the process then
# does not stop its log), and waited for (readyz).

SVC_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JLIB=$SVC_LIB/json.mjs
pass=0
failn=0
PIDS=()

# svc_need PROG...: the binaries in $BIN, node and curl, or end the suite at once
svc_need() {
  local b none="${SVC_SUITE:+$SVC_SUITE: }0 passed, 1 failed"
  for b in "$@"; do
    [ -x "$BIN/$b" ] || { echo "no $BIN/$b"; echo "$none"; exit 1; }
  done
  command -v node >/dev/null ||
    { echo "no node (the tests' helpers, tests/lib/json.mjs)"; echo "$none"; exit 1; }
  command -v curl >/dev/null || { echo "no curl"; echo "$none"; exit 1; }
}

ok() { pass=$((pass + 1)); echo "${SVC_OK:-ok} $1"; }
bad() { failn=$((failn + 1)); echo "FAIL $1${2:+: $2}"; }
check() { # NAME COMMAND...: one check, passed when COMMAND succeeds
  local name=$1
  shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}
# svc_summary: the suite's last line "[SUITE: ]P passed, F failed"; fails on a failure
svc_summary() {
  echo "${SVC_SUITE:+$SVC_SUITE: }$pass passed, $failn failed"
  [ "$failn" -eq 0 ]
}

# svc_stop_all: stop (TERM) every process started here, then wait for them
svc_stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}
svc_cleanup() {
  svc_stop_all
  declare -F svc_on_exit >/dev/null && svc_on_exit
  [ -n "${KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
T=$(mktemp -d)
trap svc_cleanup EXIT

# the tokens: admin.token (ADMIN), madmin.token (MADMIN) and op.token (OP)
# in $T, 0600
ADMIN=admin-token-0123456789abcdefghij
MADMIN=masking-admin-0123456789abcdefghi
OP=operator-token-0123456789abcdefgh
printf '%s\n' "$ADMIN" >"$T/admin.token"
printf '%s\n' "$MADMIN" >"$T/madmin.token"
printf '%s\n' "$OP" >"$T/op.token"
chmod 600 "$T"/*.token

# FEDSVD_TEST_WRAP (opt-in, never set by `make test`): a command line put in
# front of every service started here, e.g. a memory checker:
#   FEDSVD_TEST_WRAP="valgrind -q --log-file=/tmp/vg.%p" tests/agent/e2e_test.sh build/bin
# (the wrapper must run PROG as its own process, not a child, as valgrind
# does: the suites signal SVC_PID); the waits for a port and for readyz then
# allow 120 s instead of 10 (SVC_TRIES; a copy of svc_ready run with `bash
# -c`, which does not see it, waits 10 s).
SVC_TRIES=200
[ -n "${FEDSVD_TEST_WRAP:-}" ] && SVC_TRIES=2400

# svc_run LOG PROG ARGS...: PROG in the background, stderr appended to LOG;
# its pid in SVC_PID and in PIDS
svc_run() {
  local log=$1
  shift
  # shellcheck disable=SC2086 # the wrapper's words, split on purpose
  set -- ${FEDSVD_TEST_WRAP:-} "$@"
  if [ -n "${SVC_LOG_PIPE:-}" ]; then
    "$@" 2> >(cat >>"$log") &
  else
    "$@" 2>>"$log" &
  fi
  SVC_PID=$!
  PIDS+=("$SVC_PID")
}
# svc_stop PID [SIGNAL]: stop a process started here (TERM by default), wait
# for it (its exit status is the return value) and forget it
svc_stop() {
  local p=$1 q rc keep=()
  kill "-${2:-TERM}" "$p" 2>/dev/null
  wait "$p" 2>/dev/null
  rc=$?
  for q in "${PIDS[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  PIDS=("${keep[@]}")
  return $rc
}
# svc_wait_stopped PID [SECS]: wait (SECS, default 60, at most) until the
# process is stopped (state T: a SIGSTOP, e.g. the client agent's
# FEDSVD_TEST_STOP_AFTER_WAL stop point)
svc_wait_stopped() {
  local st _
  for _ in $(seq $((${2:-60} * 100))); do
    read -r st <"/proc/$1/stat" 2>/dev/null || return 1
    st=${st##*) }
    [ "${st%% *}" = T ] && return 0
    sleep 0.01
  done
  return 1
}
# svc_wait_port FILE: wait (10 s at most) for a --port-file, print the port
svc_wait_port() {
  for _ in $(seq "${SVC_TRIES:-200}"); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1" 2>/dev/null
}
# svc_ready URL: wait (10 s at most) until URL/readyz answers 2xx
svc_ready() {
  for _ in $(seq "${SVC_TRIES:-200}"); do curl -sf "$1/readyz" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}
# svc_start NAME PORTVAR PROG ARGS...: PROG --listen 127.0.0.1:$PORTVAR
# --port-file $T/NAME.port ARGS, log $T/NAME.log; sets PORTVAR to the port,
# SVC_PID and SVC_URL; waits until it is ready
svc_start() {
  local name=$1 var=$2
  shift 2
  rm -f "$T/$name.port"
  svc_run "$T/$name.log" "$@" --listen "127.0.0.1:${!var:-0}" --port-file "$T/$name.port"
  printf -v "$var" '%s' "$(svc_wait_port "$T/$name.port")"
  SVC_URL=http://127.0.0.1:${!var}
  svc_ready "$SVC_URL"
}

# svc_server [ARGS...]: the aggregation server (data $T/server, log
# $T/server.log) on SPORT (a free one at the first start) -> SPID, SURL
svc_server() {
  svc_start server SPORT "$BIN/aggregation-server" --data-dir "$T/server" \
    --admin-token-file "$T/admin.token" "$@"
  SPID=$SVC_PID
  SURL=$SVC_URL
}
# svc_masking [ARGS...]: the masking server (data $T/masking) -> MPID, MURL
svc_masking() {
  svc_start masking MPORT "$BIN/masking-server" --data-dir "$T/masking" \
    --admin-token-file "$T/madmin.token" "$@"
  MPID=$SVC_PID
  MURL=$SVC_URL
}
# svc_agent I [ARGS...]: client agent I (data $T/agentI, log $T/agentI.log)
# on APORT[I] (a free one at the first start) -> APID[I], AURL[I]
APORT=()
APID=()
AURL=()
svc_agent() {
  local i=$1 port=${APORT[$1]:-0}
  shift
  svc_start "agent$i" port "$BIN/client-agent" --data-dir "$T/agent$i" \
    --operator-token-file "$T/op.token" "$@"
  APORT[$i]=$port
  APID[$i]=$SVC_PID
  AURL[$i]=$SVC_URL
}
# svc_agents K [ARGS...]: agents 1..K, started at once, then waited for
svc_agents() {
  local k=$1 i
  shift
  for i in $(seq 1 "$k"); do
    rm -f "$T/agent$i.port"
    svc_run "$T/agent$i.log" "$BIN/client-agent" --listen 127.0.0.1:0 --port-file "$T/agent$i.port" \
      --data-dir "$T/agent$i" --operator-token-file "$T/op.token" "$@"
    APID[$i]=$SVC_PID
  done
  for i in $(seq 1 "$k"); do
    APORT[$i]=$(svc_wait_port "$T/agent$i.port")
    AURL[$i]=http://127.0.0.1:${APORT[$i]}
    svc_ready "${AURL[$i]}"
  done
}

# svc_pins K: FPR[i], agent i's identity fingerprint (GET /v1/identity), and
# PINS, the K fingerprints quoted and comma-separated (a JSON list's inside)
FPR=()
svc_pins() {
  local i
  PINS=""
  for i in $(seq 1 "$1"); do
    FPR[$i]=$(curl -sf -H "Authorization: Bearer $OP" "${AURL[$i]}/v1/identity" |
      node "$JLIB" get - .fingerprint)
    PINS="$PINS${PINS:+,}\"${FPR[$i]}\""
  done
}
# svc_party_keys K: PKEYS, the arguments --party-key I:FINGERPRINT of
# `fedsvd job create` for agents 1..K (`fedsvd agent identity`)
svc_party_keys() {
  local i
  PKEYS=()
  for i in $(seq 1 "$1"); do
    PKEYS+=(--party-key "$i:$("$BIN/fedsvd" agent identity --agent "${AURL[$i]}" --token-file "$T/op.token")")
  done
}

# One agent without a server (tests/agent/api_test.sh, ledger_test.sh): data
# $T/data, port file $T/port, log $T/agent.log, operator token TOKEN in
# $T/op.token (written by the script).
# solo_start ARGS...: start it -> PID, PORT, URL
solo_start() {
  rm -f "$T/port"
  svc_run "$T/agent.log" "$BIN/client-agent" --listen 127.0.0.1:0 --data-dir "$T/data" \
    --operator-token-file "$T/op.token" --port-file "$T/port" "$@"
  PID=$SVC_PID
  PORT=$(svc_wait_port "$T/port")
  URL=http://127.0.0.1:$PORT
}
# solo_stop [SIGNAL]: stop it (TERM by default); returns its exit status
solo_stop() {
  local rc
  svc_stop "$PID" "$@"
  rc=$?
  PID=
  return $rc
}
# req METHOD PATH [JSON]: a request with TOKEN to the agent; the body goes
# to $T/body, the status to stdout
req() {
  local m=$1 p=$2
  shift 2
  if [ $# -gt 0 ]; then
    curl -s -o "$T/body" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/json' --data-binary "$1" "$URL$p"
  else
    curl -s -o "$T/body" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $TOKEN" "$URL$p"
  fi
}
