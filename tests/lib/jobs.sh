# Job helpers of the shell suites that drive client agents against an
# aggregation server (tests/agent/*.sh); sourcing it sources
# tests/lib/services.sh too (set BIN first).
# A job NAME leaves its files in $T: NAME.job.json (the created job, with
# its invitations), NAME.ids.json ({job, ids}: participation i+1 on agent
# i+1), NAME.parts.json (the participations' last states), NAME.status.json
# (the job's document).

# shellcheck source=services.sh
. "$(dirname "${BASH_SOURCE[0]}")/services.sh"

# job_create NAME SPEC: POST /v1/jobs with the JSON SPEC -> NAME.job.json
job_create() {
  curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$2" \
    "$SURL/v1/jobs" >"$T/$1.job.json"
}

# job_hand_out NAME FAIL_AT...: party i's invitation to agent i, dataset
# $T/x<party>.csv; FAIL_AT per party: - (none), a phase (e.g. consistency,
# masked_input:2), or "absent" (the party never joins) -> NAME.ids.json
job_hand_out() {
  local name=$1
  shift
  node --input-type=module - "$JLIB" "$T" "$name" "$OP" "${AURL[@]:1}" -- "$@" <<'EOF'
import fs from 'node:fs';
const [lib, T, name, op, ...rest] = process.argv.slice(2);
const { readJson, postJson } = await import(lib);
const sep = rest.indexOf('--');
const urls = rest.slice(0, sep);
const fails = rest.slice(sep + 1);
const job = readJson(`${T}/${name}.job.json`);
const ids = [];
for (const inv of job.invitations) {
  const i = inv.party - 1;
  const f = fails[i] ?? '-';
  if (f === 'absent') continue;
  const body = { invitation: inv, dataset: { path: `${T}/x${inv.party}.csv`, format: 'csv' },
                 fail_at: f === '-' ? null : f };
  ids.push((await postJson(`${urls[i]}/v1/participations`, op, body)).id);
}
fs.writeFileSync(`${T}/${name}.ids.json`, JSON.stringify({ job: job.job.id, ids }));
EOF
}

# job_start NAME SPEC FAIL_AT...: job_create, then job_hand_out
job_start() {
  local name=$1 spec=$2
  shift 2
  job_create "$name" "$spec"
  job_hand_out "$name" "$@"
}

job_of() { node "$JLIB" get "$T/$1.ids.json" .job; }          # NAME
pid_of() { node "$JLIB" get "$T/$1.ids.json" ".ids[$2]"; }    # NAME INDEX
state_of() { node "$JLIB" get "$T/$1.parts.json" "[$2].$3"; } # NAME INDEX FIELD
party_done() { test "$(state_of "$1" "$2" state)" = done; }   # NAME INDEX
job_done() { test "$(node "$JLIB" get "$T/$1.status.json" .state)" = done; }

# job_wait_parts NAME: wait (60 s at most) for the participations of NAME to
# end (agent i runs the i-th) -> NAME.parts.json
job_wait_parts() {
  local urls=() i=0 id
  for id in $(node "$JLIB" get "$T/$1.ids.json" .ids | tr -d '[]"' | tr , ' '); do
    i=$((i + 1))
    urls+=("${AURL[$i]}/v1/participations/$id")
  done
  node "$JLIB" wait-done "$T/$1.parts.json" 60 "$OP" "${urls[@]}"
}

# job_wait NAME: job_wait_parts, then wait (10 s) for the job to end -> NAME.status.json
job_wait() {
  job_wait_parts "$1"
  for _ in $(seq 100); do
    curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$(job_of "$1")" >"$T/$1.status.json"
    [ "$(node "$JLIB" get "$T/$1.status.json" .state)" != running ] && break
    sleep 0.1
  done
}

# job_in_phase NAME PHASE AGG: wait (10 s at most) until the job is in PHASE
# of aggregation AGG
job_in_phase() {
  local st job
  job=$(job_of "$1")
  for _ in $(seq 1000); do
    st=$(curl -s -H "Authorization: Bearer $ADMIN" "$SURL/v1/jobs/$job")
    if printf '%s' "$st" | grep -q "\"phase\": *\"$2\"" &&
      printf '%s' "$st" | grep -q "\"aggregation\": *$3[,}]"; then
      return 0
    fi
    sleep 0.01
  done
  return 1
}

# power_data SEED: K (default 3) parties of 30 x D (default 8) seeded values
# in $T/x<i>.csv; prints VB, twice the largest ||M_i||_F^2 / s_i, a public
# bound on ||M'_i||_2
power_data() {
  node --input-type=module - "$JLIB" "$T" "${K:-3}" "${D:-8}" "$1" <<'EOF'
import fs from 'node:fs';
const [lib, T, K, D, seed] = process.argv.slice(2);
const { Rng } = await import(lib);
const rng = new Rng(Number(seed));
let vb = 0;
for (let i = 1; i <= Number(K); i++) {
  let out = '';
  let s = 0;
  for (let r = 0; r < 30; r++) {
    const row = [];
    for (let c = 0; c < Number(D); c++) {
      const x = (rng.random() - 0.5) * (c + 1);
      s += x * x;
      row.push(x);
    }
    out += row.map(String).join(',') + '\n';
  }
  vb = Math.max(vb, s / 30);
  fs.writeFileSync(`${T}/x${i}.csv`, out);
}
console.log((2 * vb).toPrecision(6));
EOF
}
