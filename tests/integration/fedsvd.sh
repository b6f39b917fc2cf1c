#!/usr/bin/env bash
# Integration tests of the lossless jobs (fedsvd, fedpca) with real processes
# on 127.0.0.1: `fedsvd local` starts a masking-server, an
# aggregation-server and one client-agent per party, runs the job and
# collects each party's result. Every result is checked against the
# centralised `fedsvd svd` of the pooled matrix (`fedsvd compare`) and, with
# --verify, against local's own LAPACK reference (which also measures the
# reconstruction ||X - U S V^T||_F / ||X||_F with the parties' private
# factors stacked). Bounds (the accuracy this suite requires): singular values within
# 1e-12 of s_1, projection distance of the shared factor <= 1e-10,
# reconstruction <= 1e-12.
#
# Covered: 3 parties x 200 x 50 fedsvd and fedpca (also standardized and
# top-k), the features partition (fedsvd and fedpca), a dropped party
# without allow_dropouts (clean failure), with it above the threshold (the
# survivors' exact SVD / PCA) and below it (secure aggregation aborts), one
# moderate size (4 parties x 3000 x 300), usage errors, and that no process
# or temporary directory is left behind.
#
# Usage: tests/integration/fedsvd.sh BIN_DIR (default build/bin)
# Ends with "fedsvd-integration: P passed, F failed".
set -u

BIN=${1:-build/bin}
F="$BIN/fedsvd"
passed=0
failed=0
SV_TOL=1e-12
PROJ_TOL=1e-10
REC_TOL=1e-12

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $*"
    if [ -n "${ERR:-}" ] && [ -s "$ERR" ]; then
        sed 's/^/     stderr: /' "$ERR" | tail -n 8
    fi
}

finish() {
    echo "fedsvd-integration: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

for b in fedsvd aggregation-server client-agent masking-server; do
    if [ ! -x "$BIN/$b" ]; then
        fail "$BIN/$b not built"
    fi
done
[ "$failed" -eq 0 ] || finish

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT="$T/stdout"
ERR="$T/stderr"
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"

run() { # fedsvd ARGS...; sets RC and SECS
    local t0 t1
    t0=$(date +%s.%N)
    "$F" "$@" >"$OUT" 2>"$ERR"
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

below() { # NAME VALUE BOUND
    if awk -v v="$2" -v b="$3" 'BEGIN { exit !(v != "" && v != "null" && v + 0 <= b + 0) }'; then
        ok "$1 ($2 <= $3)"
    else
        fail "$1: got '$2', expected <= $3"
    fi
}

# vfield DIR KEY: a number of summary.json's "verification" object.
vfield() {
    tr -d '\n' <"$1/summary.json" | sed -n "s/.*\"verification\": *{\\([^}]*\\)}.*/\\1/p" |
        sed -n "s/.*\"$2\": *\\([-+0-9.eE]*\\|null\\).*/\\1/p" | head -n 1
}

# sfield DIR KEY: the first "KEY": value (number or string) of summary.json.
sfield() {
    tr -d '\n' <"$1/summary.json" | sed -n "s/[^{]*{ *\"$2\": *\\(\"[^\"]*\"\\|[-+0-9.eE]*\\|null\\|true\\|false\\).*/\\1/p;
        s/.*[,{] *\"$2\": *\\(\"[^\"]*\"\\|[-+0-9.eE]*\\|null\\|true\\|false\\).*/\\1/p" | head -n 1 | tr -d '"'
}

# npy_transpose IN OUT: OUT holds IN^T. IN is a Fortran-order <f8 .npy v1 (as
# fedsvd writes them): the same bytes read in C order with the shape swapped
# are the transpose, so only the header changes.
npy_transpose() {
    local in=$1 out=$2 hlen total hdr r c new
    hlen=$(od -An -tu2 -j8 -N2 "$in" | tr -d ' ')
    total=$((10 + hlen))
    hdr=$(head -c "$total" "$in" | tail -c +11)
    case $hdr in *"'fortran_order': True"*) ;; *) return 1 ;; esac
    r=$(printf '%s' "$hdr" | sed -n "s/.*'shape': (\\([0-9]*\\), \\([0-9]*\\)).*/\\1/p")
    c=$(printf '%s' "$hdr" | sed -n "s/.*'shape': (\\([0-9]*\\), \\([0-9]*\\)).*/\\2/p")
    [ -n "$r" ] && [ -n "$c" ] || return 1
    new="{'descr': '<f8', 'fortran_order': False, 'shape': ($c, $r), }"
    [ ${#new} -lt "$hlen" ] || return 1
    {
        head -c 10 "$in"
        printf '%s' "$new"
        printf "%$((hlen - ${#new} - 1))s\n" ''
        tail -c +$((total + 1)) "$in"
    } >"$out"
}

no_leftovers() { # NAME
    local procs dirs
    procs=$(pgrep -f -- "$TMPDIR/fedsvd-local-" | tr '\n' ' ')
    dirs=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'fedsvd-local-*' | wc -l)
    if [ -z "$procs" ] && [ "$dirs" -eq 0 ]; then
        ok "$1: no process or temporary directory left"
    else
        fail "$1: left processes [$procs], $dirs temporary directories"
    fi
}

# clean_stop NAME DIR: every service exited 0 on SIGTERM.
clean_stop() {
    if grep -q '"sigkilled": true' "$1/summary.json" || grep -q '"signal"' "$1/summary.json" ||
        grep '"exit_code"' "$1/summary.json" | grep -qv '"exit_code": 0'; then
        fail "$2: a service did not stop cleanly"
    else
        ok "$2: every service (masking, aggregation, agents) exited 0 on SIGTERM"
    fi
}

# check_verify NAME DIR: local --verify's figures within the acceptance bounds.
check_verify() {
    local name=$1 dir=$2 v
    below "$name: singular values vs LAPACK of the pooled matrix (rel. to s_1)" \
        "$(vfield "$dir" sv_error)" $SV_TOL
    below "$name: projection distance of the shared factor" \
        "$(vfield "$dir" shared_projection_distance)" $PROJ_TOL
    v=$(vfield "$dir" private_projection_distance)
    if [ -n "$v" ] && [ "$v" != "null" ]; then
        below "$name: projection distance of the stacked private factors" "$v" $PROJ_TOL
    fi
    below "$name: reconstruction ||X - U S V^T||_F / ||X||_F" \
        "$(vfield "$dir" reconstruction_error)" "${3:-$REC_TOL}"
}

# compare_sv NAME A B / compare_sub NAME A B K
compare_sv() {
    local v
    v=$("$F" compare --a "$2" --b "$3" --metric sv 2>"$ERR")
    below "$1: fedsvd compare --metric sv vs fedsvd svd" "$v" $SV_TOL
}
compare_sub() {
    local v
    if [ -n "${4:-}" ]; then
        v=$("$F" compare --a "$2" --b "$3" --metric subspace --k "$4" 2>"$ERR")
    else
        v=$("$F" compare --a "$2" --b "$3" --metric subspace 2>"$ERR")
    fi
    below "$1: fedsvd compare --metric subspace vs fedsvd svd" "$v" $PROJ_TOL
}

echo "== data: 3 parties of 200 x 50 (rows = samples), and 3 of 200 x 30 columns"
D="$T/data"
mkdir -p "$D"
if "$F" gen powerlaw --rows 600 --cols 50 --seed 7 --out "$D/full.npy" --out-dir "$D/s" --parties 3 \
    >/dev/null 2>"$ERR" &&
    "$F" gen planted --rows 90 --cols 200 --rank 6 --noise 0.3 --seed 8 --out "$D/fullT.npy" \
        --out-dir "$D/fT" --parties 3 >/dev/null 2>"$ERR"; then
    ok "fedsvd gen: samples and (transposed) features data"
else
    fail "fedsvd gen"
    finish
fi
# features: party i holds columns of the 200 x 90 matrix X = fullT^T
npy_transpose "$D/fullT.npy" "$D/fullF.npy" &&
    for i in 1 2 3; do npy_transpose "$D/fT/party-$i.npy" "$D/f-$i.npy" || exit 1; done &&
    ok "features parties: 200 x 30 each (transposed by header)" || fail "npy_transpose"
SP=(--party "$D/s/party-1.npy" --party "$D/s/party-2.npy" --party "$D/s/party-3.npy")
FP=(--party "$D/f-1.npy" --party "$D/f-2.npy" --party "$D/f-3.npy")

echo "== centralised references (fedsvd svd of the pooled matrix)"
run svd --input "$D/s/party-1.npy" --input "$D/s/party-2.npy" --input "$D/s/party-3.npy" --out "$T/ref-s"
[ "$RC" -eq 0 ] && ok "fedsvd svd of the 600 x 50 pooled matrix (three --input)" || fail "svd pooled: exit $RC"
run svd --input "$D/s/party-1.npy" --input "$D/s/party-2.npy" --input "$D/s/party-3.npy" --center \
    --out "$T/ref-c"
[ "$RC" -eq 0 ] && [ -s "$T/ref-c/mean.npy" ] && ok "fedsvd svd --center (the centralised PCA)" ||
    fail "svd --center: exit $RC"
run svd --input "$D/fullF.npy" --out "$T/ref-f"
[ "$RC" -eq 0 ] && ok "fedsvd svd of the 200 x 90 features matrix" || fail "svd features: exit $RC"
run svd --input "$D/s/party-1.npy" --input "$D/s/party-3.npy" --out "$T/ref-13"
[ "$RC" -eq 0 ] && ok "fedsvd svd of parties 1 and 3 only" || fail "svd 1,3: exit $RC"

echo "== fedsvd, 3 parties x 200 x 50"
R="$T/r-svd"
run local --algorithm fedsvd "${SP[@]}" --out "$R" --verify
if [ "$RC" -eq 0 ] && [ -s "$R/S.npy" ] && [ -s "$R/V.npy" ] && [ -s "$R/party-1/U.npy" ] &&
    [ -s "$R/party-3/U.npy" ] && [ -s "$R/summary.json" ]; then
    ok "fedsvd: exit 0 in ${SECS}s; S.npy, V.npy, party-<i>/U.npy, summary.json"
    SVD_SECS=$SECS
    compare_sv "fedsvd S" "$R/S.npy" "$T/ref-s/S.npy"
    compare_sub "fedsvd V" "$R/V.npy" "$T/ref-s/V.npy"
    check_verify "fedsvd" "$R"
    SVD_SV=$(vfield "$R" sv_error)
    SVD_PROJ=$(vfield "$R" shared_projection_distance)
    SVD_REC=$(vfield "$R" reconstruction_error)
    [ "$(sfield "$R" rank)" = "50" ] && ok "numerical rank 50 in summary.json" ||
        fail "rank: '$(sfield "$R" rank)'"
    for k in phases peak_memory_bytes bytes_sent bytes_received masked_input factorizing party_recover; do
        grep -q "\"$k\"" "$R/summary.json" || fail "summary.json lacks $k"
    done
    grep -q '"masking-server": [0-9]' "$R/summary.json" && grep -q '"aggregation-server": [0-9]' \
        "$R/summary.json" && ok "summary.json: phases, bytes per party and server, peak memory" ||
        fail "summary.json: no peak memory"
    clean_stop "$R" "fedsvd"
else
    fail "fedsvd: exit $RC"
fi

echo "== fedsvd top-k (k = 5)"
R="$T/r-k5"
run local --algorithm fedsvd "${SP[@]}" --out "$R" --k 5 --verify
if [ "$RC" -eq 0 ]; then
    ok "fedsvd --k 5: exit 0"
    compare_sv "top-5 S" "$R/S.npy" "$T/ref-s/S.npy"
    compare_sub "top-5 V" "$R/V.npy" "$T/ref-s/V.npy" 5
    below "top-5: reconstruction equals the reference's truncation error" \
        "$(awk -v a="$(vfield "$R" reconstruction_error)" -v b="$(vfield "$R" reference_reconstruction_error)" \
            'BEGIN { d = a - b; if (d < 0) d = -d; print d }')" 1e-12
else
    fail "fedsvd --k 5: exit $RC"
fi

echo "== fedpca, 3 parties x 200 x 50"
R="$T/r-pca"
run local --algorithm fedpca "${SP[@]}" --out "$R" --verify
if [ "$RC" -eq 0 ] && [ -s "$R/components.npy" ] && [ -s "$R/explained_variance.npy" ] &&
    [ -s "$R/explained_variance_ratio.npy" ] && [ -s "$R/mean.npy" ] && [ -s "$R/party-2/scores.npy" ]; then
    ok "fedpca: exit 0 in ${SECS}s; components, explained_variance(_ratio), mean, party-<i>/scores"
    PCA_SECS=$SECS
    compare_sv "fedpca singular values" "$R/singular_values.npy" "$T/ref-c/S.npy"
    compare_sub "fedpca components" "$R/components.npy" "$T/ref-c/V.npy"
    v=$("$F" compare --a "$R/mean.npy" --b "$T/ref-c/mean.npy" --metric maxrel 2>"$ERR")
    below "fedpca mean vs the pooled column means" "$v" 1e-14
    check_verify "fedpca" "$R"
    PCA_SV=$(vfield "$R" sv_error)
    PCA_PROJ=$(vfield "$R" shared_projection_distance)
    PCA_REC=$(vfield "$R" reconstruction_error)
    clean_stop "$R" "fedpca"
else
    fail "fedpca: exit $RC"
fi

R="$T/r-pcas"
run local --algorithm fedpca --standardize --k 8 "${SP[@]}" --out "$R" --verify
if [ "$RC" -eq 0 ] && [ -s "$R/scale.npy" ]; then
    ok "fedpca --standardize --k 8: exit 0 (three aggregations), scale.npy"
    check_verify "fedpca --standardize --k 8" "$R" 1
    below "standardized top-8: reconstruction equals the reference's truncation error" \
        "$(awk -v a="$(vfield "$R" reconstruction_error)" -v b="$(vfield "$R" reference_reconstruction_error)" \
            'BEGIN { d = a - b; if (d < 0) d = -d; print d }')" 1e-12
else
    fail "fedpca --standardize: exit $RC"
fi

echo "== features partition (3 parties x 200 x 30 columns)"
R="$T/r-feat"
run local --algorithm fedsvd --partition features "${FP[@]}" --out "$R" --verify
if [ "$RC" -eq 0 ] && [ -s "$R/U.npy" ] && [ -s "$R/party-1/V.npy" ] && [ ! -e "$R/V.npy" ]; then
    ok "fedsvd features: exit 0; U.npy shared, party-<i>/V.npy private"
    compare_sv "features S" "$R/S.npy" "$T/ref-f/S.npy"
    compare_sub "features U" "$R/U.npy" "$T/ref-f/U.npy"
    check_verify "fedsvd features" "$R"
    FEAT_SV=$(vfield "$R" sv_error)
    FEAT_PROJ=$(vfield "$R" shared_projection_distance)
    FEAT_REC=$(vfield "$R" reconstruction_error)
else
    fail "fedsvd features: exit $RC"
fi
R="$T/r-featpca"
run local --algorithm fedpca --partition features "${FP[@]}" --out "$R" --verify
if [ "$RC" -eq 0 ] && [ -s "$R/scores.npy" ] && [ -s "$R/party-2/components.npy" ] &&
    [ -s "$R/party-2/mean.npy" ]; then
    ok "fedpca features: exit 0; scores.npy shared, party-<i>/components.npy and mean.npy"
    check_verify "fedpca features" "$R"
else
    fail "fedpca features: exit $RC"
fi

echo "== a dropped party (party 2 stops before its masked input)"
R="$T/r-drop"
run local --algorithm fedsvd "${SP[@]}" --out "$R" --round-timeout 2 --fail-party 2:masked_input
if [ "$RC" -eq 1 ] && grep -q 'allow_dropouts' "$ERR" && [ ! -e "$R/S.npy" ] &&
    grep -q '"state": "failed"' "$R/summary.json"; then
    ok "without allow_dropouts: exit 1, the job fails cleanly: $(grep -o 'party 2 did not[^;]*' "$ERR" | head -n 1)"
else
    fail "dropped party without allow_dropouts: exit $RC"
fi
R="$T/r-drop-above"
run local --algorithm fedsvd "${SP[@]}" --out "$R" --round-timeout 2 --fail-party 2:masked_input \
    --allow-dropouts --threshold 2 --verify
if [ "$RC" -eq 0 ] && [ ! -e "$R/party-2/U.npy" ] && [ -s "$R/party-3/U.npy" ]; then
    ok "above the threshold (2 of 3) with --allow-dropouts: exit 0, parties 1 and 3 get results"
    compare_sv "survivors' S" "$R/S.npy" "$T/ref-13/S.npy"
    compare_sub "survivors' V" "$R/V.npy" "$T/ref-13/V.npy"
    check_verify "survivors (1, 3)" "$R"
else
    fail "dropped party above threshold: exit $RC"
fi
R="$T/r-drop-below"
run local --algorithm fedsvd "${SP[@]}" --out "$R" --round-timeout 2 --fail-party 2:masked_input \
    --allow-dropouts --threshold 3
if [ "$RC" -eq 1 ] && grep -q 'threshold 3' "$ERR" && [ ! -e "$R/S.npy" ]; then
    ok "below the threshold (2 of 3, t = 3): exit 1, secure aggregation aborts: $(grep -o '[0-9] masked inputs[^"]*' "$ERR" | head -n 1)"
else
    fail "dropped party below threshold: exit $RC"
fi
R="$T/r-drop-pca"
run local --algorithm fedpca "${SP[@]}" --out "$R" --round-timeout 2 --fail-party 3:masked_input \
    --allow-dropouts --threshold 2 --verify
if [ "$RC" -eq 0 ] && [ ! -e "$R/party-3/scores.npy" ]; then
    ok "fedpca, party 3 drops in the mean round, --allow-dropouts: exit 0 (the survivors' exact PCA)"
    check_verify "fedpca survivors (1, 2)" "$R"
else
    fail "fedpca dropout above threshold: exit $RC"
fi
no_leftovers "dropouts"

echo "== moderate size: fedpca, 4 parties x 3000 x 300, top 20"
M="$T/mod"
"$F" gen planted --rows 12000 --cols 300 --rank 20 --noise 0.5 --seed 11 --out-dir "$M" --parties 4 \
    >/dev/null 2>"$ERR" || fail "gen moderate"
R="$T/r-mod"
run local --algorithm fedpca --k 20 --party "$M/party-1.npy" --party "$M/party-2.npy" \
    --party "$M/party-3.npy" --party "$M/party-4.npy" --block-size 1000 --out "$R" --verify
if [ "$RC" -eq 0 ]; then
    ok "moderate fedpca: exit 0 in ${SECS}s"
    MOD_SECS=$SECS
    check_verify "moderate fedpca" "$R" 1
    below "moderate: reconstruction equals the reference's truncation error" \
        "$(awk -v a="$(vfield "$R" reconstruction_error)" -v b="$(vfield "$R" reference_reconstruction_error)" \
            'BEGIN { d = a - b; if (d < 0) d = -d; print d }')" 1e-12
    MOD_SV=$(vfield "$R" sv_error)
    MOD_PROJ=$(vfield "$R" shared_projection_distance)
else
    fail "moderate fedpca: exit $RC"
fi

echo "== usage and input errors"
usage() { # NAME ARGS...: exit 2 with one line on stderr
    local name=$1
    shift
    run "$@"
    if [ "$RC" -eq 2 ] && [ "$(wc -l <"$ERR")" -eq 1 ]; then
        ok "$name: exit 2: $(cat "$ERR")"
    else
        fail "$name: exit $RC, expected 2 with one line"
    fi
}
usage "--standardize with fedsvd" local --algorithm fedsvd --standardize "${SP[@]}" --out "$T/u"
usage "--partition bogus" local --algorithm fedsvd --partition rows "${SP[@]}" --out "$T/u"
usage "--k with secure-sum" local --algorithm secure-sum --k 3 "${SP[@]}" --out "$T/u"
usage "--method randomized without --k" local --algorithm fedsvd --method randomized "${SP[@]}" --out "$T/u"
usage "--verify with secure-sum" local --algorithm secure-sum --verify "${SP[@]}" --out "$T/u"
usage "--input without --parties" local --algorithm fedsvd --input "$D/full.npy" --out "$T/u"
run local --algorithm fedsvd --party "$D/s/party-1.npy" --party "$D/f-1.npy" --out "$T/u"
if [ "$RC" -eq 1 ] && grep -q 'columns' "$ERR"; then
    ok "samples parties with different column counts: exit 1: $(cat "$ERR")"
else
    fail "mismatched parties: exit $RC"
fi
run local --algorithm fedsvd --input "$D/full.npy" --parties 3 --out "$T/r-split" --verify
if [ "$RC" -eq 0 ] && [ -s "$T/r-split/party-3/U.npy" ]; then
    ok "--input FILE --parties 3 splits the rows into three parties"
    check_verify "split input" "$T/r-split"
else
    fail "--input --parties: exit $RC"
fi
no_leftovers "fedsvd"

echo "== figures"
echo "   fedsvd 3x200x50 (${SVD_SECS:-?}s): sv ${SVD_SV:-?}, projection ${SVD_PROJ:-?}, reconstruction ${SVD_REC:-?}"
echo "   fedpca 3x200x50 (${PCA_SECS:-?}s): sv ${PCA_SV:-?}, projection ${PCA_PROJ:-?}, reconstruction ${PCA_REC:-?}"
echo "   fedsvd features 200x3x30: sv ${FEAT_SV:-?}, projection ${FEAT_PROJ:-?}, reconstruction ${FEAT_REC:-?}"
echo "   fedpca 4x3000x300 top-20 (${MOD_SECS:-?}s): sv ${MOD_SV:-?}, projection ${MOD_PROJ:-?}"
finish
