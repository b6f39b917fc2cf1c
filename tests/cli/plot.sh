#!/usr/bin/env bash
# CLI tests for `fedsvd plot scatter|scree|line` (bash + awk, no Python).
#
# Sourced by tests/cli/run.sh, whose helpers (run, ok, fail, one_line_stderr)
# and variables (F, T, OUT, ERR, passed, failed) it uses, so its checks count
# in run.sh's final "cli: P passed, F failed" line. It can also run alone:
#   tests/cli/plot.sh BIN_DIR_OR_FEDSVD     (ends with "plot: P passed, F failed")

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    arg=${1:-build/bin}
    if [ -d "$arg" ]; then F="$arg/fedsvd"; else F="$arg"; fi
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
        if [ -s "$ERR" ]; then sed 's/^/     stderr: /' "$ERR" | head -n 5; fi
    }
    run() {
        "$F" "$@" >"$OUT" 2>"$ERR"
        RC=$?
    }
    one_line_stderr() { [ "$(wc -l <"$ERR")" -eq 1 ]; }
    plot_standalone=1
else
    plot_standalone=0
fi

P="$T/plot"
mkdir -p "$P"

# count PATTERN FILE: occurrences (not lines) of a fixed string.
count() { grep -oF -- "$1" "$2" | wc -l; }

# svg_ok NAME FILE: starts with the XML declaration, has <svg ... viewBox>,
# ends with </svg>, and (when xmllint is installed) is well-formed XML.
svg_ok() {
    local name=$1 file=$2
    if [ ! -s "$file" ]; then
        fail "$name: $file missing"
    elif ! head -n 1 "$file" | grep -q '^<?xml version="1.0"'; then
        fail "$name: no XML declaration"
    elif ! grep -q '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" .*viewBox="0 0 ' "$file"; then
        fail "$name: no <svg> element with viewBox"
    elif [ "$(tail -n 1 "$file")" != "</svg>" ]; then
        fail "$name: does not end with </svg>"
    elif command -v xmllint >/dev/null 2>&1 && ! xmllint --noout "$file" 2>"$ERR"; then
        fail "$name: not well-formed XML"
    else
        ok "$name: SVG 1.1 document"
    fi
}

# plot_err NAME WANT_RC ARGS...: exit status WANT_RC and exactly one line on stderr.
plot_err() {
    local name=$1 want=$2
    shift 2
    run "$@"
    if [ "$RC" -eq "$want" ] && one_line_stderr; then
        ok "$name (exit $RC): $(cat "$ERR")"
    else
        fail "$name: exit $RC (expected $want), $(wc -l <"$ERR") stderr lines"
    fi
}

echo "== plot: help"
for c in "plot" "plot scatter" "plot scree" "plot line"; do
    # shellcheck disable=SC2086
    run $c --help
    if [ "$RC" -eq 0 ] && grep -q "^Usage: fedsvd $c" "$OUT"; then
        ok "fedsvd $c --help"
    else
        fail "fedsvd $c --help: exit $RC"
    fi
done
run help plot scatter
if [ "$RC" -eq 0 ] && grep -q '^Usage: fedsvd plot scatter' "$OUT"; then
    ok "fedsvd help plot scatter"
else
    fail "fedsvd help plot scatter: exit $RC"
fi
run --help
if grep -q '^  plot ' "$OUT"; then ok "plot listed in fedsvd --help"; else fail "plot not in fedsvd --help"; fi

# Inputs: 30 points in 3 classes (labels 0,1,2), and 500 points in 10 classes.
awk 'BEGIN { for (i = 0; i < 30; i++) printf "%d,%g,%g\n", i, (i % 3) * 10 + i / 10, -(i % 3) + i / 7 }' \
    >"$P/s30.csv"
awk 'BEGIN { for (i = 0; i < 30; i++) print i % 3 }' >"$P/l30.csv"
awk 'BEGIN { for (i = 0; i < 500; i++) printf "%g,%g\n", sin(i) * (i % 10), cos(i) + i % 10 }' \
    >"$P/s500.csv"
awk 'BEGIN { for (i = 0; i < 500; i++) print i % 10 }' >"$P/l500.csv"

echo "== plot scatter"
run plot scatter --input "$P/s30.csv" --labels "$P/l30.csv" --x 1 --y 2 \
    --class-names 'alpha,beta,gamma' --title 'A <&> "B"' --out "$P/a.svg"
if [ "$RC" -eq 0 ] && grep -q '^wrote .*a.svg: scatter of 30 of 30 points, 3 classes' "$OUT"; then
    ok "scatter 30 points (exit 0): $(cat "$OUT")"
else
    fail "scatter 30 points: exit $RC"
fi
svg_ok "scatter" "$P/a.svg"
n=$(count '<circle' "$P/a.svg")
if [ "$n" -eq 30 ]; then ok "scatter: 30 <circle> elements"; else fail "scatter: $n circles, expected 30"; fi
for c in 0 1 2; do
    want=10
    n=$(count "class=\"c$c\"/>" "$P/a.svg")
    if [ "$n" -eq "$want" ]; then ok "scatter: class $c has $want points"; else fail "scatter: class $c has $n points"; fi
done
if grep -qF '>alpha</text>' "$P/a.svg" && grep -qF '>beta</text>' "$P/a.svg" &&
    grep -qF '>gamma</text>' "$P/a.svg" && grep -qF '>class</text>' "$P/a.svg"; then
    ok "scatter: a legend entry per class, with the class names"
else
    fail "scatter: legend entries missing"
fi
if grep -qF '>A &lt;&amp;&gt; &quot;B&quot;</text>' "$P/a.svg" &&
    grep -qF '<title>A &lt;&amp;&gt; &quot;B&quot;</title>' "$P/a.svg" && ! grep -qF '<&>' "$P/a.svg"; then
    ok "scatter: title escaped for XML"
else
    fail "scatter: title not escaped"
fi
if grep -qF '>PC2</text>' "$P/a.svg" && grep -qF '>PC3</text>' "$P/a.svg"; then
    ok "scatter: axis labels PC2 and PC3 for --x 1 --y 2"
else
    fail "scatter: axis labels"
fi

run plot scatter --input "$P/s30.csv" --labels "$P/l30.csv" --title $'bad \xff byte, \x01 control' \
    --class-names "$(printf 'x%.0s' $(seq 40)),ß" --out "$P/utf8.svg"
if [ "$RC" -eq 0 ] && grep -qF $'bad \xef\xbf\xbd byte,   control' "$P/utf8.svg" &&
    grep -qF $'>xxxxxxxxxxxxxxxxxxxxxxxxxxx\xe2\x80\xa6</text>' "$P/utf8.svg" &&
    grep -qF '>ß</text>' "$P/utf8.svg"; then
    ok "scatter: invalid UTF-8 and control characters replaced, long legend entries cut"
else
    fail "scatter: UTF-8 / control characters / long names: exit $RC"
fi
svg_ok "scatter with odd text" "$P/utf8.svg"

run plot scatter --input "$P/s30.csv" --out "$P/nolab.svg"
n=$(count '<circle' "$P/nolab.svg")
if [ "$RC" -eq 0 ] && [ "$n" -eq 30 ] && ! grep -qF 'class="leg"' "$P/nolab.svg"; then
    ok "scatter without labels: 30 points, no legend"
else
    fail "scatter without labels: exit $RC, $n circles"
fi

run plot scatter --input "$P/s500.csv" --labels "$P/l500.csv" --max-points 100 --out "$P/sub1.svg" \
    --format json
n=$(count '<circle' "$P/sub1.svg")
if [ "$RC" -eq 0 ] && [ "$n" -eq 100 ] &&
    grep -q '^{"kind": "scatter", "out": ".*sub1.svg", "points": 100, "rows": 500, "classes": 10' "$OUT"; then
    ok "scatter --max-points 100 of 500: 100 circles, JSON report"
else
    fail "scatter --max-points: exit $RC, $n circles, $(cat "$OUT")"
fi
n=$(grep -c '<rect x="[0-9.]*" y="[0-9.]*" width="14" height="14"' "$P/sub1.svg")
if [ "$n" -eq 10 ]; then ok "scatter: 10 legend swatches for 10 classes"; else fail "scatter: $n legend swatches"; fi
run plot scatter --input "$P/s500.csv" --labels "$P/l500.csv" --max-points 100 --out "$P/sub2.svg"
if cmp -s "$P/sub1.svg" "$P/sub2.svg"; then ok "scatter subsample is deterministic"; else fail "scatter subsample differs between runs"; fi
run plot scatter --input "$P/s500.csv" --labels "$P/l500.csv" --max-points 100 --seed 7 --out "$P/sub3.svg"
if [ "$RC" -eq 0 ] && ! cmp -s "$P/sub1.svg" "$P/sub3.svg"; then
    ok "scatter --seed picks another subset"
else
    fail "scatter --seed: exit $RC, same output"
fi

# --scale: column j times S[j]; with S = (1, 0.5, 0.25) and --x 1 --y 2 the figure
# equals one of the same data pre-scaled.
printf '1\n0.5\n0.25\n' >"$P/S.csv"
awk -F, '{ printf "%s,%.17g,%.17g\n", $1, $2 * 0.5, $3 * 0.25 }' "$P/s30.csv" >"$P/s30scaled.csv"
run plot scatter --input "$P/s30.csv" --scale "$P/S.csv" --x 1 --y 2 --out "$P/sc1.svg"
rc1=$RC
run plot scatter --input "$P/s30scaled.csv" --x 1 --y 2 --out "$P/sc2.svg"
if [ "$rc1" -eq 0 ] && [ "$RC" -eq 0 ] && cmp -s "$P/sc1.svg" "$P/sc2.svg"; then
    ok "scatter --scale plots U diag(S)"
else
    fail "scatter --scale: exit $rc1/$RC or figures differ"
fi

# IDX labels (the Fashion-MNIST label format): magic 00 00 08 01, n = 30, bytes.
{
    printf '\x00\x00\x08\x01\x00\x00\x00\x1e'
    for i in $(seq 0 29); do printf "\\x0$((i % 3))"; done
} >"$P/l30-idx1-ubyte"
run plot scatter --input "$P/s30.csv" --labels "$P/l30-idx1-ubyte" --out "$P/idx.svg"
n=$(count '<circle' "$P/idx.svg")
if [ "$RC" -eq 0 ] && [ "$n" -eq 30 ] && [ "$(grep -c 'width="14" height="14"' "$P/idx.svg")" -eq 3 ]; then
    ok "scatter with IDX labels"
else
    fail "scatter with IDX labels: exit $RC"
fi

# Several files (one per party) stacked by rows give the same figure as one file.
head -n 12 "$P/s30.csv" >"$P/s30-p1.csv"
tail -n 18 "$P/s30.csv" >"$P/s30-p2.csv"
head -n 12 "$P/l30.csv" | tr '\n' ',' | sed 's/,$/\n/' >"$P/l30-p1.csv" # a 1 x 12 row vector
tail -n 18 "$P/l30.csv" >"$P/l30-p2.csv"
run plot scatter --input "$P/s30.csv" --labels "$P/l30.csv" --out "$P/whole.svg"
rc1=$RC
run plot scatter --input "$P/s30-p1.csv,$P/s30-p2.csv" --labels "$P/l30-p1.csv,$P/l30-p2.csv" \
    --out "$P/parts.svg"
if [ "$rc1" -eq 0 ] && [ "$RC" -eq 0 ] && cmp -s "$P/whole.svg" "$P/parts.svg"; then
    ok "scatter with comma-separated --input and --labels lists (rows stacked)"
else
    fail "scatter with file lists: exit $rc1/$RC or figures differ"
fi
plot_err "plot scatter list with different column counts" 1 plot scatter \
    --input "$P/s30-p1.csv,$P/s500.csv" --out "$P/e.svg"

echo "== plot scree"
printf '0.4\n0.25\n0.15\n0.1\n0.05\n0.03\n0.02\n' >"$P/ratio.csv"
run plot scree --input "$P/ratio.csv" --cumulative --max 5 --title 'Scree <1>' --out "$P/scree.svg"
if [ "$RC" -eq 0 ] && grep -q 'scree of 5 components (cumulative 0.95)' "$OUT"; then
    ok "scree --max 5 --cumulative: $(cat "$OUT")"
else
    fail "scree: exit $RC, $(cat "$OUT")"
fi
svg_ok "scree" "$P/scree.svg"
n=$(grep -c '^<rect x="[0-9.]*" y="[0-9.]*" width="[0-9.]*" height="[0-9.]*"/>$' "$P/scree.svg")
if [ "$n" -eq 5 ]; then ok "scree: 5 bars"; else fail "scree: $n bars, expected 5"; fi
if [ "$(count '<polyline' "$P/scree.svg")" -eq 1 ] && grep -qF '>cumulative</text>' "$P/scree.svg" &&
    grep -qF '95.0% in 5' "$P/scree.svg" && grep -qF 'Scree &lt;1&gt;' "$P/scree.svg"; then
    ok "scree: cumulative line, legend, total"
else
    fail "scree: cumulative line or legend missing"
fi
run plot scree --input "$P/ratio.csv" --out "$P/scree2.svg"
if [ "$RC" -eq 0 ] && [ "$(count '<polyline' "$P/scree2.svg")" -eq 0 ]; then
    ok "scree without --cumulative: bars only"
else
    fail "scree without --cumulative: exit $RC"
fi
# Singular values 2, 1, 1 with --total 10: ratios 0.4, 0.1, 0.1 (cumulative 0.6).
printf '2\n1\n1\n' >"$P/sv.csv"
run plot scree --input "$P/sv.csv" --singular-values --total 10 --format json --out "$P/scree3.svg"
cum=$(sed -n 's/.*"cumulative": *\([-+0-9.eE]*\).*/\1/p' "$OUT")
if [ "$RC" -eq 0 ] && grep -q '"components": 3,' "$OUT" &&
    awk -v c="$cum" 'BEGIN { d = c - 0.6; exit !(c != "" && d < 1e-12 && d > -1e-12) }'; then
    ok "scree --singular-values --total"
else
    fail "scree --singular-values: exit $RC, $(cat "$OUT")"
fi

echo "== plot line"
awk 'BEGIN { for (i = 0; i < 25; i++) printf "%.17g,%.17g,%.17g\n", exp(-i), 1 / (i + 1), (i == 7) ? 0 : 2 ^ -i }' \
    >"$P/conv.csv"
run plot line --input "$P/conv.csv" --log-y --names 'power,<fed>,third' --out "$P/line.svg"
if [ "$RC" -eq 0 ] && grep -q '3 series of 25 rows' "$OUT"; then ok "line --log-y (exit 0)"; else fail "line: exit $RC"; fi
svg_ok "line" "$P/line.svg"
if [ "$(count '<path' "$P/line.svg")" -eq 3 ] && grep -qF '>&lt;fed&gt;</text>' "$P/line.svg" &&
    grep -qF '>1e-10</text>' "$P/line.svg"; then
    ok "line: 3 paths, legend names escaped, log ticks"
else
    fail "line: paths, legend or log ticks missing"
fi
# The zero at row 7 of the third series is a gap: that path has two "M" pieces.
if [ "$(grep '<path' "$P/line.svg" | sed -n 3p | grep -o 'M' | wc -l)" -eq 2 ]; then
    ok "line --log-y leaves a gap at a value <= 0"
else
    fail "line --log-y: no gap at the zero"
fi
run plot line --input "$P/conv.csv" --out "$P/line2.svg" --xlabel 'round' --ylabel 'error'
if [ "$RC" -eq 0 ] && grep -qF '>round</text>' "$P/line2.svg" && grep -qF '>error</text>' "$P/line2.svg"; then
    ok "line linear with --xlabel/--ylabel"
else
    fail "line linear: exit $RC"
fi

echo "== plot: errors"
plot_err "plot scatter missing input file" 1 plot scatter --input "$P/nope.npy" --out "$P/e.svg"
if grep -qF 'nope.npy' "$ERR"; then ok "missing file: message names the file"; else fail "missing file: message"; fi
plot_err "plot scatter labels length mismatch" 1 plot scatter --input "$P/s500.csv" --labels "$P/l30.csv" --out "$P/e.svg"
if grep -qF '30 labels for 500 rows' "$ERR"; then ok "labels mismatch: message gives both lengths"; else fail "labels mismatch: message"; fi
plot_err "plot scatter column out of range" 1 plot scatter --input "$P/s30.csv" --y 3 --out "$P/e.svg"
if grep -qF 'column 3 out of range' "$ERR"; then ok "column out of range: message"; else fail "column out of range: message"; fi
printf '0\n1.5\n' >"$P/frac.csv"
plot_err "plot scatter --scale too short" 1 plot scatter --input "$P/s30.csv" --scale "$P/frac.csv" --y 2 \
    --out "$P/e.svg" --labels "$P/l30.csv" --max-points 5 --seed 3 --radius 2 --title t --width 400
awk 'BEGIN { print "1,2"; print "3,4" }' >"$P/s2.csv"
plot_err "plot scatter non-integer label" 1 plot scatter --input "$P/s2.csv" --labels "$P/frac.csv" --out "$P/e.svg"
awk 'BEGIN { for (i = 0; i < 30; i++) print i }' >"$P/l30many.csv"
plot_err "plot scatter more than 20 classes" 1 plot scatter --input "$P/s30.csv" --labels "$P/l30many.csv" --out "$P/e.svg"
plot_err "plot scree of a matrix" 1 plot scree --input "$P/s30.csv" --out "$P/e.svg"
printf '0.5\n-0.1\n' >"$P/neg.csv"
plot_err "plot scree negative ratio" 1 plot scree --input "$P/neg.csv" --out "$P/e.svg"
printf '0,-1\n0,-2\n' >"$P/nonpos.csv"
plot_err "plot line --log-y without positive values" 1 plot line --input "$P/nonpos.csv" --log-y --out "$P/e.svg"
plot_err "plot line --names count mismatch" 1 plot line --input "$P/conv.csv" --names a,b --out "$P/e.svg"
plot_err "plot: output directory missing" 1 plot scree --input "$P/ratio.csv" --out "$P/no/such/dir/x.svg"
if [ ! -e "$P/e.svg" ] && [ -z "$(find "$P" -name '*.tmp.*')" ]; then
    ok "failed runs leave no output and no temporary file"
else
    fail "failed runs left $P/e.svg or a temporary file"
fi

plot_err "plot without subcommand" 2 plot
plot_err "plot unknown subcommand" 2 plot pie --input x --out y
plot_err "plot scatter without --out" 2 plot scatter --input "$P/s30.csv"
plot_err "plot scatter without --input" 2 plot scatter --out "$P/e.svg"
plot_err "plot scatter --max-points 0" 2 plot scatter --input "$P/s30.csv" --max-points 0 --out "$P/e.svg"
plot_err "plot scatter --x junk" 2 plot scatter --input "$P/s30.csv" --x one --out "$P/e.svg"
plot_err "plot scatter --x negative" 2 plot scatter --input "$P/s30.csv" --x -1 --out "$P/e.svg"
plot_err "plot scatter unknown option" 2 plot scatter --input "$P/s30.csv" --colour red --out "$P/e.svg"
plot_err "plot scatter --width too small" 2 plot scatter --input "$P/s30.csv" --width 10 --out "$P/e.svg"
plot_err "plot scatter --radius 0" 2 plot scatter --input "$P/s30.csv" --radius 0 --out "$P/e.svg"
plot_err "plot scatter --format yaml" 2 plot scatter --input "$P/s30.csv" --format yaml --out "$P/e.svg"
plot_err "plot scree --max junk" 2 plot scree --input "$P/ratio.csv" --max 5x --out "$P/e.svg"
plot_err "plot scree --total without --singular-values" 2 plot scree --input "$P/sv.csv" --total 3 --out "$P/e.svg"
plot_err "plot scree --cumulative with a value" 2 plot scree --input "$P/ratio.csv" --cumulative=1 --out "$P/e.svg"
plot_err "plot line --max-points 1" 2 plot line --input "$P/conv.csv" --max-points 1 --out "$P/e.svg"
plot_err "plot line stray argument" 2 plot line extra --input "$P/conv.csv" --out "$P/e.svg"

if [ "$plot_standalone" -eq 1 ]; then
    echo "plot: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
fi
