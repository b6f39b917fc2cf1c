#!/usr/bin/env bash
# client-agent suites: the operator API without a server (api_test.sh), the
# privacy ledger and --privacy-budget without a server (ledger_test.sh), and the
# protocol against a real aggregation-server (e2e_test.sh), fedsvd/fedpca with a
# masking-server and `fedsvd job create` (fed_test.sh), the partner workflow
# with `fedsvd join` and `fedsvd participation` (partner_test.sh), power-method
# jobs through an aggregation-server kill -9 (power_restart_test.sh), agents
# killed (-9) mid-job that resume their participations (resume_test.sh). Picked up by
# tests/run_all.sh; alone: tests/agent/run.sh build/bin. Ends "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
BIN=${1:-build/bin}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in tests/agent/api_test.sh tests/agent/ledger_test.sh tests/agent/e2e_test.sh tests/agent/fed_test.sh \
    tests/agent/partner_test.sh tests/agent/power_restart_test.sh tests/agent/resume_test.sh; do
    echo "== $t"
    timeout 600 "$t" "$BIN" 2>&1 | tee "$log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        continue
    fi
    passed=$((passed + ${line%% passed*}))
    f=${line#*passed, }
    failed=$((failed + ${f%% failed}))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
