#!/usr/bin/env bash
# fedsvd lsa across sites, with real processes on 127.0.0.1 and the commands
# as a coordinator and three partner sites run them: an aggregation-server, a
# masking-server and three client-agents; the coordinator pins the agents'
# identities and creates the lsa job (`fedsvd job create --algorithm lsa`:
# a secure-sum job and a fedsvd job, one invitation file per site); each site
# counts its documents (`fedsvd lsa count`), writes its document frequencies
# (`fedsvd lsa df`), joins the sum (`fedsvd join --wait`), fetches it
# (`fedsvd participation result`), writes its TF-IDF rows (`fedsvd lsa
# rows`), joins the fedsvd job, fetches its result and resolves its top
# terms (`fedsvd lsa terms`), all three sites at once.
#
# Checked against `fedsvd lsa --central` on the pooled documents with the
# job's key: singular values within 1e-12 (relative), the term vectors'
# projection distance within 1e-10, each site's document vectors within
# 1e-12 of the largest entry, the same aggregate document frequencies; the
# min-df pruning really dropped features; a document without a token is
# skipped; top terms only from a site's own words; the hashing key (as text
# and as bytes) and the sites' words in nothing the aggregation server or
# the masking server holds (data directories, logs, the jobs' documents);
# refusals (a site whose document count differs from the job's, a plain
# invitation, a sum of the wrong size, missing options).
#
# Usage: tests/lsa/sites.sh BIN_DIR (default build/bin)
# Ends with "N passed, N failed".
set -u
BIN=${1:-build/bin}
. "$(dirname "$0")/../lib/services.sh"
svc_need client-agent aggregation-server masking-server fedsvd
SVC_OK="ok  "
jget() { node "$JLIB" get "$@"; }
F=$BIN/fedsvd
below() { awk -v v="$1" -v b="$2" 'BEGIN { exit !(v != "" && v + 0 == v && v + 0 <= b + 0) }'; }

# ---- the corpus: three sites; site 2 has a document without a token ----
C="$T/corpus"
mkdir -p "$C/p1" "$C/p2" "$C/p3"
n=0
for t in "The cat sat on the mat with another cat" "Dogs and cats are pets; the dog barks" \
    "A kitten is a young cat, the cat purrs" "Cats chase mice and the mouse runs away" \
    "Pets need food and water daily, dogs more than cats" "The dog chased the cat up the tree" \
    "Mice fear cats and owls" "A puppy is a young dog"; do
    n=$((n + 1)); printf '%s\n' "$t" >"$C/p1/doc$n.txt"
done
n=0
for t in "Stock markets fell as investors sold shares" "The bank raised interest rates again" \
    "Bonds and stocks: investors fear inflation" "1234 -- 5678 !!" \
    "Interest rates and inflation worry the central bank" \
    "Shares of the bank rose after the rate decision" "Investors bought bonds as stocks fell" \
    "Inflation erodes savings held at the bank"; do
    n=$((n + 1)); printf '%s\n' "$t" >"$C/p2/doc$n.txt"
done
n=0
for t in "The team won the football match" "Football fans cheered the winning goal" \
    "A late goal decided the match" "Über das Café: naïve Straße, ÉCOLE résumé" \
    "The match was played in the rain by the team" "Fans of the team sang after the goal" \
    "The referee stopped the match in the rain"; do
    n=$((n + 1)); printf '%s\n' "$t" >"$C/p3/doc$n.txt"
done
printf '%s\n' the a and of in on is as at by "#" "# a comment" >"$T/stop.txt"

# ---- the services ----
svc_server
svc_masking
svc_agents 3 --poll-ms 50
OPT=(--token-file "$T/op.token")

# ---- each site: its document count and fingerprint go to the coordinator ----
SIZES=""
for i in 1 2 3; do
    SIZES="${SIZES:+$SIZES,}$("$F" lsa count --party "$C/p$i")"
done
svc_party_keys 3
check "lsa count: every file is a document (8,8,7; one of site 2's without a token)" [ "$SIZES" = 8,8,7 ]

# ---- the coordinator ----
"$F" job create --algorithm lsa --server "$SURL" --admin-token-file "$T/admin.token" \
    --masking-server "$MURL" --masking-token-file "$T/madmin.token" "${PKEYS[@]}" \
    --party-sizes "$SIZES" --k 3 --hash-features 64 --min-df 2 --max-df 0.9 \
    --stop-words "$T/stop.txt" --min-length 2 --name fortunes-test --out-dir "$T/inv" \
    --format json >"$T/created.json" 2>"$T/created.err"
rc=$?
check "job create --algorithm lsa: exit 0" [ $rc = 0 ]
DFJOB=$(jget "$T/created.json" .document_frequencies.id)
SVDJOB=$(jget "$T/created.json" .fedsvd.id)
check "  ... a secure-sum job 1 x 65 and a fedsvd job 23 x 64 (k 3)" \
    [ "$(jget "$T/created.json" .document_frequencies.algorithm)" = secure-sum -a \
    "$(jget "$T/created.json" .fedsvd.algorithm)" = fedsvd -a \
    "$(jget "$T/created.json" .document_frequencies.shape)" = "[1,65]" -a \
    "$(jget "$T/created.json" .document_frequencies.threshold)" = 3 -a \
    "$(jget "$T/created.json" .fedsvd.shape)" = "[23,64]" ]
check "  ... three invitation files, mode 0600" \
    bash -c '[ "$(stat -c %a "$1"/invitation-{1,2,3}.json | sort -u)" = 600 ]' _ "$T/inv"
KEY=$(jget "$T/inv/invitation-1.json" .settings.key)
check "  ... the hashing key (64 hex digits) in every file, the same" \
    bash -c '[[ "$1" =~ ^[0-9a-f]{64}$ ]] && [ "$1" = "$(node "$2" get "$3" .settings.key)" ]' \
    _ "$KEY" "$JLIB" "$T/inv/invitation-3.json"
printf '%s\n' "$KEY" >"$T/job.key"

# ---- the three sites at once ----
site() { # I: every step of site I; stops at the first failure
    local i=$1 w="$T/site$i" inv="$T/inv/invitation-$i.json"
    mkdir -p "$w"
    "$F" lsa df --invitation "$inv" --party "$C/p$i" --out "$w" >"$w/df.out" &&
        "$F" join --agent "${AURL[$i]}" "${OPT[@]}" --invitation "$w/df-invitation.json" \
            --data "$w/df.npy" --wait --interval 0.1 >"$w/df.id" &&
        "$F" participation result --agent "${AURL[$i]}" "${OPT[@]}" "$(head -n 1 "$w/df.id")" \
            --out "$w/sum" >/dev/null &&
        "$F" lsa rows --invitation "$inv" --party "$C/p$i" --sum "$w/sum/sum.npy" --out "$w" \
            --format json >"$w/rows.json" &&
        "$F" join --agent "${AURL[$i]}" "${OPT[@]}" --invitation "$w/fedsvd-invitation.json" \
            --data "$w/tfidf.npy" --wait --interval 0.1 >"$w/svd.id" &&
        "$F" participation result --agent "${AURL[$i]}" "${OPT[@]}" "$(head -n 1 "$w/svd.id")" \
            --out "$w/svd" >/dev/null &&
        "$F" lsa terms --invitation "$inv" --party "$C/p$i" --sum "$w/sum/sum.npy" \
            --result "$w/svd" --out "$w/lsa" >"$w/terms.out"
}
t0=$(date +%s.%N)
for i in 1 2 3; do
    site "$i" 2>"$T/site$i.err" &
    SP[$i]=$!
done
for i in 1 2 3; do
    wait "${SP[$i]}"
    rc=$?
    check "site $i: lsa df, join, participation result, lsa rows, join, participation result, lsa terms" [ $rc = 0 ]
    [ $rc = 0 ] || sed 's/^/     /' "$T/site$i.err" | tail -n 5
done
echo "     (the sites' part took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
check "site 1's df step names the next command" grep -q "next: fedsvd join --invitation" "$T/site1/df.out"
KEPT=$(jget "$T/site2/rows.json" .kept_features)
check "min-df 2 drops features by the aggregate counts ($KEPT of 64 kept)" \
    bash -c '[ -n "$1" ] && [ "$1" -gt 3 ] && [ "$1" -lt 64 ]' _ "$KEPT"
check "site 2: 23 rows of 64 columns, a zero row for its document without a token" \
    [ "$(jget "$T/site2/rows.json" .rows)" = 8 -a "$(jget "$T/site2/rows.json" .documents)" = 22 ]

# ---- against the pooled computation, with the job's key ----
"$F" lsa --central --key-file "$T/job.key" --party "$C/p1" --party "$C/p2" --party "$C/p3" \
    --k 3 --hash-features 64 --min-df 2 --max-df 0.9 --stop-words "$T/stop.txt" --min-length 2 \
    --out "$T/ref" >/dev/null 2>"$T/ref.err"
check "lsa --central with the job's key: exit 0" [ $? = 0 ]
for i in 1 2 3; do
    R="$T/site$i/lsa"
    v=$("$F" compare --a "$R/S.npy" --b "$T/ref/S.npy" --metric sv)
    check "site $i: singular values vs the pooled computation ($v)" below "$v" 1e-12
    v=$("$F" compare --a "$R/term_vectors.npy" --b "$T/ref/term_vectors.npy" --metric subspace)
    check "site $i: term vectors, projection distance ($v)" below "$v" 1e-10
    v=$("$F" compare --a "$R/U.npy" --b "$T/ref/party-$i/U.npy" --metric maxrel)
    check "site $i: its document vectors ($v of the largest entry)" below "$v" 1e-12
    check "site $i: the aggregate df equal to the pooled counts" cmp -s "$R/df.npy" "$T/ref/df.npy"
    check "site $i: documents.txt as the pooled run's" cmp -s "$R/documents.txt" "$T/ref/party-$i/documents.txt"
done
v=$("$F" compare --a "$T/site1/lsa/term_vectors.npy" --b "$T/site3/lsa/term_vectors.npy" --metric fro)
check "every site has the same term vectors ($v)" below "$v" 0
bad=""
for i in 1 2 3; do
    own=$(cat "$C/p$i"/* | tr 'A-Z' 'a-z')
    for w in $(cut -f3 "$T/site$i/lsa/top_terms.txt" | tr ' ' '\n' | grep -v '^-$'); do
        grep -qi -- "$w" <<<"$own" || bad="$bad site-$i:$w"
    done
done
check "top terms come from each site's own words$bad" [ -z "$bad" ]
check "site 1's top terms name cats and dogs" grep -qE "cats?|dogs?" "$T/site1/lsa/top_terms.txt"

# ---- what the servers hold: no key, no word ----
for j in "$DFJOB" "$SVDJOB"; do
    curl -sf -H "Authorization: Bearer $(cat "$T/admin.token")" "$SURL/v1/jobs/$j" >"$T/job-$j.json"
done
curl -sf -H "Authorization: Bearer $(cat "$T/admin.token")" "$SURL/v1/jobs" >"$T/jobs.json"
SERVERSIDE=("$T/server" "$T/masking" "$T/server.log" "$T/masking.log" "$T"/job-*.json "$T/jobs.json")
nfiles=$(find "${SERVERSIDE[@]}" -type f | wc -l)
hits=""
while IFS= read -r -d '' f; do
    if grep -qiF "$KEY" "$f" || od -An -tx1 -v "$f" | tr -d ' \n' | grep -qiF "$KEY"; then
        hits="$hits $f"
    fi
done < <(find "${SERVERSIDE[@]}" -type f -print0)
check "the key in no server file, log or job document ($nfiles searched)$hits" \
    bash -c '[ ${#3} = 64 ] && [ -z "$1" ] && [ "$2" -gt 5 ]' _ "$hits" "$nfiles" "$KEY"
check "(control) the same search finds the key in the site's invitation file" \
    bash -c 'od -An -tx1 -v "$1" >/dev/null && grep -qiF "$2" "$1"' _ "$T/inv/invitation-1.json" "$KEY"
words=""
for w in investors inflation football kitten referee; do
    grep -rqiF "$w" "${SERVERSIDE[@]}" && words="$words $w"
done
check "no site's word in anything the servers hold$words" [ -z "$words" ]
check "(control) the same search finds them in the sites' documents" grep -rqiF investors "$C"

# ---- refusals ----
"$F" lsa df --invitation "$T/inv/invitation-1.json" --party "$C/p3" --out "$T/x" >/dev/null 2>"$T/e1"
check "lsa df with the wrong documents (7, not 8): exit 1, naming --party-sizes" \
    bash -c '[ "$1" = 1 ] && grep -q "party-sizes" "$2"' _ $? "$T/e1"
"$F" lsa df --invitation "$T/site1/df-invitation.json" --party "$C/p1" --out "$T/x" >/dev/null 2>"$T/e2"
check "lsa df with a plain job invitation: exit 1, not an lsa invitation" \
    bash -c '[ "$1" = 1 ] && grep -q "not an lsa invitation" "$2"' _ $? "$T/e2"
"$F" lsa rows --invitation "$T/inv/invitation-1.json" --party "$C/p1" --sum "$T/site1/lsa/S.npy" \
    --out "$T/x" >/dev/null 2>"$T/e3"
check "lsa rows with a sum of the wrong size: exit 1, naming it" \
    bash -c '[ "$1" = 1 ] && grep -q "3 values, the document-frequency job sums 65" "$2"' _ $? "$T/e3"
"$F" lsa rows --invitation "$T/inv/invitation-1.json" --party "$C/p1" --out "$T/x" >/dev/null 2>"$T/e4"
check "lsa rows without --sum: usage error (exit 2)" [ $? = 2 ]
"$F" lsa terms --invitation "$T/inv/invitation-1.json" --party "$C/p1" --sum "$T/site1/sum/sum.npy" \
    --result "$T/site3/svd" --out "$T/x" >/dev/null 2>"$T/e5"
check "lsa terms with another site's result: exit 1 (its U has other rows)" \
    bash -c '[ "$1" = 1 ] && grep -q "this site" "$2"' _ $? "$T/e5"
"$F" job create --algorithm lsa --server "$SURL" --admin-token-file "$T/admin.token" \
    --masking-server "$MURL" --masking-token-file "$T/madmin.token" "${PKEYS[@]:0:4}" \
    --party-sizes "$SIZES" --k 3 --out-dir "$T/inv2" >/dev/null 2>"$T/e6"
check "job create --algorithm lsa without a pin for every site: usage error" [ $? = 2 ]
"$F" job create --algorithm lsa --server "$SURL" --admin-token-file "$T/admin.token" \
    --masking-server "$MURL" --masking-token-file "$T/madmin.token" "${PKEYS[@]}" \
    --party-sizes "$SIZES" --k 3 --no-key --out-dir "$T/inv3" >/dev/null 2>"$T/e7"
check "job create --no-key: no key in the files" \
    bash -c '[ "$1" = 0 ] && ! grep -q "\"key\"" "$2"/invitation-1.json' _ $? "$T/inv3"
"$F" lsa df --invitation "$T/inv3/invitation-1.json" --party "$C/p1" --out "$T/x" >/dev/null 2>"$T/e8"
check "  ... and lsa df then asks for --key-file (exit 2)" \
    bash -c '[ "$1" = 2 ] && grep -q -- "--key-file" "$2"' _ $? "$T/e8"
"$F" lsa df --invitation "$T/inv3/invitation-1.json" --party "$C/p1" --key-file "$T/job.key" \
    --out "$T/x" >/dev/null 2>"$T/e9"
check "  ... which it takes: exit 0" [ $? = 0 ]
svc_summary
