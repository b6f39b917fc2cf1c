#!/usr/bin/env bash
# CLI tests for build/bin/fedsvd (no Python, no jq): help and usage errors,
# DP reference values, the centralised SVD against planted spectra, every
# input format, malformed inputs, gen determinism and party splits.
#
# Usage: tests/cli/run.sh BIN_DIR_OR_FEDSVD   (default build/bin)
# Prints "ok ..."/"FAIL ..." per check and ends with "cli: P passed, F failed".
set -u

arg=${1:-build/bin}
if [ -d "$arg" ]; then
    F="$arg/fedsvd"
else
    F="$arg"
fi
if [ ! -x "$F" ]; then
    echo "FAIL fedsvd binary not found at $F"
    echo "cli: 0 passed, 1 failed"
    exit 1
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
OUT="$T/stdout"
ERR="$T/stderr"

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $*"
    if [ -s "$ERR" ]; then
        sed 's/^/     stderr: /' "$ERR" | head -n 5
    fi
}

# run CMD...: runs fedsvd with stdout/stderr captured; sets RC.
run() {
    "$F" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# expect_rc NAME RC ARGS...
expect_rc() {
    local name=$1 want=$2
    shift 2
    run "$@"
    if [ "$RC" -eq "$want" ]; then
        ok "$name (exit $RC)"
    else
        fail "$name: exit $RC, expected $want"
    fi
}

# near NAME VALUE EXPECTED TOL: |VALUE - EXPECTED| <= TOL, numerically (awk).
near() {
    if awk -v v="$2" -v e="$3" -v t="$4" 'BEGIN { d = v - e; if (d < 0) d = -d;
            exit !(v != "" && d <= t) }'; then
        ok "$1 ($2 ~ $3)"
    else
        fail "$1: got '$2', expected $3 +- $4"
    fi
}

# below NAME VALUE BOUND: VALUE < BOUND, numerically.
below() {
    if awk -v v="$2" -v b="$3" 'BEGIN { exit !(v != "" && v + 0 < b + 0) }'; then
        ok "$1 ($2 < $3)"
    else
        fail "$1: got '$2', expected < $3"
    fi
}

# json_num KEY FILE: the number after "KEY": in a one-line JSON object.
json_num() {
    sed -n "s/.*\"$1\": *\\([-+0-9.eE]*\\).*/\\1/p" "$2" | head -n 1
}

# json_str KEY FILE
json_str() {
    sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" "$2" | head -n 1
}

one_line_stderr() {
    [ "$(wc -l <"$ERR")" -eq 1 ]
}

echo "== help and version"
for c in "" "svd" "dp" "dp calibrate" "dp convert" "gen" "compare" "convert" "agent" "agent identity"; do
    # shellcheck disable=SC2086
    run $c --help
    if [ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd' "$OUT"; then
        ok "fedsvd $c --help"
    else
        fail "fedsvd $c --help: exit $RC"
    fi
done
for c in "" "svd" "dp" "dp calibrate" "gen" "compare" "convert"; do
    # shellcheck disable=SC2086
    run help $c
    if [ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd' "$OUT"; then
        ok "fedsvd help $c"
    else
        fail "fedsvd help $c: exit $RC"
    fi
done
run svd --input /nonexistent --bogus --help
if [ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd svd' "$OUT"; then
    ok "--help wins over other arguments"
else
    fail "--help with other arguments: exit $RC"
fi
run --version
if [ "$RC" -eq 0 ] && grep -q '^fedsvd [0-9]' "$OUT"; then
    ok "fedsvd --version"
else
    fail "fedsvd --version: exit $RC"
fi

echo "== usage errors (exit 2, one line)"
usage() { # NAME ARGS...
    local name=$1
    shift
    run "$@"
    if [ "$RC" -eq 2 ] && one_line_stderr; then
        ok "usage: $name"
    else
        fail "usage: $name: exit $RC, $(wc -l <"$ERR") stderr lines"
    fi
}
run
if [ "$RC" -eq 2 ]; then ok "no arguments (exit 2)"; else fail "no arguments: exit $RC"; fi
# pinned identities: fedsvd agent identity, job create --party-key / --allow-unpinned
FA=$(printf 'a%.0s' $(seq 64))
FB=$(printf 'B%.0s' $(seq 64))
JC=(job create --server http://127.0.0.1:9 --admin-token-file /dev/null --algorithm secure-sum
    --parties 2 --shape 3,4)
usage "agent without subcommand" agent
usage "agent unknown subcommand" agent frob
usage "agent identity without --agent or --data-dir" agent identity
usage "agent identity with both" agent identity --agent http://127.0.0.1:9 --data-dir "$T"
usage "agent identity --agent without --token-file" agent identity --agent http://127.0.0.1:9
usage "agent identity --agent not a URL" agent identity --agent 127.0.0.1:9 --token-file /dev/null
usage "job create without --party-key or --allow-unpinned" "${JC[@]}"
grep -q 'allow-unpinned' "$ERR" && grep -q 'fedsvd agent identity' "$ERR" &&
    ok "  ... saying what to do" || fail "  ... saying what to do: $(cat "$ERR")"
usage "job create with one party of two pinned" "${JC[@]}" --party-key "1:$FA"
usage "job create --party-key for party 3 of 2" "${JC[@]}" --party-key "1:$FA" --party-key "3:$FB"
usage "job create --party-key twice for a party" "${JC[@]}" --party-key "1:$FA" --party-key "1:$FB"
usage "job create --party-key with 63 digits" "${JC[@]}" --party-key "1:${FA:1}" --party-key "2:$FB"
usage "job create --party-key without a party" "${JC[@]}" --party-key "$FA" --party-key "2:$FB"
usage "job create --party-key 0:" "${JC[@]}" --party-key "0:$FA" --party-key "2:$FB"
# well-formed pins get as far as the (absent) server: a runtime error, exit 1
expect_rc "job create with every party pinned reaches the server" 1 "${JC[@]}" \
    --party-key "2:$FB" --party-key "1:$FA"
expect_rc "job create --allow-unpinned reaches the server" 1 "${JC[@]}" --allow-unpinned
# --data-dir: the fingerprint of the identity.key there (RFC 8032 test 1's key pair)
mkdir -m 700 "$T/agentdir"
printf '\x9d\x61\xb1\x9d\xef\xfd\x5a\x60\xba\x84\x4a\xf4\x92\xec\x2c\xc4\x44\x49\xc5\x69\x7b\x32\x69\x19\x70\x3b\xac\x03\x1c\xae\x7f\x60' \
    >"$T/agentdir/identity.key"
run agent identity --data-dir "$T/agentdir"
[ "$RC" -eq 0 ] && [ "$(cat "$OUT")" = d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a ] &&
    ok "agent identity --data-dir: the public key of identity.key" ||
    fail "agent identity --data-dir: exit $RC, '$(cat "$OUT")'"
run agent identity --data-dir "$T/agentdir" --format json
[ "$RC" -eq 0 ] && grep -q '"algorithm": *"ed25519"' "$OUT" && grep -q '"fingerprint": *"d75a98' "$OUT" &&
    ok "agent identity --format json" || fail "agent identity --format json: $(cat "$OUT")"
expect_rc "agent identity --data-dir without identity.key" 1 agent identity --data-dir "$T"
usage "unknown command" frobnicate
usage "unknown global option" --frob
usage "unknown svd option" svd --input x.npy --bogus 1
usage "svd without --input" svd --out "$T/x"
usage "svd --k 0" svd --input x.npy --k 0
usage "svd --k junk" svd --input x.npy --k 3x
usage "svd --method junk" svd --input x.npy --method fast
usage "svd --input-format junk" svd --input x.npy --input-format xls
usage "svd --format yaml" svd --input x.npy --format yaml
usage "option missing its value" svd --input
usage "option given twice" svd --input a.npy --k 2 --k 3
usage "stray positional" svd extra --input a.npy
usage "dp without subcommand" dp
usage "dp unknown subcommand" dp frob
usage "dp calibrate junk epsilon" dp calibrate --epsilon x --delta 1e-5
usage "dp calibrate negative epsilon" dp calibrate --epsilon -1 --delta 1e-5
usage "dp calibrate delta >= 1" dp calibrate --epsilon 1 --delta 1
usage "dp calibrate nan" dp calibrate --epsilon nan --delta 1e-5
usage "dp calibrate unknown method" dp calibrate --epsilon 1 --delta 1e-5 --method fancy
usage "dp calibrate missing delta" dp calibrate --epsilon 1
usage "dp convert rho and sigma" dp convert --rho 1 --sigma 2 --delta 1e-5
usage "dp convert junk rho" dp convert --rho 0.1x --delta 1e-5
usage "gen without kind" gen --rows 3 --cols 3 --out "$T/x.npy"
usage "gen unknown kind" gen gaussian --rows 3 --cols 3 --out "$T/x.npy"
usage "gen planted without --rank" gen planted --rows 30 --cols 10 --out "$T/x.npy"
usage "gen option of another kind" gen powerlaw --rows 30 --cols 10 --low 1 --out "$T/x.npy"
usage "gen without output" gen powerlaw --rows 30 --cols 10
usage "gen --out-dir without parties" gen powerlaw --rows 30 --cols 10 --out-dir "$T/p"
usage "gen --split not adding up" gen powerlaw --rows 30 --cols 10 --out-dir "$T/p" --split 10,10
usage "gen --parties > rows" gen powerlaw --rows 3 --cols 10 --out-dir "$T/p" --parties 4
usage "gen --seed junk" gen powerlaw --rows 3 --cols 10 --out "$T/x.npy" --seed 12ab
usage "gen --rank > min dim" gen planted --rows 30 --cols 10 --rank 11 --out "$T/x.npy"
usage "compare unknown metric" compare --a x --b y --metric l2
usage "svd --method randomized without --k" svd --input x.npy --method randomized
usage "help unknown command" help frob

echo "== dp"
run dp calibrate --epsilon 1 --delta 1e-5
near "calibrate analytic eps=1 delta=1e-5" "$(cat "$OUT")" 3.730632 1e-5
run dp calibrate --epsilon 1 --delta 1e-5 --format json
if [ "$RC" -eq 0 ] && [ "$(wc -l <"$OUT")" -eq 1 ] && grep -q '^{' "$OUT"; then
    ok "calibrate --format json is one object"
else
    fail "calibrate --format json: exit $RC"
fi
near "calibrate json sigma" "$(json_num sigma "$OUT")" 3.730632 1e-5
run dp calibrate --epsilon 0.5 --delta 1e-5
near "calibrate analytic eps=0.5" "$(cat "$OUT")" 7.031827 1e-5
run dp calibrate --epsilon 5 --delta 1e-3 --sensitivity 2
near "calibrate analytic eps=5 sens=2" "$(cat "$OUT")" 1.379685 1e-5
run dp calibrate --epsilon 50 --delta 1e-5
near "calibrate analytic eps=50" "$(cat "$OUT")" 0.149761 1e-5
run dp calibrate --epsilon 0.1 --delta 1e-5 --method classic
near "calibrate classic eps=0.1" "$(cat "$OUT")" 48.448053 1e-5
run dp calibrate --epsilon 20 --delta 1e-5 --method classic
if [ "$RC" -eq 0 ] && grep -q 'warning' "$ERR"; then
    ok "classic outside eps < 1 warns"
else
    fail "classic eps=20: exit $RC, no warning"
fi
run dp convert --rho 0.03125 --delta 1e-3
near "convert optimal rho=0.03125" "$(cat "$OUT")" 0.6880024554878086 1e-6
run dp convert --rho 0.03125 --delta 1e-3 --method simple
near "convert simple rho=0.03125" "$(cat "$OUT")" 0.9605 1e-4
run dp convert --rho 0.5 --delta 1e-5
near "convert optimal rho=0.5" "$(cat "$OUT")" 4.7284 1e-4
run dp convert --sigma 2 --delta 1e-3 --format json
near "convert --sigma 2 (rho 0.125)" "$(json_num rho "$OUT")" 0.125 1e-15

echo "== gen"
P="$T/planted"
run gen planted --rows 2000 --cols 300 --rank 10 --gap 0.85 --seed 1 --out "$P.npy" --format json
if [ "$RC" -eq 0 ] && [ -s "$P.npy" ] && [ -s "$P.spectrum.npy" ] && [ -s "$P.V.npy" ]; then
    ok "gen planted 2000x300 with spectrum and V side files"
else
    fail "gen planted: exit $RC"
fi
[ "$(json_str seed "$OUT")" = "0100000000000000000000000000000000000000000000000000000000000000" ] &&
    ok "gen json reports the seed" || fail "gen json seed: $(cat "$OUT")"
run gen planted --rows 2000 --cols 300 --rank 10 --gap 0.85 --seed 1 --out "$T/again.npy"
if cmp -s "$P.npy" "$T/again.npy"; then
    ok "gen is deterministic for a seed"
else
    fail "gen with the same seed differs"
fi
run gen planted --rows 2000 --cols 300 --rank 10 --seed 2 --out "$T/other.npy"
if ! cmp -s "$P.npy" "$T/other.npy"; then
    ok "gen differs for another seed"
else
    fail "gen ignores the seed"
fi
run gen powerlaw --rows 60 --cols 7 --seed 5 --out "$T/pl.csv" --out-dir "$T/parts" --parties 4 \
    --out-format csv
if [ "$RC" -eq 0 ] && cat "$T"/parts/party-{1,2,3,4}.csv | cmp -s - "$T/pl.csv"; then
    ok "gen --parties 4: party files stack to the whole matrix"
else
    fail "gen --parties 4: exit $RC or parts differ"
fi
lines=$(for i in 1 2 3 4; do wc -l <"$T/parts/party-$i.csv"; done | tr '\n' ' ')
[ "$lines" = "15 15 15 15 " ] && ok "gen --parties splits evenly" || fail "party sizes: $lines"
run gen uniform-int --rows 50 --cols 4 --seed 9 --out "$T/ui.csv" --out-dir "$T/split" \
    --split 10,15,25 --out-format csv
lines=$(for i in 1 2 3; do wc -l <"$T/split/party-$i.csv"; done | tr '\n' ' ')
[ "$RC" -eq 0 ] && [ "$lines" = "10 15 25 " ] && ok "gen --split 10,15,25" ||
    fail "gen --split: exit $RC, sizes $lines"
if [ "$RC" -eq 0 ] && ! grep -qvE '^[0-5](,[0-5]){3}$' "$T/ui.csv"; then
    ok "uniform-int entries are integers in [0, 5]"
else
    fail "uniform-int entries out of range"
fi
run gen ratings --users 200 --items 40 --nnz 900 --seed 3 --out "$T/r.mtx" --out-dir "$T/rp" \
    --parties 2
nnz=$(grep -v '^%' "$T/r.mtx" | head -n 1 | awk '{ print $3 }')
if [ "$RC" -eq 0 ] && [ "$nnz" = "900" ] && [ -s "$T/rp/party-2.mtx" ]; then
    ok "gen ratings: .mtx with 900 entries and party files"
else
    fail "gen ratings: exit $RC, nnz '$nnz'"
fi
if [ "$RC" -eq 0 ] && grep -v '^%' "$T/r.mtx" | tail -n +2 | awk '$3 < 1 || $3 > 5 || $3 != int($3) { bad = 1 }
        END { exit bad }'; then
    ok "ratings are integers 1..5"
else
    fail "ratings values out of range"
fi
# the streamed generator: --ratings (= --nnz), counts per party file, distinct
# pairs, party files stacking to the whole matrix, loadable by the loader
run gen ratings --users 300 --items 50 --ratings 2000 --alpha 1.2 --seed 11 --out "$T/rs.mtx" \
    --out-dir "$T/rsp" --split 100,120,80
hdr() { grep -v '^%' "$1" | head -n 1; }
ents() { grep -v '^%' "$1" | tail -n +2; }
if [ "$RC" -eq 0 ] && [ "$(hdr "$T/rs.mtx")" = "300 50 2000" ] &&
    [ "$(ents "$T/rs.mtx" | wc -l)" -eq 2000 ] &&
    [ "$(ents "$T/rs.mtx" | awk '{ print $1, $2 }' | sort -u | wc -l)" -eq 2000 ]; then
    ok "gen ratings --ratings 2000: header and 2000 distinct (user, item) entries"
else
    fail "gen ratings --ratings: exit $RC, header '$(hdr "$T/rs.mtx" 2>/dev/null)'"
fi
sum=0
stack=""
off=0
i=1
for n in 100 120 80; do
    f="$T/rsp/party-$i.mtx"
    read -r h1 h2 h3 <<<"$(hdr "$f")"
    [ "${h1:-}" = "$n" ] && [ "${h2:-}" = 50 ] && [ "$(ents "$f" | wc -l)" = "${h3:-x}" ] ||
        stack="bad header of party $i: '${h1:-} ${h2:-} ${h3:-}'"
    sum=$((sum + ${h3:-0}))
    ents "$f" | awk -v o="$off" '{ print $1 + o, $2, $3 }' >>"$T/rs.stacked"
    off=$((off + n))
    i=$((i + 1))
done
if [ -z "$stack" ] && [ "$sum" -eq 2000 ] && ents "$T/rs.mtx" | cmp -s - "$T/rs.stacked"; then
    ok "gen ratings --split: party headers count their entries and stack to the whole file"
else
    fail "gen ratings party files: $stack, sum $sum"
fi
if "$F" convert --input "$T/rsp/party-2.mtx" --out "$T/rs2.csv" >/dev/null 2>&1 &&
    [ "$(wc -l <"$T/rs2.csv")" -eq 120 ] &&
    [ "$(tr ',' '\n' <"$T/rs2.csv" | grep -cv '^0$')" -eq "$(hdr "$T/rsp/party-2.mtx" | awk '{ print $3 }')" ]; then
    ok "a generated party .mtx loads (fedsvd convert: 120 rows, its nonzeros)"
else
    fail "fedsvd convert of a generated party .mtx"
fi
"$F" gen ratings --users 300 --items 50 --nnz 2000 --alpha 1.2 --seed 11 --out "$T/rs-again.mtx" \
    >/dev/null 2>&1
if cmp -s "$T/rs.mtx" "$T/rs-again.mtx"; then
    ok "gen ratings: the same seed gives the same file (--nnz = --ratings)"
else
    fail "gen ratings is not deterministic"
fi
run gen ratings --users 10 --items 4 --ratings 5 --nnz 5 --out "$T/x.mtx"
if [ "$RC" -eq 2 ]; then ok "gen ratings --ratings with --nnz: usage error"; else fail "--ratings --nnz: exit $RC"; fi

hex=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
run gen uniform-int --rows 5 --cols 3 --low -3 --high -1 --seed "$hex" --out "$T/neg.csv" --format json
if [ "$RC" -eq 0 ] && [ "$(json_str seed "$OUT")" = "$hex" ] && ! grep -qvE '^-[123](,-[123]){2}$' "$T/neg.csv"; then
    ok "gen with a 64-hex-digit seed and negative bounds"
else
    fail "gen --seed hex64 / --low -3: exit $RC"
fi
run gen planted --rows 100 --cols 20 --rank 3 --noise 0.5 --seed 1 --out-dir "$T/noisy" --parties 2
if [ "$RC" -eq 0 ] && [ -s "$T/noisy/V.npy" ] && [ ! -e "$T/noisy/spectrum.npy" ]; then
    ok "planted with noise: V side file in the out dir, no spectrum"
else
    fail "planted with noise side files: exit $RC"
fi

echo "== svd (2000 x 300 planted, exact spectrum known)"
S="$T/svd"
run svd --input "$P.npy" --out "$S" --format json
if [ "$RC" -eq 0 ] && [ -s "$S/U.npy" ] && [ -s "$S/S.npy" ] && [ -s "$S/V.npy" ] &&
    [ -s "$S/summary.json" ]; then
    ok "svd writes U.npy S.npy V.npy summary.json"
else
    fail "svd: exit $RC"
fi
below "svd reconstruction error" "$(json_num reconstruction_error "$OUT")" 1e-13
[ "$(json_str method "$OUT")" = "thin" ] && ok "thin by default" || fail "method: $(json_str method "$OUT")"
grep -q '"shape": \[2000, 300\]' "$OUT" && ok "summary shape [2000, 300]" || fail "summary shape"
grep -q '"numerical_rank": 300' "$OUT" && ok "numerical rank 300" || fail "numerical rank"
grep -q '"reconstruction_error"' "$S/summary.json" && grep -q '"singular_values_head"' "$S/summary.json" &&
    ok "summary.json has the fields" || fail "summary.json fields"
run compare --a "$S/S.npy" --b "$P.spectrum.npy" --metric sv --format json
below "S vs planted spectrum (max |ds|/s1)" "$(json_num value "$OUT")" 1e-12
below "S vs planted spectrum (elementwise rel)" "$(json_num sv_max_elementwise_rel_error "$OUT")" 1e-12
expect_rc "compare --tol passes" 0 compare --a "$S/S.npy" --b "$P.spectrum.npy" --metric sv --tol 1e-12
run compare --a "$S/V.npy" --b "$P.V.npy" --metric subspace --k 10 --format json
below "top-10 V vs planted V (projection distance)" "$(json_num value "$OUT")" 1e-10
below "top-10 V vs planted V (sin theta)" "$(json_num sin_theta "$OUT")" 1e-10
expect_rc "compare --tol fails -> exit 1" 1 compare --a "$P.spectrum.npy" --b "$T/pl.spectrum.npy" \
    --metric sv --tol 1e-12
run compare --a "$S/S.npy" --b "$S/S.npy" --metric fro
near "compare a file with itself" "$(cat "$OUT")" 0 0

echo "== svd top-k"
run svd --input "$P.npy" --k 10 --method thin --out "$T/k_thin" --format json
[ "$RC" -eq 0 ] && grep -q '"k": 10' "$OUT" && ok "svd --k 10 --method thin" || fail "svd --k thin: exit $RC"
run compare --a "$T/k_thin/S.npy" --b "$S/S.npy" --metric sv --k 10
below "top-10 thin S vs thin S" "$(cat "$OUT")" 1e-15
run compare --a "$T/k_thin/V.npy" --b "$S/V.npy" --metric subspace --k 10
below "top-10 thin V vs thin V" "$(cat "$OUT")" 1e-12
run svd --input "$P.npy" --k 10 --method gesvdx --out "$T/k_x" --format json
[ "$RC" -eq 0 ] && [ "$(json_str method "$OUT")" = "gesvdx" ] && ok "svd --method gesvdx" ||
    fail "svd gesvdx: exit $RC"
run compare --a "$T/k_x/S.npy" --b "$P.spectrum.npy" --metric sv --k 10
below "gesvdx top-10 S vs planted" "$(cat "$OUT")" 1e-12
run compare --a "$T/k_x/V.npy" --b "$P.V.npy" --metric subspace
below "gesvdx top-10 V vs planted V" "$(cat "$OUT")" 1e-10
# Randomized accuracy depends on the gap; test it where the gap is clear (s_11/s_10 = 0.1).
run gen planted --rows 2000 --cols 300 --rank 10 --gap 0.01 --seed 4 --out "$T/gap.npy"
run svd --input "$T/gap.npy" --k 10 --out "$T/k_auto0" --format json
[ "$RC" -eq 0 ] && [ "$(json_str method "$OUT")" = "gesvdx" ] && ok "auto with --k is the exact gesvdx" ||
    fail "svd --k 10 auto: exit $RC, method $(json_str method "$OUT")"
run svd --input "$T/gap.npy" --k 10 --method randomized --seed 7 --out "$T/k_auto" --format json
[ "$RC" -eq 0 ] && [ "$(json_str method "$OUT")" = "randomized" ] && ok "randomized on request" ||
    fail "svd --k 10 randomized: exit $RC, method $(json_str method "$OUT")"
grep -q '"seed": "0700' "$OUT" && ok "randomized reports its seed" || fail "randomized seed missing"
run compare --a "$T/k_auto/S.npy" --b "$T/gap.spectrum.npy" --metric sv --k 10
below "randomized top-10 S vs planted" "$(cat "$OUT")" 1e-10
run compare --a "$T/k_auto/V.npy" --b "$T/gap.V.npy" --metric subspace
below "randomized top-10 V vs planted V" "$(cat "$OUT")" 1e-6
run svd --input "$T/gap.npy" --k 10 --method randomized --seed 7 --out "$T/k_auto2"
if cmp -s "$T/k_auto/S.npy" "$T/k_auto2/S.npy"; then
    ok "randomized is deterministic for a seed"
else
    fail "randomized with the same seed differs"
fi
usage "svd --k above min(rows, cols)" svd --input "$P.npy" --k 301

echo "== input formats (same matrix as npy, csv, mtx, idx)"
run gen powerlaw --rows 40 --cols 6 --seed 11 --out "$T/f.npy"
run convert --input "$T/f.npy" --out "$T/f.csv"
run convert --input "$T/f.npy" --out "$T/f.mtx"
cp "$T/f.csv" "$T/f.dat"
for f in f.npy f.csv f.mtx; do
    run svd --input "$T/$f" --out "$T/out_$f"
    if [ "$RC" -eq 0 ]; then ok "svd --input $f"; else fail "svd --input $f: exit $RC"; fi
done
run svd --input "$T/f.dat" --input-format csv --out "$T/out_f.dat"
if [ "$RC" -eq 0 ]; then ok "svd --input-format csv on f.dat"; else fail "--input-format csv: exit $RC"; fi
for f in f.csv f.mtx f.dat; do
    run compare --a "$T/out_$f/S.npy" --b "$T/out_f.npy/S.npy" --metric fro
    below "S from $f equals S from f.npy" "$(cat "$OUT")" 1e-14
done
run compare --a "$T/f.csv" --b "$T/f.npy" --metric fro --format json
near "csv round trip is exact" "$(json_num value "$OUT")" 0 0
run convert --input "$T/f.mtx" --out "$T/f2.npy" --format json
if [ "$RC" -eq 0 ] && grep -q '"shape": \[40, 6\]' "$OUT"; then
    ok "convert --format json reports the shape"
else
    fail "convert json: exit $RC"
fi
# IDX: 4 "images" of 2 x 3 unsigned bytes -> a 4 x 6 matrix; the same numbers as CSV.
printf '\x00\x00\x08\x03\x00\x00\x00\x04\x00\x00\x00\x02\x00\x00\x00\x03' >"$T/m.idx"
printf '\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\xff\x00\x05\x00\x07\x02\x01\x09\x09\x03\x01\x00\x04' >>"$T/m.idx"
printf '1,2,3,4,5,6\n7,8,9,10,11,255\n0,5,0,7,2,1\n9,9,3,1,0,4\n' >"$T/m.csv"
run svd --input "$T/m.idx" --out "$T/out_idx"
if [ "$RC" -eq 0 ]; then ok "svd --input m.idx"; else fail "svd --input m.idx: exit $RC"; fi
run svd --input "$T/m.csv" --out "$T/out_mcsv"
run compare --a "$T/out_idx/S.npy" --b "$T/out_mcsv/S.npy" --metric fro
below "S from idx equals S from the same csv" "$(cat "$OUT")" 1e-14
run convert --input "$T/m.idx" --out "$T/m2.csv"
run compare --a "$T/m2.csv" --b "$T/m.csv" --metric fro
near "idx reads as the expected 4 x 6 matrix" "$(cat "$OUT")" 0 0
run svd --input "$T/r.mtx" --k 3 --method thin
if [ "$RC" -eq 0 ]; then ok "svd on a sparse ratings .mtx"; else fail "svd on ratings .mtx: exit $RC"; fi
printf 'a,b,c\n1,2,3\n4,5,6\n' >"$T/hdr.csv"
run svd --input "$T/hdr.csv"
if [ "$RC" -eq 0 ]; then ok "csv with a header line"; else fail "csv with header: exit $RC"; fi

echo "== malformed inputs (exit 1, one line naming the file and position)"
malformed() { # NAME FILE [extra svd args]
    local name=$1 file=$2
    shift 2
    run svd --input "$file" "$@"
    if [ "$RC" -ne 1 ]; then
        fail "malformed $name: exit $RC, expected 1"
    elif ! one_line_stderr; then
        fail "malformed $name: $(wc -l <"$ERR") stderr lines"
    elif ! grep -qF "$(basename "$file")" "$ERR"; then
        fail "malformed $name: message does not name the file"
    elif ! grep -qiE '(line|offset|byte|entry|row|column|header|position) [0-9]+' "$ERR"; then
        fail "malformed $name: message names no position"
    else
        ok "malformed $name: $(cat "$ERR")"
    fi
}
head -c 300 "$T/f.npy" >"$T/trunc.npy"
malformed "truncated npy" "$T/trunc.npy"
printf '\x93NUMPX\x01\x00' >"$T/magic.npy"
head -c 200 "$T/f.npy" | tail -c +9 >>"$T/magic.npy"
malformed "npy bad magic" "$T/magic.npy"
hdr="{'descr': '<c16', 'fortran_order': False, 'shape': (2, 2), }"
{
    printf '\x93NUMPY\x01\x00\x76\x00%s' "$hdr"
    printf '%*s\n' $((117 - ${#hdr})) ''
    printf '\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00'
} >"$T/dtype.npy"
malformed "npy unsupported dtype" "$T/dtype.npy"
printf '1,2,3\n4,5,6\n7,8\n' >"$T/ragged.csv"
malformed "ragged csv" "$T/ragged.csv"
printf '1,2\nnan,3\n' >"$T/nan.csv"
malformed "NaN in csv" "$T/nan.csv"
printf '1,2\n3,abc\n' >"$T/junk.csv"
malformed "junk in csv" "$T/junk.csv"
printf '1,2\n3,1e999\n' >"$T/inf.csv"
malformed "overflow in csv" "$T/inf.csv"
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n3 1 2.0\n' >"$T/range.mtx"
malformed "mtx index out of range" "$T/range.mtx"
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1.0\n2 2 2.0\n' >"$T/short.mtx"
malformed "mtx fewer entries than declared" "$T/short.mtx"
printf '%%%%MatrixMarket matrix banana real general\n2 2 1\n1 1 1.0\n' >"$T/banner.mtx"
malformed "mtx bad banner" "$T/banner.mtx"
printf '\x00\x01\x08\x02\x00\x00\x00\x02\x00\x00\x00\x02\x01\x02\x03\x04' >"$T/magic.idx"
malformed "idx bad magic" "$T/magic.idx"
printf '\x00\x00\x08\x02\x00\x00\x00\x03\x00\x00\x00\x02\x01\x02\x03' >"$T/trunc.idx"
malformed "idx truncated data" "$T/trunc.idx"
run svd --input "$T/does-not-exist.npy"
if [ "$RC" -eq 1 ] && one_line_stderr && grep -q 'does-not-exist.npy' "$ERR"; then
    ok "missing file: $(cat "$ERR")"
else
    fail "missing file: exit $RC"
fi
: >"$T/empty.csv"
run svd --input "$T/empty.csv"
if [ "$RC" -eq 1 ] && one_line_stderr; then ok "empty csv (exit 1)"; else fail "empty csv: exit $RC"; fi

# ---- plot ----
# fedsvd plot scatter|scree|line; its checks add to passed/failed above.
# shellcheck source=tests/cli/plot.sh
. "$(dirname "$0")/plot.sh"
# ---- end plot ----

# ---- local: power methods ----
# fedsvd local / job create with fedpower, fedpower-utility, fedpower-private, dp-ppm.
# shellcheck source=tests/cli/local_power.sh
. "$(dirname "$0")/local_power.sh"
# ---- end local: power methods ----

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
