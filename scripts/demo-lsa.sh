#!/usr/bin/env bash
# make demo-lsa: federated latent semantic analysis of Debian's fortunes
# (package "fortunes": all its categories, about 15,000 quotations), split
# into three parties by category (scripts/fortunes-split.sh: each category
# whole to one party, about a third of the quotations each). `fedsvd lsa`
# runs the real services on
# loopback: a secure sum of the document frequencies, then an exact top-5
# fedsvd of the parties' TF-IDF rows under keyed feature hashing. It prints
# each component's top terms as each party resolves them through its own
# words, the agreement with the pooled computation (--verify), the bytes
# each party sent and received, and draws the documents in the first two
# components coloured by category (lsa.svg; the 19 largest categories have
# a colour each, the others share one).
#
# Usage: scripts/demo-lsa.sh [BIN_DIR] [OUT_DIR]   (defaults build/bin, demo-lsa)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/bin}
out=${2:-demo-lsa}
F="$bin/fedsvd"
t0=$(date +%s.%N)
mkdir -p "$out"
"$here/fortunes-split.sh" "$out/corpus"
"$F" lsa --lines \
    --party "$out/corpus/party-1.txt" --party "$out/corpus/party-2.txt" \
    --party "$out/corpus/party-3.txt" \
    --k 5 --hash-features 1024 --stop-words "$here/stopwords-en.txt" --min-length 3 \
    --min-df 10 --max-df 0.5 --top 8 --verify --out "$out/result"
# Each party's labels, for the rows it kept (documents.txt names the line
# each row came from: a quotation left without a word is skipped).
labels=""
for i in 1 2 3; do
    awk -F: 'NR == FNR { lab[NR] = $0; next } { print lab[$NF] }' \
        "$out/corpus/party-$i.labels" "$out/result/party-$i/documents.txt" \
        >"$out/result/party-$i/labels.csv"
    labels="${labels:+$labels,}$out/result/party-$i/labels.csv"
done
"$F" plot scatter \
    --input "$out/result/party-1/U.npy,$out/result/party-2/U.npy,$out/result/party-3/U.npy" \
    --scale "$out/result/S.npy" --labels "$labels" --class-names "$(cat "$out/corpus/classes")" \
    --title "Fortunes: LSA over three parties (documents in components 1 and 2)" \
    --xlabel "component 1" --ylabel "component 2" --out "$out/lsa.svg"
echo "figure: $out/lsa.svg; results: $out/result/; demo-lsa took $(awk -v a="$t0" \
    -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
