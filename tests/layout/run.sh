#!/usr/bin/env bash
# The layering rules, checked on the sources (no build needed):
#  - lib/ includes nothing from api/, services/ or cli/;
#  - in services/ and cli/ (tests excepted) no file is over 1,500 lines and no
#    function over 120 lines (a function runs from its opening brace in
#    column 0 to the closing brace in column 0, as clang-format lays them out;
#    both lines counted, and the signature lines above the brace too);
#  - no import circles: no two object files each use a symbol the other
#    defines (nm on the objects of the build whose bin dir is the argument).
# Usage: tests/layout/run.sh BIN_DIR
set -u
cd "$(dirname "$0")/../.." || exit 2
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# 1. lib/ is below api/, services/ and cli/
hits=$(grep -rnE '#include *"[^"]*(api|services|cli)/' lib || true)
hits2=$(grep -rnE '#include *"(jobs|wire|maskkeys|participation|problem)\.h"' lib || true)
if [ -z "$hits$hits2" ]; then ok "lib/ includes nothing from api/, services/ or cli/"
else bad "lib/ includes upper layers:"; printf '%s\n%s\n' "$hits" "$hits2" | sed '/^$/d; s/^/     /'; fi

# 2. file and function sizes
files=$(find services cli -name '*.c' -o -name '*.h' | sort)
big=""
for f in $files; do
    n=$(wc -l <"$f")
    [ "$n" -le 1500 ] || big="$big $f($n)"
done
if [ -z "$big" ]; then ok "no file in services/ or cli/ is over 1500 lines"
else bad "files over 1500 lines:$big"; fi
long=$(for f in $(find services cli -name '*.c' | sort); do
    awk -v f="$f" '
        /^[A-Za-z_].*\(/ && start == 0 { sig = FNR; name = $0 }
        /^\{/ { start = (sig > 0 ? sig : FNR) }
        /^\}/ && start > 0 { n = FNR - start + 1; if (n > 120) { sub(/\(.*/, "", name); m = split(name, w, /[ *]+/); printf "%s:%d %s (%d lines)\n", f, start, w[m], n }; start = 0; sig = 0 }
        /^$/ && start == 0 { sig = 0 }
    ' "$f"
done)
if [ -z "$long" ]; then ok "no function in services/ or cli/ is over 120 lines"
else bad "functions over 120 lines:"; printf '%s\n' "$long" | sed 's/^/     /'; fi

# 3. no import circles: object a uses a symbol that object b defines, and b
#    one that a defines (nm on the build's objects: lib/, api/, services/, cli/)
obj=${1:-build/bin}/../obj
if [ ! -d "$obj/lib" ]; then
    bad "no objects under $obj (build first)"
else
    circ=$(for o in $(find "$obj/lib" "$obj/api" "$obj/services" "$obj/cli" -name '*.o' | sort); do
        nm "$o" | awk -v f="${o#"$obj"/}" '$1 == "U" { print "U", $2, f }
            NF == 3 && $2 ~ /^[TDBRV]$/ { print "D", $3, f }'
    done | awk '$1 == "D" { def[$2] = $3 } $1 == "U" { u[NR] = $2 " " $3 }
        END {
            for (i in u) { split(u[i], a, " "); if ((a[1] in def) && def[a[1]] != a[2]) e[a[2] " " def[a[1]]] = 1 }
            for (k in e) { split(k, p, " "); if (((p[2] " " p[1]) in e) && p[1] < p[2]) print p[1] " <-> " p[2] }
        }' | sort)
    if [ -z "$circ" ]; then ok "no two object files use each other's symbols"
    else bad "import circles:"; printf '%s\n' "$circ" | sed 's/^/     /'; fi
fi

echo "layout: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
