#!/usr/bin/env bash
# Split Debian's fortunes (package "fortunes": category files in
# /usr/share/games/fortunes, quotations separated by lines holding only "%")
# into three parties by category, one quotation per line, for
# `fedsvd lsa --lines`. Every category goes, whole, to one party: the
# categories, largest first, each to the party with the fewest quotations so
# far (ties: the lowest party), so the three hold about a third each.
#   OUT/party-<i>.txt     the quotations of party i, one per line
#   OUT/party-<i>.labels  the colour class (0-based) of each line: the 19
#                         largest categories have one each, the others share
#                         class 19 ("other"), as a scatter plot has 20 colours
#   OUT/classes           the colour classes' names, comma-separated
#   OUT/categories        one line per category: name, quotations, party
#
# Usage: scripts/fortunes-split.sh OUT [FORTUNE_DIR]
set -eu
out=${1:?usage: fortunes-split.sh OUT [FORTUNE_DIR]}
src=${2:-/usr/share/games/fortunes}
if [ ! -r "$src/computers" ]; then
    echo "fortunes-split.sh: $src/computers not found (apt-get install fortunes)" >&2
    exit 1
fi
mkdir -p "$out"
# the categories: regular files without an extension (not the .dat indexes,
# not the .u8 links)
cats=$(find "$src" -maxdepth 1 -type f ! -name '*.*' -printf '%f\n' | LC_ALL=C sort)
# quotations per category, largest first
# shellcheck disable=SC2086
awk 'FNR == 1 { if (q) n[name]++; q = 0; name = FILENAME; sub(/.*\//, "", name) }
     /^%$/ { if (q) n[name]++; q = 0; next }
     /[^ \t\r]/ { q = 1 }
     END { if (q) n[name]++; for (c in n) print n[c], c }' $(printf "$src/%s " $cats) |
    LC_ALL=C sort -k1,1nr -k2,2 >"$out/sizes"
awk -v max=19 '
    { size[NR] = $1; name[NR] = $2 }
    END {
        for (p = 1; p <= 3; p++) tot[p] = 0
        for (i = 1; i <= NR; i++) {
            best = 1
            for (p = 2; p <= 3; p++) if (tot[p] < tot[best]) best = p
            tot[best] += size[i]
            cls = i <= max ? i - 1 : max
            print name[i], size[i], best, cls
        }
    }' "$out/sizes" >"$out/categories"
rm -f "$out/sizes"
classes=$(awk -v max=19 'NR <= max { printf "%s%s", (NR > 1 ? "," : ""), $1 } END { if (NR > max) printf ",other (%d categories)", NR - max }' "$out/categories")
for i in 1 2 3; do
    : >"$out/party-$i.txt"
    : >"$out/party-$i.labels"
    while read -r cat n party cls; do
        [ "$party" = "$i" ] || continue
        # join each quotation's lines with spaces; a quotation is ended by "%"
        awk -v lab="$cls" -v txt="$out/party-$i.txt" -v lbl="$out/party-$i.labels" '
            function emit() { if (q ~ /[^ ]/) { print q >> txt; print lab >> lbl } q = "" }
            /^%$/ { emit(); next }
            { gsub(/[\t\r]/, " "); q = (q == "" ? $0 : q " " $0) }
            END { emit() }' "$src/$cat"
    done <"$out/categories"
done
printf '%s\n' "$classes" >"$out/classes"
for i in 1 2 3; do
    printf 'fortunes-split.sh: party %d: %s quotations, %s categories (%s)\n' "$i" \
        "$(wc -l <"$out/party-$i.txt")" "$(awk -v p="$i" '$3 == p' "$out/categories" | wc -l)" \
        "$(awk -v p="$i" '$3 == p { printf "%s%s", (n++ ? " " : ""), $1 }' "$out/categories")" >&2
done
