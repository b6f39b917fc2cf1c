#!/usr/bin/env bash
# fedsvd lsa: federated latent semantic analysis with real processes on
# 127.0.0.1 (a masking-server, an aggregation-server, one client-agent per
# party; a secure sum of the document frequencies, then an exact top-k
# fedsvd), on a small corpus of three parties.
#
# Checked against the pooled computation (--verify, and `fedsvd lsa
# --central` with the run's key compared by `fedsvd compare`): singular
# values within 1e-12 (relative), projection distances of the term vectors
# and of the document vectors within 1e-10, each party's document vectors
# within 1e-12 once signs are aligned; a public vocabulary instead of
# hashing; top terms only from a party's own words; invalid UTF-8 (an error
# naming the file, or skipped and counted with --skip-invalid) and empty
# documents (skipped and counted); the hashing key in no service's data
# directory, log or (with strace) anything any service read; usage errors;
# no process or temporary directory left behind. Then the across-sites
# path (sites.sh): `fedsvd job create --algorithm lsa`, `fedsvd join` and the
# sites' `fedsvd lsa count|df|rows|terms` against `fedsvd lsa --central`.
#
# Usage: tests/lsa/run.sh BIN_DIR (default build/bin)
# Ends with "lsa: P passed, F failed".
set -u

BIN=${1:-build/bin}
F="$BIN/fedsvd"
passed=0
failed=0

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
    echo "lsa: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

for b in fedsvd aggregation-server client-agent masking-server; do
    [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
done
[ "$failed" -eq 0 ] || finish

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
OUT="$T/stdout"
ERR="$T/stderr"
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"

run() {
    "$F" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# below NAME VALUE TOL: VALUE is a number <= TOL
below() {
    if [ -n "$2" ] && awk -v v="$2" -v t="$3" 'BEGIN { exit !(v + 0 == v && v <= t) }'; then
        ok "$1: $2 <= $3"
    else
        fail "$1: '$2' not <= $3"
    fi
}

# jnum KEY FILE: every number after "KEY": in a JSON text, one a line
jnum() {
    grep -o "\"$1\": *[-+0-9.eE]*" "$2" | sed 's/.*: *//'
}

# ---- the corpus: three parties, one of them one document per line ----
C="$T/corpus"
mkdir -p "$C/p1" "$C/p2"
n=0
for t in "The cat sat on the mat with another cat" "Dogs and cats are pets; the dog barks" \
    "A kitten is a young cat, the cat purrs" "Cats chase mice and the mouse runs away" \
    "Pets need food and water daily, dogs more than cats" "The dog chased the cat up the tree" \
    "Mice fear cats and owls" "A puppy is a young dog"; do
    n=$((n + 1))
    printf '%s\n' "$t" >"$C/p1/doc$n.txt"
done
n=0
for t in "Stock markets fell as investors sold shares" "The bank raised interest rates again" \
    "Bonds and stocks: investors fear inflation" "Interest rates and inflation worry the central bank" \
    "Shares of the bank rose after the rate decision" "Investors bought bonds as stocks fell" \
    "Inflation erodes savings held at the bank"; do
    n=$((n + 1))
    printf '%s\n' "$t" >"$C/p2/doc$n.txt"
done
mkdir -p "$C/p3"
n=0
for t in "The team won the football match" "Football fans cheered the winning goal" \
    "A late goal decided the match" "Über das Café: naïve Straße, ÉCOLE résumé" \
    "The match was played in the rain by the team" "Fans of the team sang after the goal" \
    "The referee stopped the match in the rain"; do
    n=$((n + 1))
    printf '%s\n' "$t" >"$C/p3/doc$n.txt"
done
PARTIES=(--party "$C/p1" --party "$C/p2" --party "$C/p3")

# ---- hashing, against the pooled computation ----
R="$T/fed"
run lsa "${PARTIES[@]}" --k 3 --hash-features 64 --verify --out "$R" --format json
if [ "$RC" -eq 0 ] && [ -s "$R/summary.json" ]; then
    ok "lsa --verify: 3 parties, 22 documents, 64 buckets"
    S="$R/summary.json"
    below "singular values (relative to s_1)" "$(jnum sv_error "$S")" 1e-12
    below "singular values (each relative to itself)" "$(jnum sv_max_relative_error "$S")" 1e-12
    below "term vectors: projection distance" "$(jnum term_projection_distance "$S")" 1e-10
    below "document vectors: projection distance" "$(jnum document_projection_distance "$S")" 1e-10
    i=0
    for v in $(jnum max_abs_error_sign_aligned "$S"); do
        i=$((i + 1))
        below "party $i's document vectors, sign-aligned" "$v" 1e-12
    done
    [ "$i" -eq 3 ] && ok "three parties verified" || fail "verified $i parties, not 3"
    below "secure-sum document frequencies equal the pooled counts" \
        "$(jnum df_max_abs_difference "$S")" 0
    [ "$(jnum documents "$S" | head -n 1)" = "22" ] && ok "N = 22 documents" ||
        fail "documents: $(jnum documents "$S" | head -n 1)"
else
    fail "lsa --verify (exit $RC)"
fi
for f in S.npy V.npy term_vectors.npy df.npy party-1/U.npy party-3/U.npy party-2/top_terms.txt \
    party-2/documents.txt; do
    [ -s "$R/$f" ] || fail "no $R/$f"
done
[ "$(stat -c %a "$R/party-1/hash.key" 2>/dev/null)" = "600" ] && ok "party-1/hash.key is 0600" ||
    fail "party-1/hash.key missing or not 0600"

# top terms: each party lists only words of its own documents
bad=""
for i in 1 2 3; do
    own=$(cat "$C/p$i"/* | tr 'A-Z' 'a-z')
    for w in $(cut -f3 "$R/party-$i/top_terms.txt" | tr ' ' '\n' | grep -v '^-$'); do
        grep -qi -- "$w" <<<"$own" || bad="$bad party-$i:$w"
    done
done
[ -z "$bad" ] && ok "top terms come from each party's own words" || fail "foreign top terms:$bad"

# --central with the run's key: the same result through fedsvd compare
run lsa --central --key-file "$R/party-1/hash.key" "${PARTIES[@]}" --k 3 --hash-features 64 \
    --out "$T/ref"
if [ "$RC" -eq 0 ]; then
    ok "lsa --central"
    below "compare S.npy --metric sv" \
        "$("$F" compare --a "$R/S.npy" --b "$T/ref/S.npy" --metric sv)" 1e-12
    below "compare term_vectors.npy --metric subspace" \
        "$("$F" compare --a "$R/term_vectors.npy" --b "$T/ref/term_vectors.npy" --metric subspace)" 1e-10
    cmp -s "$R/df.npy" "$T/ref/df.npy" && ok "df.npy identical to the pooled counts" ||
        fail "df.npy differs from the pooled counts"
else
    fail "lsa --central (exit $RC)"
fi
# another key: other buckets (the key matters)
head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >"$T/other.key"
run lsa --central --key-file "$T/other.key" "${PARTIES[@]}" --k 3 --hash-features 64 --out "$T/ref2"
if [ "$RC" -eq 0 ] && ! cmp -s "$T/ref/df.npy" "$T/ref2/df.npy"; then
    ok "another key gives other buckets"
else
    fail "another key: exit $RC, or the same buckets"
fi

# ---- a public vocabulary; one document per line (--lines) ----
printf '%s\n' cat cats dog dogs bank investors inflation match goal team rain bonds \
    >"$T/vocab.txt"
# (no two of the top three singular values tie: the top-2 subspace is unique)
printf '%s\n' "The cat and the dog and the cat" "Cats, dogs and a cat" "Nothing here matches" \
    "A dog and two dogs" >"$T/l1.txt"
printf '%s\n' "The bank and inflation" "Investors buy bonds" "Bank bank bonds, inflation" >"$T/l2.txt"
printf '%s\n' "The team scored a goal and another goal" "" "Rain stopped the match" \
    "Goal for the team in the rain" >"$T/l3.txt"
run lsa --lines --party "$T/l1.txt" --party "$T/l2.txt" --party "$T/l3.txt" --k 2 \
    --vocabulary "$T/vocab.txt" --verify --out "$T/voc" --format json
if [ "$RC" -eq 0 ]; then
    ok "lsa --vocabulary --lines"
    below "vocabulary: singular values" "$(jnum sv_error "$T/voc/summary.json")" 1e-12
    below "vocabulary: term vectors" "$(jnum term_projection_distance "$T/voc/summary.json")" 1e-10
    [ -s "$T/voc/top_terms.txt" ] && [ ! -e "$T/voc/party-1/hash.key" ] &&
        ok "vocabulary: one top_terms.txt, no key" || fail "vocabulary: top_terms.txt / hash.key"
    # l3's empty line: skipped and counted, rows name their lines
    [ "$(jnum skipped_empty "$T/voc/summary.json" | sed -n 3p)" = "1" ] &&
        ok "an empty line is skipped and counted" || fail "skipped_empty of party 3"
    [ "$(sed -n 2p "$T/voc/party-3/documents.txt")" = "$T/l3.txt:3" ] &&
        ok "documents.txt names each row's line" || fail "party-3/documents.txt: $(cat "$T/voc/party-3/documents.txt")"
    # "Nothing here matches" has no vocabulary word: a zero row, counted
    [ "$(jnum zero_rows "$T/voc/summary.json" | head -n 1)" = "1" ] &&
        ok "a document without a vocabulary word is a zero row, counted" || fail "zero_rows"
else
    fail "lsa --vocabulary (exit $RC)"
fi

# ---- bad and empty documents ----
mkdir -p "$C/bad"
cp "$C/p1"/doc1.txt "$C/p1"/doc2.txt "$C/bad/"
printf 'caf\xe9 au lait\n' >"$C/bad/latin1.txt"
printf '1234 -- !!\n' >"$C/bad/empty.txt"
run lsa --central --party "$C/bad" --party "$C/p2" --k 2 --hash-features 32 --out "$T/bad"
if [ "$RC" -eq 1 ] && grep -q "latin1.txt" "$ERR" && grep -q "not UTF-8 at byte 3" "$ERR"; then
    ok "invalid UTF-8: exit 1 naming the file and byte"
else
    fail "invalid UTF-8: exit $RC, $(cat "$ERR")"
fi
run lsa --central --skip-invalid --party "$C/bad" --party "$C/p2" --k 2 --hash-features 32 \
    --out "$T/bad" --format json
if [ "$RC" -eq 0 ] && [ "$(jnum skipped_invalid "$OUT" | head -n 1)" = "1" ] &&
    [ "$(jnum skipped_empty "$OUT" | head -n 1)" = "1" ] &&
    [ "$(wc -l <"$T/bad/party-1/documents.txt")" = "2" ]; then
    ok "--skip-invalid: skipped and counted (1 invalid, 1 empty, 2 documents)"
else
    fail "--skip-invalid: exit $RC"
fi
mkdir -p "$C/none"
printf '\n' >"$C/none/a.txt"
run lsa --central --party "$C/none" --party "$C/p2" --k 2 --out "$T/none"
[ "$RC" -eq 1 ] && grep -q "no document with a token" "$ERR" &&
    ok "a party without a document: exit 1" || fail "a party without a document: exit $RC"

# ---- the key is not visible to the servers ----
run lsa "${PARTIES[@]}" --k 2 --hash-features 64 --keep --out "$T/keep"
ROOT=$(sed -n 's/.*kept \(.*\) (data dirs.*/\1/p' "$ERR" | tail -n 1)
KEY=$(tr -d '\n' <"$T/keep/party-1/hash.key" 2>/dev/null)
if [ "$RC" -eq 0 ] && [ -d "$ROOT" ] && [ ${#KEY} -eq 64 ]; then
    # as text (hex) and as raw bytes (the hex of each file's bytes)
    hits=""
    while IFS= read -r -d '' f; do
        if grep -qiF "$KEY" "$f" || od -An -tx1 -v "$f" | tr -d ' \n' | grep -qiF "$KEY"; then
            hits="$hits $f"
        fi
    done < <(find "$ROOT" "$T/keep/logs" -type f -print0)
    nfiles=$(find "$ROOT/aggregation-server" "$ROOT/masking-server" -type f | wc -l)
    if [ -z "$hits" ] && [ "$nfiles" -gt 0 ]; then
        ok "the key is in no service's data directory or log ($nfiles server files searched)"
    else
        fail "the key found in:$hits (server files: $nfiles)"
    fi
    # the search finds the key where it is
    od -An -tx1 -v "$T/keep/party-1/hash.key" >/dev/null
    grep -qiF "$KEY" "$T/keep/party-1/hash.key" && ok "(control) the search finds the key in hash.key" ||
        fail "(control) the search does not find the key"
    rm -rf "$ROOT"
else
    fail "lsa --keep: exit $RC, root '$ROOT'"
fi
if command -v strace >/dev/null 2>&1 && strace -f -qq -e trace=none true 2>/dev/null; then
    # Everything every process read: the services never read the key. The
    # key is given by --key-file, so this fedsvd reads it: the control.
    head -c 32 /dev/urandom | od -An -tx1 -v | tr -d ' \n' >"$T/st.key"
    KEY=$(cat "$T/st.key")
    # strace -xx writes every byte read as \xNN: the key's text and its raw bytes
    KEYTXT=$(printf '%s' "$KEY" | od -An -tx1 -v | tr -d ' \n' | sed 's/../\\x&/g')
    KEYRAW=$(printf '%s' "$KEY" | sed 's/../\\x&/g')
    strace -f -ff -qq -s 1048576 -xx -e trace=read,recvfrom,recvmsg,readv,pread64 \
        -o "$T/trace" "$F" lsa "${PARTIES[@]}" --k 2 --hash-features 64 --key-file "$T/st.key" \
        --out "$T/st" >"$OUT" 2>"$ERR"
    RC=$?
    ntrace=$(ls "$T"/trace.* 2>/dev/null | wc -l)
    readers=$(grep -l -F -e "$KEYTXT" -e "$KEYRAW" "$T"/trace.* 2>/dev/null | wc -l)
    # fedsvd itself reads st.key (the control: the search works); no service
    # process or thread reads the key in any form
    if [ "$RC" -eq 0 ] && [ "$ntrace" -gt 5 ] && [ "$readers" -eq 1 ] &&
        grep -q -F -e "$KEYTXT" "$T/trace.$(ls "$T"/trace.* | sed 's/.*trace\.//' | sort -n | head -n 1)"; then
        ok "strace: only fedsvd read the key ($ntrace processes and threads traced)"
    else
        fail "strace: exit $RC; $readers of $ntrace traced processes read the key"
    fi
    rm -f "$T"/trace.*
else
    echo "skip strace: not available or not permitted (the data-directory check above still ran)"
fi

# ---- usage errors ----
run lsa "${PARTIES[@]}" --out "$T/u"
[ "$RC" -eq 2 ] && ok "no --k: usage error" || fail "no --k: exit $RC"
run lsa "${PARTIES[@]}" --k 2 --out "$T/u" --vocabulary "$T/vocab.txt" --hash-features 8
[ "$RC" -eq 2 ] && ok "--vocabulary with --hash-features: usage error" || fail "exit $RC"
run lsa --central "${PARTIES[@]}" --k 2 --out "$T/u" --verify
[ "$RC" -eq 2 ] && ok "--central with --verify: usage error" || fail "exit $RC"
run lsa "${PARTIES[@]}" --k 50 --hash-features 16 --out "$T/u"
[ "$RC" -eq 1 ] && grep -q "more than the" "$ERR" && ok "--k above the features: exit 1" ||
    fail "--k 50 of 16 features: exit $RC"
printf 'zz\n' >"$T/bad.key"
run lsa --central "${PARTIES[@]}" --k 2 --key-file "$T/bad.key" --out "$T/u"
[ "$RC" -eq 1 ] && grep -q "64 hex digits" "$ERR" && ok "a bad key file: exit 1" || fail "bad key: exit $RC"
run lsa --help
[ "$RC" -eq 0 ] && grep -q "Usage: fedsvd lsa" "$OUT" && ok "--help" || fail "--help: exit $RC"

# ---- across sites: the coordinator's and the sites' commands (sites.sh) ----
"$(dirname "$0")/sites.sh" "$BIN" >"$T/sites.log" 2>&1
sed 's/^/  sites: /' "$T/sites.log" | grep -v "passed, .* failed$"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$T/sites.log" | tail -n 1)
if [ -n "$line" ]; then
    passed=$((passed + ${line%% passed*}))
    f=${line#*passed, }
    failed=$((failed + ${f%% failed}))
else
    fail "sites.sh ended without a result line"
fi

# ---- nothing left behind ----
left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 | wc -l)
[ "$left" -eq 0 ] && ok "no temporary directory left" || fail "$left entries left in TMPDIR"
if pgrep -f "$T" >/dev/null 2>&1; then
    fail "a process of this suite is still running"
else
    ok "no process left"
fi
finish
