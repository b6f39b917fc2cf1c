#!/usr/bin/env bash
# A consortium on one machine, the way docs/deploy.md sets it up across
# organisations: the aggregation server, the masking server and three sites'
# client agents, each on its own loopback address (127.0.0.2 aggregation,
# 127.0.0.3 masking, 127.0.0.5..7 the sites' agents; the coordinator and the
# CA are clients only), TLS on every connection with certificates for those
# IP addresses from a CA the guide's commands make with openssl; each site
# has its own working directory, data directory, tokens and identity. No
# other address is used: every URL and every --listen is one of these.
#
# The commands are docs/deploy.md's own: every ```sh block there is
# extracted with the <!-- run: ROLE [daemon][; send: FILES to ROLES] -->
# comment before it and executed, in order, by `bash -e -o pipefail` in the
# role's directory ("host") with the variables the guide defines (AGG_URL,
# MASK_URL, AGG_LISTEN, AGG_SAN, MASK_LISTEN, MASK_SAN, SITE, AGENT_LISTEN,
# AGENT_URL, AGENT_SAN, DATA) and the binaries of BIN_DIR first on PATH.
# Daemon blocks run in the background (their process group is stopped with
# SIGTERM at the end); site blocks run for the three sites at once; `send:`
# copies files, keeping their relative path, to the named hosts' directories
# ($SITE expanded per site). A ```sh block without a run comment, or a
# shell fence spelled otherwise (bash, shell, console), fails the test.
# The agents get FEDSVD_POLL_MS=50 (a documented setting) so that the jobs
# finish in seconds.
#
# Then it checks what the guide promises:
#  - every service listens on its own address only (ss), the invitations
#    carry the https:// URLs of those addresses; the aggregation server ended
#    the fedpca job's mask set on the masking server (its TLS call, verified
#    with --masking-ca-file);
#  - fedpca: each site's singular values and components against centralised
#    LAPACK (`fedsvd svd --center --k 3` of the pooled rows, `fedsvd
#    compare`: singular-value error and projection distance <= 1e-8), the
#    coordinator's published singular values the same;
#  - dp-ppm: each site's V (10 x 2) within the noise bound of the centralised
#    top-2 subspace, tol = 4 sqrt(2k) sigma_eff (sqrt(d) + sqrt(k)) / gap
#    (as tests/integration/fedpower.sh; sigma_eff = sigma sqrt(n/t)), and
#    each site's privacy ledger charged the job;
#  - the backups: PRAGMA integrity_check ok, the jobs and the ledger in
#    them, identity.key copied.
#
#   tests/multihost/run.sh [BIN_DIR]      (default build/bin)
# KEEP=1 keeps the working directory. Ends with "multihost: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$(cd "${1:-$ROOT/build/bin}" 2>/dev/null && pwd || echo "${1:-build/bin}")
GUIDE=$ROOT/docs/deploy.md
F=$BIN/fedsvd
pass=0
failn=0
ok() {
  pass=$((pass + 1))
  echo "ok   $*"
}
fail() {
  failn=$((failn + 1))
  echo "FAIL $*"
}
check() {
  local name=$1
  shift
  if "$@"; then ok "$name"; else fail "$name"; fi
}
finish() {
  echo "multihost: $pass passed, $failn failed"
  [ "$failn" -eq 0 ]
  exit
}
for b in fedsvd aggregation-server masking-server client-agent; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
done
for c in openssl curl sqlite3 node ss setsid timeout; do
  command -v "$c" >/dev/null || fail "need $c"
done
[ -f "$GUIDE" ] || fail "no $GUIDE"
[ "$failn" -eq 0 ] || finish

T=$(mktemp -d)
DAEMONS=()
cleanup() {
  local p
  for p in "${DAEMONS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
  for p in "${DAEMONS[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
START=$(date +%s)

# ---- the addresses: each must be bindable (Linux routes 127.0.0.0/8 to lo)
ADDR_AGG=127.0.0.2
ADDR_MASK=127.0.0.3
ADDR_SITE=(- 127.0.0.5 127.0.0.6 127.0.0.7)
ADDR_COORD=127.0.0.4 # the coordinator's outgoing connections
# free_port ADDR PREFERRED: PREFERRED when it can be bound on ADDR, else a free one
free_port() {
  node -e '
    const net = require("net");
    const [addr, pref] = process.argv.slice(1);
    const tryp = (p, next) => { const s = net.createServer(); s.once("error", next);
      s.listen(Number(p), addr, () => { const q = s.address().port; s.close(() => console.log(q)); }); };
    tryp(pref, () => tryp(0, (e) => { console.error(String(e)); process.exit(1); }));' "$1" "$2"
}
PORT_AGG=$(free_port $ADDR_AGG 8443) && PORT_MASK=$(free_port $ADDR_MASK 8445) &&
  PORT_SITE=(- "$(free_port "${ADDR_SITE[1]}" 8444)" "$(free_port "${ADDR_SITE[2]}" 8444)" \
    "$(free_port "${ADDR_SITE[3]}" 8444)")
if [ -z "${PORT_AGG:-}" ] || [ -z "${PORT_MASK:-}" ] || [ -z "${PORT_SITE[3]:-}" ]; then
  fail "cannot bind 127.0.0.2, 127.0.0.3 and 127.0.0.5..7 (loopback addresses beyond 127.0.0.1)"
  finish
fi
ok "bindable: aggregation $ADDR_AGG:$PORT_AGG, masking $ADDR_MASK:$PORT_MASK, sites ${ADDR_SITE[1]}..${ADDR_SITE[3]}:${PORT_SITE[1]}"
AGG_URL=https://$ADDR_AGG:$PORT_AGG
MASK_URL=https://$ADDR_MASK:$PORT_MASK

# ---- the hosts and the sites' data (300 x 10 each, one planted matrix scaled by 30)
H=$T/hosts
mkdir -p "$H/ca" "$H/aggregation" "$H/masking" "$H/coordinator" "$H/site1" "$H/site2" "$H/site3" \
  "$T/logs" "$T/blocks" "$T/ref"
"$F" gen planted --rows 900 --cols 10 --rank 2 --gap 0.1 --seed 11 --out-dir "$T/parts" \
  --parties 3 --out-format csv >"$T/gen.log" 2>&1
for i in 1 2 3; do
  mkdir -p "$T/data/site$i"
  awk -F, -v OFS=, '{ for (j = 1; j <= NF; j++) $j = sprintf("%.17g", 30 * $j); print }' \
    "$T/parts/party-$i.csv" >"$T/data/site$i/data.csv"
done
check "the sites' data: 3 x (300 x 10) CSV" bash -c "[ \$(cat '$T'/data/site*/data.csv | wc -l) -eq 900 ]"
"$F" svd --input "$T/data/site1/data.csv" --input "$T/data/site2/data.csv" \
  --input "$T/data/site3/data.csv" --center --k 3 --out "$T/ref/pca" >/dev/null 2>>"$T/gen.log"
"$F" svd --input "$T/data/site1/data.csv" --input "$T/data/site2/data.csv" \
  --input "$T/data/site3/data.csv" --k 3 --out "$T/ref/top" >/dev/null 2>>"$T/gen.log"
check "centralised references (fedsvd svd --center --k 3; --k 3)" test -s "$T/ref/top/S.npy" -a -s "$T/ref/pca/V.npy"

# ---- extract the guide's blocks
awk -v out="$T/blocks" '
  function bad(msg) { print "line " NR ": " msg > (out "/errors"); }
  /^<!-- run: .* -->[[:space:]]*$/ { d = $0; sub(/^<!-- run: /, "", d); sub(/ -->[[:space:]]*$/, "", d);
                                     pend = d; next }
  inb && /^```[[:space:]]*$/ { inb = 0; close(f); next }
  inb { print > f; next }
  /^```(bash|shell|console|zsh)[[:space:]]*$/ { bad("a shell block fenced as " $0 ": use ```sh"); pend = ""; next }
  /^```sh[[:space:]]*$/ {
    if (pend == "") bad("a ```sh block without a <!-- run: ROLE --> comment before it")
    n++; f = sprintf("%s/%02d.sh", out, n); printf "%s\n", pend > sprintf("%s/%02d.meta", out, n)
    printf "" > f; inb = 1; pend = ""; next }
  /^```/ { pend = ""; skip = !skip; next }
  /^[[:space:]]*$/ { next }
  { pend = "" }
' "$GUIDE"
NB=$(find "$T/blocks" -name '*.sh' | wc -l)
if [ -s "$T/blocks/errors" ]; then
  fail "docs/deploy.md: $(tr '\n' ';' <"$T/blocks/errors")"
fi
check "docs/deploy.md: $NB runnable sh blocks, each with its run comment" test "$NB" -ge 10

# role_env ROLE SITE: the environment of a host (printed as NAME=VALUE lines)
role_env() {
  local role=$1 s=${2:-}
  printf '%s\n' "PATH=$BIN:/usr/local/bin:/usr/bin:/bin" "HOME=$H/$role${s}" "LC_ALL=C" \
    "AGG_URL=$AGG_URL" "MASK_URL=$MASK_URL"
  # FEDSVD_SOURCE_ADDRESS: the host's own address for outgoing connections
  # (the kernel would pick 127.0.0.1 on lo), as the guide describes for
  # hosts with several addresses
  case $role in
  aggregation) printf '%s\n' "AGG_LISTEN=$ADDR_AGG:$PORT_AGG" "AGG_SAN=IP:$ADDR_AGG" "FEDSVD_SOURCE_ADDRESS=$ADDR_AGG" ;;
  masking) printf '%s\n' "MASK_LISTEN=$ADDR_MASK:$PORT_MASK" "MASK_SAN=IP:$ADDR_MASK" "FEDSVD_SOURCE_ADDRESS=$ADDR_MASK" ;;
  coordinator) printf '%s\n' "FEDSVD_SOURCE_ADDRESS=$ADDR_COORD" ;;
  site)
    printf '%s\n' "SITE=$s" "AGENT_LISTEN=${ADDR_SITE[$s]}:${PORT_SITE[$s]}" \
      "AGENT_URL=https://${ADDR_SITE[$s]}:${PORT_SITE[$s]}" "AGENT_SAN=IP:${ADDR_SITE[$s]}" \
      "DATA=$T/data/site$s/data.csv" "FEDSVD_POLL_MS=50" "FEDSVD_SOURCE_ADDRESS=${ADDR_SITE[$s]}"
    ;;
  esac
}
hostdir() { if [ "$1" = site ]; then echo "$H/site$2"; else echo "$H/$1"; fi; }

# run_one N ROLE SITE DAEMON: run block N on one host; returns its status
run_one() {
  local n=$1 role=$2 s=$3 daemon=$4 dir log
  dir=$(hostdir "$role" "$s")
  log=$T/logs/$n-$role$s.log
  mapfile -t envv < <(role_env "$role" "$s")
  if [ "$daemon" = 1 ]; then
    (cd "$dir" && exec setsid env -i "${envv[@]}" bash -e -o pipefail "$T/blocks/$n.sh") >"$log" 2>&1 &
    DAEMONS+=($!)
    return 0
  fi
  (cd "$dir" && timeout 240 env -i "${envv[@]}" bash -e -o pipefail "$T/blocks/$n.sh") >"$log" 2>&1
}

# send FROM-ROLE SITE "FILES to ROLES": copy the files, keeping their relative
# path; $SITE is the sending site's number, or each receiving site's in turn
send() {
  local from=$1 s=$2 spec=$3 files roles f r t
  files=${spec% to *}
  roles=${spec##* to }
  for f in $files; do
    for r in $roles; do
      if [ "$r" = site ] && [ -z "$s" ]; then
        for t in 1 2 3; do
          mkdir -p "$(dirname "$H/site$t/${f//\$SITE/$t}")" &&
            cp -p "$(hostdir "$from" "")/${f//\$SITE/$t}" "$H/site$t/${f//\$SITE/$t}" || return 1
        done
      else
        t=$(hostdir "$r" "$s")
        mkdir -p "$(dirname "$t/${f//\$SITE/$s}")" &&
          cp -p "$(hostdir "$from" "$s")/${f//\$SITE/$s}" "$t/${f//\$SITE/$s}" || return 1
      fi
    done
  done
}

TRANSCRIPT=$T/transcript
: >"$TRANSCRIPT"
stop=0
for meta in "$T"/blocks/*.meta; do
  n=$(basename "$meta" .meta)
  IFS=';' read -ra parts <"$meta"
  head=${parts[0]}
  role=${head%% *}
  daemon=0
  [[ " $head " == *" daemon "* ]] && daemon=1
  case $role in ca | aggregation | masking | coordinator | site) ;; *)
    fail "block $n: unknown role '$role' (ca, aggregation, masking, coordinator or site)"
    stop=1
    break
    ;;
  esac
  {
    echo "### block $n on $role$([ "$role" = site ] && echo ' (sites 1, 2, 3 at once)')$([ $daemon = 1 ] && echo ', in the background')"
    cat "$T/blocks/$n.sh"
  } >>"$TRANSCRIPT"
  t0=$(date +%s)
  rcs=()
  if [ "$role" = site ] && [ "$daemon" = 1 ]; then
    for s in 1 2 3; do run_one "$n" site "$s" 1; rcs[$s]=$?; done
  elif [ "$role" = site ]; then
    pids=()
    for s in 1 2 3; do
      run_one "$n" site "$s" 0 &
      pids[$s]=$!
    done
    for s in 1 2 3; do
      wait "${pids[$s]}"
      rcs[$s]=$?
    done
  else
    run_one "$n" "$role" "" "$daemon"
    rcs[0]=$?
  fi
  bad=""
  for k in "${!rcs[@]}"; do [ "${rcs[$k]}" -eq 0 ] || bad="$bad ${role}${k#0}(exit ${rcs[$k]})"; done
  if [ -n "$bad" ]; then
    fail "docs/deploy.md block $n ($head) failed on$bad:"
    for lg in "$T"/logs/"$n"-*.log; do sed 's/^/     /' "$lg" | tail -n 8; done
    stop=1
    break
  fi
  for ((j = 1; j < ${#parts[@]}; j++)); do
    spec=${parts[$j]# }
    spec=${spec#send: }
    if [ "$role" = site ]; then
      for s in 1 2 3; do send site "$s" "$spec" || bad="$bad site$s:$spec"; done
    else
      send "$role" "" "$spec" || bad="$bad $spec"
    fi
  done
  if [ -n "$bad" ]; then
    fail "block $n: send failed:$bad"
    stop=1
    break
  fi
  ok "docs/deploy.md block $n ($head) ran ($(($(date +%s) - t0)) s)"
done
[ "$stop" = 0 ] || finish

# ---- every service on its own address, and nowhere else
listening() { # ADDR PORT: a listener on exactly ADDR:PORT
  ss -Hltn "src $1 and sport = :$2" | grep -q .
}
only_ours() { # PORT ADDR...: every listener on PORT is on one of ADDR
  local port=$1 a line
  shift
  while read -r line; do
    a=$(awk '{ print $4 }' <<<"$line")
    [[ " $* " == *" ${a%:*} "* ]] || return 1
  done < <(ss -Hltn "sport = :$port")
}
check "aggregation-server listens on $ADDR_AGG:$PORT_AGG only" bash -c \
  "$(declare -f listening only_ours); listening $ADDR_AGG $PORT_AGG && only_ours $PORT_AGG $ADDR_AGG ${ADDR_SITE[*]:1} $ADDR_MASK"
check "masking-server listens on $ADDR_MASK:$PORT_MASK only" bash -c \
  "$(declare -f listening only_ours); listening $ADDR_MASK $PORT_MASK && only_ours $PORT_MASK $ADDR_MASK $ADDR_AGG ${ADDR_SITE[*]:1}"
for s in 1 2 3; do
  check "site $s: client-agent listens on ${ADDR_SITE[$s]}:${PORT_SITE[$s]}" listening "${ADDR_SITE[$s]}" "${PORT_SITE[$s]}"
done
# the servers log each state-changing request with its client address: every
# one came from a host of the test (the coordinator or a site), none from
# 127.0.0.1 or elsewhere
clients() { cat "$T"/logs/*-aggregation.log "$T"/logs/*-masking.log 2>/dev/null |
  grep -o '"client":"[^"]*"' | sed 's/"client":"//; s/"$//' | sort | uniq -c; }
nreq=0
strangers=""
while read -r c a; do
  case " $ADDR_COORD $ADDR_AGG ${ADDR_SITE[*]:1} " in
  *" $a "*) nreq=$((nreq + c)) ;;
  *) strangers="$strangers $a" ;;
  esac
done < <(clients)
check "the servers' $nreq logged requests came from the hosts' own addresses ($(clients | awk '{ printf "%s%s", sep, $2; sep=" " }'))" \
  test "$nreq" -gt 0 -a -z "$strangers"
check "the invitations carry $AGG_URL and $MASK_URL" bash -c \
  "grep -q '\"$AGG_URL/v1/jobs/' '$H/site2/pca/invitation-2.json' && grep -q '\"$MASK_URL' '$H/site2/pca/invitation-2.json'"
check "three distinct identities pinned (fingerprint-1..3.txt at the coordinator)" bash -c \
  "[ \$(cat '$H'/coordinator/fingerprint-[123].txt | grep -cE '^[0-9a-f]{64}\$') -eq 3 ] &&
   [ \$(sort -u '$H'/coordinator/fingerprint-[123].txt | wc -l) -eq 3 ]"

# ---- fedpca against centralised LAPACK
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 == a && a <= b) }'; }
for s in 1 2 3; do
  d=$H/site$s/pca-result
  v=$("$F" compare --a "$d/singular_values.npy" --b "$T/ref/pca/S.npy" --metric sv --k 3 2>&1)
  check "fedpca, site $s: singular values vs fedsvd svd --center ($v)" below "$v" 1e-8
  v=$("$F" compare --a "$d/components.npy" --b "$T/ref/pca/V.npy" --metric subspace --k 3 2>&1)
  check "fedpca, site $s: components vs fedsvd svd --center, projection distance ($v)" below "$v" 1e-8
  check "fedpca, site $s: its own scores (300 x 3)" bash -c "head -c 128 '$d/scores.npy' | grep -q \"'shape': (300, 3)\""
done
pub=$(find "$H/coordinator/pca-result" -name 's*.npy' | head -n 1)
v=$("$F" compare --a "${pub:-none}" --b "$T/ref/pca/S.npy" --metric sv --k 3 2>&1)
check "fedpca, coordinator: published singular values ($(basename "${pub:-none}"): $v)" below "$v" 1e-8

# ---- dp-ppm: within the noise bound of the centralised top-2 subspace
# sigma: the calibration of the job (its spec, from the coordinator's view)
JOBDP=$(cut -d' ' -f2 "$H/coordinator/dp.created")
SIGMA=$(curl -fsS --interface "$ADDR_COORD" --cacert "$H/coordinator/ca.pem" \
  -H "Authorization: Bearer $(cat "$H/coordinator/aggregation-admin.token")" "$AGG_URL/v1/jobs/$JOBDP" |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
    const f=(o)=>{if(o&&typeof o==="object"){if(typeof o.sigma==="number")return o.sigma;
      for(const v of Object.values(o)){const r=f(v);if(r!==undefined)return r;}}};console.log(f(j)??"")})')
GAP=$(node "$ROOT/tests/lib/json.mjs" get "$T/ref/top/summary.json" .singular_values_head 2>/dev/null |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s);
    console.log((v[1]*v[1]-v[2]*v[2])/900)})')
TOL=$(awk -v s="$SIGMA" -v g="$GAP" 'BEGIN { if (s == "" || g <= 0) print ""; else print 4 * sqrt(4) * s * sqrt(3 / 2) * (sqrt(10) + sqrt(2)) / g }')
check "dp-ppm: sigma from the job ($SIGMA), gap lambda_2 - lambda_3 ($GAP), tolerance ($TOL)" test -n "$TOL"
for s in 1 2 3; do
  d=$H/site$s/dp-result
  check "dp-ppm, site $s: V.npy is 10 x 2" bash -c "head -c 128 '$d/V.npy' | grep -q \"'shape': (10, 2)\""
  v=$("$F" compare --a "$d/V.npy" --b "$T/ref/top/V.npy" --metric subspace --k 2 2>&1)
  check "dp-ppm, site $s: projection distance to the centralised top-2 ($v <= ${TOL:-?})" below "$v" "${TOL:-0}"
  check "dp-ppm, site $s: the privacy ledger charged the job" grep -q "$JOBDP" "$H/site$s/ledger.json"
done

# ---- the aggregation server ended the mask set over TLS (--masking-ca-file)
check "the fedpca job's mask set was ended by the aggregation server (no active set, no seed file)" bash -c "
  [ \$(sqlite3 '$H/masking/masking-data/masking.db' \"SELECT count(*) FROM masksets WHERE state = 'active'\") -eq 0 ] &&
  [ \$(sqlite3 '$H/masking/masking-data/masking.db' 'SELECT count(*) FROM masksets') -eq 1 ] &&
  [ -z \"\$(ls -A '$H/masking/masking-data/seeds' 2>/dev/null)\" ]"

# ---- the backups
integrity() { [ "$(sqlite3 "$1" 'PRAGMA integrity_check' 2>&1)" = ok ]; }
check "backup of server.db: integrity ok, both jobs in it" bash -c "
  $(declare -f integrity); integrity '$H/aggregation/backup/server.db' &&
  [ \$(sqlite3 '$H/aggregation/backup/server.db' 'SELECT count(*) FROM jobs') -eq 2 ] &&
  tar -tzf '$H/aggregation/backup/jobs.tar.gz' | grep -q '^jobs/'"
check "backup of masking.db: integrity ok, the fedpca mask set in it" bash -c "
  $(declare -f integrity); integrity '$H/masking/backup/masking.db' &&
  [ \$(sqlite3 '$H/masking/backup/masking.db' 'SELECT count(*) FROM masksets') -ge 1 ]"
for s in 1 2 3; do
  check "site $s: backup of agent.db (integrity ok, 2 participations, the ledger) and identity.key" bash -c "
    $(declare -f integrity); b='$H/site$s/backup'; integrity \"\$b/agent.db\" &&
    [ \$(sqlite3 \"\$b/agent.db\" 'SELECT count(*) FROM participations') -eq 2 ] &&
    [ \$(sqlite3 \"\$b/agent.db\" 'SELECT count(*) FROM privacy_ledger') -ge 1 ] &&
    cmp -s \"\$b/identity.key\" '$H/site$s/agent-data/identity.key'"
done

# ---- stop the services; nothing is left listening
for p in "${DAEMONS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
for p in "${DAEMONS[@]}"; do wait "$p" 2>/dev/null; done
DAEMONS=()
check "all services stopped (no listener left on the test's addresses)" bash -c \
  "! ss -Hltn | grep -qE ' (127\.0\.0\.[2-9]):'"

if [ -n "${TRANSCRIPT_OUT:-}" ]; then cp "$TRANSCRIPT" "$TRANSCRIPT_OUT"; fi
echo "     ($(($(date +%s) - START)) s)"
finish
