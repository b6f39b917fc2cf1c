#!/bin/bash
# client-agent privacy ledger (docs/privacy-ledger.md) with the real agent
# process: --privacy-budget refuses a power-method job that would exceed a
# dataset's budget (403 privacy_budget_exceeded, nothing stored), refuses
# jobs without a formal guarantee (fedpower) under a budget, identifies a
# dataset by its content (a renamed copy is the same data) or by an
# operator's dataset.id, reserves atomically (two concurrent requests, room
# for one), shows GET /v1/privacy-ledger, and keeps the ledger across kill -9.
# The agent computes a job's cost from the invitation alone, so the
# invitations are built here and point at a closed port (no server needed).
#
#   tests/agent/ledger_test.sh [BIN_DIR]      (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
AGENT=$BIN/client-agent
. "$(dirname "$0")/../lib/services.sh"
svc_need client-agent
PID=

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOKEN=agent-operator-token-0123456789abcdef
printf '%s\n' "$TOKEN" >"$T/op.token"
chmod 600 "$T/op.token"
PTOKEN=party-token-0123456789abcdefghijklmnopqrstu
SEED=$(printf 'ab%.0s' $(seq 32))
BUDGET=0.015 # rho; one dp-ppm job below costs ~0.0109, two do not fit

start_agent() { solo_start --server-patience 600 --poll-ms 50 "$@"; } # flags...
stop_agent() { solo_stop "$@"; }

jfield() { node "$JLIB" get "${2:-$T/body}" "$1"; }
ledger() { req GET /v1/privacy-ledger >/dev/null && cp "$T/body" "$T/${1:-ledger}.json"; }
# numeric assertion over values: num 'a <= b' a=1 b=2
num() {
  local expr=$1; shift
  node -e 'const v = {}; for (const a of process.argv.slice(2)) { const i = a.indexOf("=");
    v[a.slice(0, i)] = Number(a.slice(i + 1)); }
    const f = new Function(...Object.keys(v), "return (" + process.argv[1] + ");");
    process.exit(f(...Object.values(v)) ? 0 : 1);' "$expr" "$@"
}

job_id() { printf 'j-%032x' "$1"; }
# invitation ALG JOBNUM ROWS EXTRA: party 2 of 3, d = 3, party_rows [6, ROWS, 7], k = r = 1, T = 4
invitation() {
  local j
  j=$(job_id "$2")
  printf '{"version":1,"job_id":"%s","job_url":"http://127.0.0.1:9/v1/jobs/%s","party":2,"token":"%s","algorithm":"%s","parties":3,"threshold":2,"shape":[%s,3],"cols":3,"party_rows":[6,%s,7],"k":1,"rank":1,"iterations":4,"delta":1e-5,"eigenvalues":false,"allow_weak_privacy":false,"allow_dropouts":true,"z0_seed":"%s"%s}' \
    "$j" "$j" "$PTOKEN" "$1" "$3" "$3" "$SEED" "$4"
}
DPPPM=',"sync_every":1,"align":"global","sigma":null,"epsilon":1.0,"value_bound":4.0'
PRIVATE=',"sync_every":2,"align":"global","sigma":null,"epsilon":0.5,"clip_z":1.0,"bound_m":1.0,"bound_mode":"clip","value_bound":null'
PLAIN=',"sync_every":2,"align":"global","sigma":0.1,"sigma_server":0.1,"epsilon":null,"value_bound":null'
body() { # alg jobnum file extra [dataset-id-json]
  local rows
  rows=$(wc -l <"$3")
  printf '{"invitation":%s,"dataset":{"path":"%s"%s}}' "$(invitation "$1" "$2" "$rows" "$4")" "$3" \
    "${5:+,\"id\":$5}"
}

# data: d1 (6 rows) and its renamed copy, d2 and d3 (5 rows)
for i in 1 2 3 4 5 6; do echo "0.$i,0.2,0.3"; done >"$T/d1.csv"
cp "$T/d1.csv" "$T/renamed-copy.csv"
for i in 1 2 3 4 5; do echo "0.$i,0.5,0.1"; done >"$T/d2.csv"
for i in 1 2 3 4 5; do echo "0.$i,0.7,0.9"; done >"$T/d3.csv"
SHA1=$(sha256sum "$T/d1.csv" | cut -d' ' -f1)

# ---- configuration errors: exit 2 before listening
"$AGENT" --data-dir "$T/x" --operator-token-file "$T/op.token" --privacy-budget 0 2>/dev/null
check "--privacy-budget 0 is a usage error" test $? = 2
"$AGENT" --data-dir "$T/x" --operator-token-file "$T/op.token" --privacy-budget 1 \
  --privacy-budget-epsilon 1 2>/dev/null
check "rho and epsilon budgets exclude each other" test $? = 2
"$AGENT" --data-dir "$T/x" --operator-token-file "$T/op.token" --privacy-budget-epsilon 1 \
  --privacy-budget-delta 1 2>/dev/null
check "--privacy-budget-delta 1 is a usage error" test $? = 2

# ---- a budget given as (epsilon, delta): the largest rho of the optimal conversion
start_agent --privacy-budget-epsilon 1 --privacy-budget-delta 1e-5
ledger
check "(1, 1e-5) budget: rho 0.030557 (CKS20)" \
  num 'Math.abs(r - 0.030557) < 1e-6 && e === 1 && d === 1e-5' \
  r="$(jfield .budget.rho)" e="$(jfield .budget.epsilon)" d="$(jfield .budget.delta)"
stop_agent

# ---- a rho budget
start_agent --privacy-budget "$BUDGET"
check "agent starts with a budget" test -n "$PORT"
s=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/privacy-ledger")
check "GET /v1/privacy-ledger needs the operator token" test "$s" = 401
s=$(req GET /v1/privacy-ledger)
check "empty ledger: 200, budget rho $BUDGET, no datasets" \
  test "$s" = 200 -a "$(jfield .budget.rho)" = "$BUDGET" -a "$(jfield .datasets.length)" = 0
check "... budget epsilon at delta 1e-5 is positive" num 'e > 0 && d === 1e-5' \
  e="$(jfield .budget.epsilon)" d="$(jfield .budget.delta)"

# first dp-ppm job: within budget
s=$(req POST /v1/participations "$(body dp-ppm 1 "$T/d1.csv" "$DPPPM")")
check "dp-ppm job within budget: 201" test "$s" = 201
P1=$(jfield .id)
ledger l1
RHO1=$(jfield '.datasets[0].entries[0].rho' "$T/l1.json")
check "the ledger lists one dataset with one entry" \
  test "$(jfield .datasets.length "$T/l1.json")" = 1 -a \
  "$(jfield '.datasets[0].entries.length' "$T/l1.json")" = 1
check "... identified by the file's SHA-256" \
  test "$(jfield '.datasets[0].dataset' "$T/l1.json")" = "sha256:$SHA1" -a \
  "$(jfield '.datasets[0].sha256' "$T/l1.json")" = "$SHA1"
check "... the entry: participation, job, algorithm, reserved while running" \
  test "$(jfield '.datasets[0].entries[0].participation' "$T/l1.json")" = "$P1" -a \
  "$(jfield '.datasets[0].entries[0].job_id' "$T/l1.json")" = "$(job_id 1)" -a \
  "$(jfield '.datasets[0].entries[0].algorithm' "$T/l1.json")" = dp-ppm -a \
  "$(jfield '.datasets[0].entries[0].state' "$T/l1.json")" = reserved
check "... rho_spent = the entry's rho, remaining = budget - spent" \
  num 'r > 0 && s === r && Math.abs(rem - (b - r)) < 1e-15' r="$RHO1" \
  s="$(jfield '.datasets[0].rho_spent' "$T/l1.json")" \
  rem="$(jfield '.datasets[0].remaining_rho' "$T/l1.json")" b="$BUDGET"
check "... epsilon_spent <= the job's epsilon target 1" \
  num 'e > 0 && e <= 1' e="$(jfield '.datasets[0].epsilon_spent' "$T/l1.json")"
check "(test premise: one job fits the budget, two do not)" num 'r <= b && 2 * r > b' r="$RHO1" \
  b="$BUDGET"
if [ -f "$ROOT/tests/contract/node_modules/ajv/package.json" ]; then
  if node "$JLIB" schema "$ROOT/openapi.yaml" PrivacyLedger "$T/l1.json" >"$T/schema.out" 2>&1; then
    ok "the ledger matches openapi.yaml's PrivacyLedger"
  else
    bad "the ledger matches openapi.yaml's PrivacyLedger" "$(head -c 600 "$T/schema.out")"
  fi
fi

# second dp-ppm job on a renamed copy of the same data: over budget
s=$(req POST /v1/participations "$(body dp-ppm 2 "$T/renamed-copy.csv" "$DPPPM")")
check "second job on a renamed copy: 403" test "$s" = 403
check "... code privacy_budget_exceeded, problem+json" \
  test "$(jfield .code)" = privacy_budget_exceeded -a "$(jfield .status)" = 403
check "... with the numbers (spent, requested, budget)" \
  num 's === r && q === r && b === B' s="$(jfield .rho_spent)" q="$(jfield .rho_requested)" \
  r="$RHO1" b="$(jfield .rho_budget)" B="$BUDGET"
check "... the detail names them" grep -q "spent rho .* of its budget $BUDGET" "$T/body"
check "... and the dataset" test "$(jfield .dataset)" = "sha256:$SHA1"
req GET /v1/participations >/dev/null
check "... no participation created" test "$(jfield .participations.length)" = 1
ledger l2
check "... the ledger unchanged" cmp -s "$T/l1.json" "$T/l2.json"

# plain fedpower under a budget: refused, whatever the dataset
s=$(req POST /v1/participations "$(body fedpower 3 "$T/d2.csv" "$PLAIN")")
check "fedpower under a budget: 403 privacy_budget_exceeded" \
  test "$s" = 403 -a "$(jfield .code)" = privacy_budget_exceeded
check "... saying it has no formal guarantee" grep -q "no formal differential-privacy guarantee" \
  "$T/body"
check "... requested rho null (unbounded)" test "$(jfield .rho_requested)" = null
ledger l3
check "... nothing recorded" cmp -s "$T/l1.json" "$T/l3.json"

# fedpower-private on another dataset: its own budget
s=$(req POST /v1/participations "$(body fedpower-private 4 "$T/d2.csv" "$PRIVATE")")
check "fedpower-private on another dataset: 201" test "$s" = 201
ledger l4
check "the ledger has two datasets" test "$(jfield .datasets.length "$T/l4.json")" = 2

# an operator's dataset.id wins over the content hash
s=$(req POST /v1/participations "$(body dp-ppm 5 "$T/d1.csv" "$DPPPM" '"census-2020"')")
check "dataset.id: the same file under an operator's id is another ledger: 201" test "$s" = 201
ledger l5
check "... listed as census-2020 without a sha256" \
  test "$(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
    const d = j.datasets.find(x => x.dataset === "census-2020");
    console.log(d ? d.sha256 + " " + d.entries.length : "none")' "$T/l5.json")" = "null 1"
s=$(req POST /v1/participations "$(body dp-ppm 6 "$T/d3.csv" "$DPPPM" '"census-2020"')")
check "... a different file under the same id shares its budget: 403" test "$s" = 403
s=$(req POST /v1/participations "$(body dp-ppm 7 "$T/d3.csv" "$DPPPM" '"bad id!"')")
check "a dataset.id with a space: 422" test "$s" = 422 -a "$(jfield .code)" = invalid
s=$(req POST /v1/participations "$(body dp-ppm 7 "$T/d3.csv" "$DPPPM" '7')")
check "a dataset.id that is no string: 400" test "$s" = 400

# two concurrent requests on one fresh dataset with room for one: exactly one passes
cpids=
for n in 8 9; do
  curl -s -o "$T/c$n.body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' --data-binary "$(body dp-ppm $n "$T/d3.csv" "$DPPPM")" \
    "$URL/v1/participations" >"$T/c$n.status" &
  cpids="$cpids $!"
done
# shellcheck disable=SC2086
wait $cpids
st=$(printf '%s\n%s\n' "$(cat "$T/c8.status")" "$(cat "$T/c9.status")" | sort | tr '\n' ' ')
check "two concurrent jobs, room for one: one 201 and one 403 ($st)" test "$st" = "201 403 "
ledger l6
SHA3=$(sha256sum "$T/d3.csv" | cut -d' ' -f1)
check "... one entry for that dataset" \
  test "$(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
    const d = j.datasets.find(x => x.dataset === "sha256:" + process.argv[2]);
    console.log(d ? d.entries.length : -1)' "$T/l6.json" "$SHA3")" = 1

# a cancelled participation: its reservation is settled (spent, or released
# when the worker reports that nothing noisy left)
s=$(req DELETE "/v1/participations/$P1")
check "cancel the first participation: 200" test "$s" = 200
# the worker stops asynchronously and settles its entry as it ends: poll
for _ in $(seq 1 100); do
  ledger l7
  e1=$(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
    for (const d of j.datasets) for (const e of d.entries)
      if (e.participation === process.argv[2]) console.log(e.state, d.rho_spent, e.rho);' \
    "$T/l7.json" "$P1")
  case "$e1" in reserved*) sleep 0.1 ;; *) break ;; esac
done
check "... its entry is no longer reserved ($e1)" bash -c "case '$e1' in spent*|released*) exit 0;; esac; exit 1"
check "... and the dataset's total agrees with its state" \
  num '(st === 1 && s === r) || (st === 2 && s === 0)' \
  st="$(case "$e1" in spent*) echo 1;; *) echo 2;; esac)" s="$(echo "$e1" | cut -d' ' -f2)" \
  r="$(echo "$e1" | cut -d' ' -f3)"

# ---- kill -9 and restart: the same numbers; running participations resume and keep
# their reservations (charged once: spent before their first noisy upload)
ledger before
stop_agent KILL
start_agent --privacy-budget "$BUDGET"
ledger after
totals() { node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
  console.log(JSON.stringify([j.budget, j.datasets.map(d => [d.dataset, d.rho_spent,
    d.epsilon_spent, d.remaining_rho, d.jobs, d.entries.map(e => [e.participation, e.rho])])]))' "$1"; }
check "after kill -9 and restart: the same budget, totals and entries" \
  test "$(totals "$T/before.json")" = "$(totals "$T/after.json")"
reserved_resumed() { # every entry still reserved is a resumed, running participation's
  local id
  for id in $(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
    for (const d of j.datasets) for (const e of d.entries)
      if (e.state === "reserved") console.log(e.participation);' "$T/after.json"); do
    req GET "/v1/participations/$id" >/dev/null
    [ "$(jfield .state)" = running ] && [ "$(jfield .restarts)" = 1 ] || return 1
  done
}
check "... an entry left reserved belongs to a resumed participation" reserved_resumed
# d3's reservation still counts (its participation resumed: a noisy upload
# may leave); d1's first participation was cancelled before it uploaded
# anything: released
s=$(req POST /v1/participations "$(body dp-ppm 10 "$T/d3.csv" "$DPPPM")")
check "... and the budget still holds for the dataset whose job was running: 403" \
  test "$s" = 403 -a "$(jfield .code)" = privacy_budget_exceeded
check "... the cancelled participation (no upload left) was released" \
  test "$e1" != "${e1#released}"

# ---- no budget: everything runs and is recorded, unbounded jobs too
stop_agent
start_agent
ledger nb
check "no budget: budget null" test "$(jfield .budget "$T/nb.json")" = null
s=$(req POST /v1/participations "$(body fedpower 11 "$T/d2.csv" "$PLAIN")")
check "... fedpower accepted: 201" test "$s" = 201
ledger nb2
check "... recorded with rho null (formal false) and an unbounded total" \
  test "$(node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1]));
    for (const d of j.datasets) for (const e of d.entries) if (e.algorithm === "fedpower")
      console.log(e.rho, e.formal, d.rho_spent, d.remaining_rho)' "$T/nb2.json")" = \
  "null false null null"
s=$(req POST /v1/participations "$(body dp-ppm 12 "$T/d1.csv" "$DPPPM")")
check "... a dp-ppm job beyond the old budget accepted: 201" test "$s" = 201

# ---- the budget again: a dataset that ran fedpower has nothing left
# (kill -9: its participation was running and resumes, so its unbounded
# entry stays reserved and counts)
stop_agent KILL
start_agent --privacy-budget "$BUDGET"
s=$(req POST /v1/participations "$(body dp-ppm 13 "$T/d2.csv" "$DPPPM")")
check "budget back: the dataset that ran fedpower refuses any job: 403" test "$s" = 403
check "... saying why" grep -q "without a formal guarantee" "$T/body"

# ---- an agent.db from before the ledger gains the table, participations kept
if command -v sqlite3 >/dev/null; then
  stop_agent
  sqlite3 "$T/data/agent.db" 'DROP TABLE privacy_ledger' 2>/dev/null
  n=$(sqlite3 "$T/data/agent.db" 'SELECT COUNT(*) FROM participations')
  start_agent --privacy-budget "$BUDGET"
  ledger mig
  req GET /v1/participations >/dev/null
  check "old agent.db: starts, empty ledger, $n participations kept" \
    test "$(jfield .datasets.length "$T/mig.json")" = 0 -a "$(jfield .participations.length)" = "$n"
fi

check "the party token never reaches the log" bash -c "! grep -q '$PTOKEN' '$T/agent.log'"
stop_agent
svc_summary
