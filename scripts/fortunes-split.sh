#!/usr/bin/env bash
# Split Debian's fortunes (package "fortunes": category files in
# /usr/share/games/fortunes, quotations separated by lines holding only "%")
# into three parties by category, one quotation per line, for
# `fedsvd lsa --lines`:
#   OUT/party-<i>.txt     the quotations of party i, one per line
#   OUT/party-<i>.labels  the category number (0-based) of each line
#   OUT/classes           the category names, comma-separated, in number order
# Party 1 holds computers, linux and science; party 2 love, men-women and
# songs-poems; party 3 politics, law and work.
#
# Usage: scripts/fortunes-split.sh OUT [FORTUNE_DIR]
set -eu
out=${1:?usage: fortunes-split.sh OUT [FORTUNE_DIR]}
src=${2:-/usr/share/games/fortunes}
parties=("computers linux science" "love men-women songs-poems" "politics law work")
mkdir -p "$out"
classes=""
label=0
for i in 1 2 3; do
    : >"$out/party-$i.txt"
    : >"$out/party-$i.labels"
    for cat in ${parties[$((i - 1))]}; do
        if [ ! -r "$src/$cat" ]; then
            echo "fortunes-split.sh: $src/$cat not found (apt-get install fortunes)" >&2
            exit 1
        fi
        # join each quotation's lines with spaces; a quotation is ended by "%"
        awk -v lab="$label" -v txt="$out/party-$i.txt" -v lbl="$out/party-$i.labels" '
            function emit() { if (q ~ /[^ ]/) { print q >> txt; print lab >> lbl } q = "" }
            /^%$/ { emit(); next }
            { gsub(/[\t\r]/, " "); q = (q == "" ? $0 : q " " $0) }
            END { emit() }' "$src/$cat"
        classes="${classes:+$classes,}$cat"
        label=$((label + 1))
    done
done
printf '%s\n' "$classes" >"$out/classes"
wc -l "$out"/party-*.txt | sed 's/^/fortunes-split.sh: /' >&2
