#!/usr/bin/env bash
# Disk trouble, with real processes on loopback: a service that cannot write
# its state answers 503 application/problem+json (code storage_unavailable,
# Retry-After), keeps serving reads, changes and corrupts nothing, and goes on
# once space is back.
#
#  - "disk full" is a file-size limit put on the running process
#    (prlimit --pid PID --fsize=0:unlimited: every write fails with EFBIG,
#    SIGXFSZ is ignored by the services) and lifted again
#    (--fsize=unlimited:unlimited);
#  - aggregation server: a job create gets 503 and no job appears; GET
#    /v1/jobs, /healthz, /readyz ("storage": "unavailable") and /metrics
#    (fedsvd_storage_unavailable 1) answer; the same create succeeds once the
#    limit is lifted;
#  - client agent: a participation create gets 503 and none appears; the same
#    create succeeds afterwards;
#  - a secure-sum job whose parties join while the aggregation server's disk
#    is full: their messages get 503, the job status still answers, and after
#    the limit is lifted the job finishes with the exact sum;
#  - masking server: a mask-set create gets 503, no mask set and no seed file
#    is left, the same create succeeds afterwards;
#  - a small tmpfs (mount -t tmpfs -o size=...), when this environment allows
#    mounting: an aggregation server whose file system is really full
#    (ENOSPC) answers 503 and succeeds once a filler file is removed; and a
#    job whose result directory is read-only (a read-only bind mount, EROFS)
#    when its sum is unmasked waits, then finishes with the exact sum once
#    the directory is writable (both skipped, with the reason, where mounting
#    is not permitted);
#  - every database passes PRAGMA integrity_check afterwards.
#
#   tests/disk/run.sh [BIN_DIR]      (default build/bin)
# Ends with "disk: P passed, F failed"; exits non-zero on a failure.
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/services.sh"
SVC_SUITE=disk
SVC_OK="ok  "
finish() {
  svc_summary
  exit $?
}
for b in aggregation-server masking-server client-agent; do
  [ -x "$BIN/$b" ] || { echo "FAIL $BIN/$b not built"; failn=1; }
done
for c in curl node prlimit sqlite3; do
  command -v "$c" >/dev/null || { echo "FAIL need $c"; failn=1; }
done
[ "$failn" -eq 0 ] || finish

MNT=
ROM=
svc_on_exit() {
  [ -n "$ROM" ] && umount "$ROM" 2>/dev/null
  [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
}
full() { prlimit --pid "$1" --fsize=0:unlimited; }               # every write fails (EFBIG)
space() { prlimit --pid "$1" --fsize=unlimited:unlimited; }      # the limit lifted

# req METHOD URL TOKEN [curl args]: CODE, body in $T/body, headers in $T/hdr
req() {
  local m=$1 u=$2 tok=$3; shift 3
  CODE=$(curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$m" \
    -H "Authorization: Bearer $tok" "$@" "$u")
}
jget() { node "$JLIB" get "$1" "$2" 2>/dev/null; }
# the last answer is a storage_unavailable problem with Retry-After
is_storage_503() {
  [ "$CODE" = 503 ] || { echo "     got $CODE: $(head -c 300 "$T/body")"; return 1; }
  [ "$CODE" = 503 ] &&
    grep -qi '^content-type: application/problem+json' "$T/hdr" &&
    grep -qi '^retry-after: [0-9]' "$T/hdr" &&
    [ "$(jget "$T/body" .code)" = storage_unavailable ] &&
    [ "$(jget "$T/body" .type)" = urn:fedsvd:problem:storage_unavailable ] &&
    [ "$(jget "$T/body" .status)" = 503 ] &&
    [ -n "$(jget "$T/body" .detail)" ]
}

# ---- the services (logs through a pipe: a file-size limit would stop a log file too)
SVC_LOG_PIPE=1
svc_server --chunk-words 16
svc_masking
svc_agents 3 --poll-ms 50
check "the services are ready" bash -c "$(declare -f svc_ready); svc_ready $SURL && svc_ready $MURL &&
  svc_ready ${AURL[1]} && svc_ready ${AURL[2]} && svc_ready ${AURL[3]}"

# integer data: the secure sum is exact
for i in 1 2 3; do
  : >"$T/x$i.csv"
  for r in 1 2 3 4; do printf '%d,%d,%d\n' $((i * r)) $((-7 * i + r)) $((100 * i - r)) >>"$T/x$i.csv"; done
done
SPEC='{"algorithm":"secure-sum","parties":3,"threshold":2,"shape":[4,3],"round_timeout_s":20,"join_timeout_s":60,"allow_unpinned":true}'

# ---- aggregation server: a create on a full disk
full "$SPID"
req POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$SPEC"
check "aggregation-server, disk full: POST /v1/jobs is 503 storage_unavailable problem+json with Retry-After" \
  is_storage_503
req GET "$SURL/v1/jobs" "$ADMIN"
check "aggregation-server, disk full: GET /v1/jobs answers, and no job was made" \
  bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .jobs.length)\" = 0 ]"
check "aggregation-server, disk full: /healthz answers" curl -sf -o /dev/null "$SURL/healthz"
check "aggregation-server, disk full: /readyz says storage unavailable" \
  bash -c "curl -sf '$SURL/readyz' | grep -q '\"storage\": *\"unavailable\"'"
curl -s "$SURL/metrics" >"$T/metrics"
check "aggregation-server, disk full: /metrics fedsvd_storage_unavailable 1, errors counted" \
  bash -c "grep -q '^fedsvd_storage_unavailable 1$' '$T/metrics' &&
    grep -Eq '^fedsvd_storage_errors_total [1-9]' '$T/metrics'"
check "aggregation-server, disk full: the service is still running" kill -0 "$SPID"
space "$SPID"
req POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$SPEC"
cp "$T/body" "$T/job.json"
JOB=$(jget "$T/job.json" .job.id)
check "aggregation-server, space back: the same POST /v1/jobs is 201" \
  bash -c "[ $CODE = 201 ] && [ -n '$JOB' ]"
check "aggregation-server, space back: /readyz says storage ok" \
  bash -c "curl -sf '$SURL/readyz' | grep -q '\"storage\": *\"ok\"'"
check "aggregation-server: one log line for the episode, one for the recovery" \
  bash -c "[ \$(grep -c 'storage unavailable' '$T/server.log') = 1 ] &&
    [ \$(grep -c 'storage writable again' '$T/server.log') = 1 ]"

part_body() { # PARTY (1-based) [JOB_JSON]
  printf '{"invitation": %s, "dataset": {"path": "%s", "format": "csv"}}' \
    "$(jget "${2:-$T/job.json}" ".invitations[$(($1 - 1))]")" "$T/x$1.csv"
}

# ---- client agent: a participation create on a full disk
full "${APID[1]}"
req POST "${AURL[1]}/v1/participations" "$OP" -H 'Content-Type: application/json' \
  --data-binary "$(part_body 1)"
check "client-agent, disk full: POST /v1/participations is 503 storage_unavailable with Retry-After" \
  is_storage_503
req GET "${AURL[1]}/v1/participations" "$OP"
check "client-agent, disk full: GET /v1/participations answers, and none was made" \
  bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .participations.length)\" = 0 ]"
space "${APID[1]}"

# ---- the job's parties join while the aggregation server's disk is full
full "$SPID"
IDS=()
for i in 1 2 3; do
  req POST "${AURL[$i]}/v1/participations" "$OP" -H 'Content-Type: application/json' \
    --data-binary "$(part_body "$i")"
  IDS[$i]=$(jget "$T/body" .id)
done
check "client-agent, space back: the same POST /v1/participations succeeds (all three agents)" \
  bash -c "[ -n '${IDS[1]}' ] && [ -n '${IDS[2]}' ] && [ -n '${IDS[3]}' ]"
full "${APID[2]}" # and agent 2 cannot write its own state either
sleep 3 # the agents send, get 503, and try again
req GET "${AURL[2]}/v1/participations/${IDS[2]}" "$OP"
check "client-agent, disk full mid-job: GET /v1/participations/{id} answers, running" \
  bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .state)\" = running ]"
req GET "$SURL/v1/jobs/$JOB" "$ADMIN"
check "aggregation-server, disk full mid-job: GET /v1/jobs/{job} answers, the job is running" \
  bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .state)\" = running ]"
check "aggregation-server, disk full mid-job: the parties' messages were refused (503 in /metrics)" \
  bash -c "curl -s '$SURL/metrics' | grep -Eq '^fedsvd_http_requests_total\{[^}]*status=\"503\"\} [1-9]'"
check "aggregation-server, disk full mid-job: still running" kill -0 "$SPID"
space "$SPID"
space "${APID[2]}"
URLS=()
for i in 1 2 3; do URLS+=("${AURL[$i]}/v1/participations/${IDS[$i]}"); done
node "$JLIB" wait-done "$T/parts.json" 60 "$OP" "${URLS[@]}" >/dev/null 2>&1
check "space back: every participation is done" \
  bash -c "[ \"\$(node '$JLIB' get '$T/parts.json' '[*].state')\" = '[\"done\",\"done\",\"done\"]' ]"
req GET "$SURL/v1/jobs/$JOB" "$ADMIN"
check "space back: the job is done" bash -c "[ \"\$(node '$JLIB' get '$T/body' .state)\" = done ]"
curl -s -H "Authorization: Bearer $ADMIN" -o "$T/sum.npy" "$SURL/v1/jobs/$JOB/result/sum.npy"
check "space back: the result is the exact sum of the parties' matrices" \
  node "$JLIB" sumcheck "$T/sum.npy" "$T/x1.csv" "$T/x2.csv" "$T/x3.csv"
# the messages taken while the disk was full were written afterwards, in order
check "space back: the job's event log is complete (seq 1..n, no gap)" \
  test "$(sqlite3 "$T/server/server.db" \
    "SELECT COUNT(*) = MAX(seq) AND MIN(seq) = 1 FROM events WHERE job_id = '$JOB';")" = 1

# ---- masking server: a mask-set create on a full disk
fpr() { printf "$1%.0s" $(seq 64); }
MSPEC="{\"job_id\":\"j-00112233445566778899aabbccddeeff\",\"partition\":\"samples\",\"parties\":[{\"party\":1,\"rows\":3,\"identity\":\"$(fpr a)\"},{\"party\":2,\"rows\":4,\"identity\":\"$(fpr b)\"}],\"cols\":5}"
full "$MPID"
req POST "$MURL/v1/masksets" "$MADMIN" -H 'Content-Type: application/json' --data-binary "$MSPEC"
check "masking-server, disk full: POST /v1/masksets is 503 storage_unavailable with Retry-After" \
  is_storage_503
req GET "$MURL/v1/masksets" "$MADMIN"
check "masking-server, disk full: GET /v1/masksets answers, no mask set and no seed file left" \
  bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .masksets.length)\" = 0 ] &&
    [ -z \"\$(find '$T/masking' -name '*.seed*')\" ]"
space "$MPID"
req POST "$MURL/v1/masksets" "$MADMIN" -H 'Content-Type: application/json' --data-binary "$MSPEC"
check "masking-server, space back: the same POST /v1/masksets is 201" test "$CODE" = 201

# ---- a really full file system: a small tmpfs, when mounting is allowed
mkdir -p "$T/tmpfs"
if mount -t tmpfs -o size=2m,mode=0700 tmpfs "$T/tmpfs" 2>"$T/mount.err"; then
  MNT=$T/tmpfs
  svc_start tserver TPORT "$BIN/aggregation-server" --data-dir "$MNT/server" \
    --admin-token-file "$T/admin.token"
  TPID=$SVC_PID
  TURL=$SVC_URL
  dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null # until ENOSPC
  req POST "$TURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$SPEC"
  check "tmpfs full (ENOSPC): POST /v1/jobs is 503 storage_unavailable" is_storage_503
  req GET "$TURL/v1/jobs" "$ADMIN"
  check "tmpfs full: GET /v1/jobs answers, no job" \
    bash -c "[ $CODE = 200 ] && [ \"\$(node '$JLIB' get '$T/body' .jobs.length)\" = 0 ]"
  rm -f "$MNT/filler"
  req POST "$TURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$SPEC"
  check "tmpfs, space back: the same POST /v1/jobs is 201" test "$CODE" = 201
  svc_stop "$TPID"
  check "tmpfs: server.db passes PRAGMA integrity_check" \
    test "$(sqlite3 "$MNT/server/server.db" 'PRAGMA integrity_check;' 2>&1)" = ok

  # a read-only directory: a job's result directory bind-mounted read-only
  # (EROFS) when its sum is unmasked; the job waits and finishes once it is
  # writable again
  req POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$SPEC"
  cp "$T/body" "$T/job2.json"
  JOB2=$(jget "$T/job2.json" .job.id)
  RD=$T/server/jobs/$JOB2/result
  mkdir -p "$RD"
  if mount --bind "$RD" "$RD" && mount -o remount,bind,ro "$RD"; then
    ROM=$RD
    URLS=()
    for i in 1 2 3; do
      req POST "${AURL[$i]}/v1/participations" "$OP" -H 'Content-Type: application/json' \
        --data-binary "$(part_body "$i" "$T/job2.json")"
      URLS+=("${AURL[$i]}/v1/participations/$(jget "$T/body" .id)")
    done
    for _ in $(seq 100); do
      grep -q 'waiting for storage' "$T/server.log" && break
      sleep 0.1
    done
    sleep 1
    req GET "$SURL/v1/jobs/$JOB2" "$ADMIN"
    check "read-only result directory: the job waits (running) and says so once in the log" \
      bash -c "[ \"\$(node '$JLIB' get '$T/body' .state)\" = running ] &&
        [ \$(grep -c 'waiting for storage' '$T/server.log') = 1 ]"
    umount "$RD" && ROM=
    node "$JLIB" wait-done "$T/parts2.json" 60 "$OP" "${URLS[@]}" >/dev/null 2>&1
    req GET "$SURL/v1/jobs/$JOB2" "$ADMIN"
    curl -s -H "Authorization: Bearer $ADMIN" -o "$T/sum2.npy" "$SURL/v1/jobs/$JOB2/result/sum.npy"
    check "read-only result directory, writable again: the job is done with the exact sum" \
      bash -c "[ \"\$(node '$JLIB' get '$T/body' .state)\" = done ] &&
        node '$JLIB' sumcheck '$T/sum2.npy' '$T/x1.csv' '$T/x2.csv' '$T/x3.csv' >/dev/null"
    # the same for a power-method job: its result files wait too
    PSPEC='{"algorithm":"fedpower","parties":3,"threshold":2,"cols":3,"party_rows":[4,4,4],"k":2,"rank":2,"iterations":3,"sync_every":1,"round_timeout_s":20,"join_timeout_s":60,"allow_unpinned":true}'
    req POST "$SURL/v1/jobs" "$ADMIN" -H 'Content-Type: application/json' --data-binary "$PSPEC"
    cp "$T/body" "$T/job3.json"
    JOB3=$(jget "$T/job3.json" .job.id)
    RD=$T/server/jobs/$JOB3/result
    mkdir -p "$RD"
    if [ -n "$JOB3" ] && mount --bind "$RD" "$RD" && mount -o remount,bind,ro "$RD"; then
      ROM=$RD
      URLS=()
      for i in 1 2 3; do
        req POST "${AURL[$i]}/v1/participations" "$OP" -H 'Content-Type: application/json' \
          --data-binary "$(part_body "$i" "$T/job3.json")"
        URLS+=("${AURL[$i]}/v1/participations/$(jget "$T/body" .id)")
      done
      for _ in $(seq 100); do
        [ "$(grep -c 'waiting for storage' "$T/server.log")" -ge 2 ] && break
        sleep 0.1
      done
      sleep 1
      req GET "$SURL/v1/jobs/$JOB3" "$ADMIN"
      check "fedpower, read-only result directory: the job waits (running), logged once" \
        bash -c "[ \"\$(node '$JLIB' get '$T/body' .state)\" = running ] &&
          [ \$(grep -c 'waiting for storage' '$T/server.log') = 2 ]"
      umount "$RD" && ROM=
      node "$JLIB" wait-done "$T/parts3.json" 60 "$OP" "${URLS[@]}" >/dev/null 2>&1
      req GET "$SURL/v1/jobs/$JOB3" "$ADMIN"
      check "fedpower, read-only result directory, writable again: the job is done with V.npy" \
        bash -c "[ \"\$(node '$JLIB' get '$T/body' .state)\" = done ] &&
          curl -sf -H 'Authorization: Bearer $ADMIN' -o '$T/V3.npy' '$SURL/v1/jobs/$JOB3/result/V.npy' &&
          [ -s '$T/V3.npy' ]"
    else
      echo "skip the fedpower read-only part: job $(head -c 300 "$T/body")"
    fi
  else
    echo "skip the read-only directory part: cannot bind-mount read-only here"
  fi
else
  echo "skip the tmpfs and read-only parts: cannot mount a tmpfs here ($(head -c 200 "$T/mount.err"))"
fi

# ---- stop cleanly; nothing is corrupt
svc_stop_all
integrity() {
  local db bad=0
  for db in "$T/server/server.db" "$T/masking/masking.db" "$T/agent1/agent.db" \
    "$T/agent2/agent.db" "$T/agent3/agent.db"; do
    [ "$(sqlite3 "$db" 'PRAGMA integrity_check;' 2>&1)" = ok ] || { echo "     $db"; bad=1; }
  done
  return $bad
}
check "every database passes PRAGMA integrity_check" integrity
check "the services logged no crash" bash -c "! grep -qi 'sigxfsz\|core dumped\|sanitizer' '$T'/*.log"
finish
