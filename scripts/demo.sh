#!/usr/bin/env bash
# make demo: the main job of fedsvd.
#
# Federated PCA (fedpca) of Fashion-MNIST (Debian's dataset-fashion-mnist:
# 60 000 training + 10 000 test images of 28 x 28 = 784 pixels) split across
# 4 parties of 17 500 images each, with every service a real process on
# 127.0.0.1: a masking-server, an aggregation-server and 4 client-agents
# (`fedsvd local`). The result is compared with a centralised PCA of the
# pooled 70 000 x 784 matrix (`fedsvd svd --center`, LAPACK), and the demo
# prints the seconds per phase, the bytes each party sent and received, the
# largest singular-value error, the smallest |cosine| between matching
# components, and where everything is. It also draws the first two
# components' scores (pca.svg) and the explained variance (scree.svg).
#
# Environment: DEMO_OUT (default out/demo), DEMO_K (components, default 50),
# DEMO_PARTIES (default 4), FEDSVD_BIN (the binaries, default build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
F=${FEDSVD_BIN:-build/bin}/fedsvd
D=/usr/share/datasets/fashion-mnist
out=${DEMO_OUT:-out/demo}
k=${DEMO_K:-50}
parties=${DEMO_PARTIES:-4}
train="$D/train-images-idx3-ubyte.gz"
t10k="$D/t10k-images-idx3-ubyte.gz"

for f in "$train" "$t10k" "$D/train-labels-idx1-ubyte.gz" "$D/t10k-labels-idx1-ubyte.gz"; do
    if [ ! -r "$f" ]; then
        echo "demo: $f is missing (make deps installs dataset-fashion-mnist)" >&2
        exit 1
    fi
done
mkdir -p "$out"
rm -rf "${out:?}/fedpca" "${out:?}/central"

echo "fedsvd demo: federated PCA of Fashion-MNIST (70000 images x 784 pixels), $parties parties"
echo "  every service is a real process on 127.0.0.1: masking-server, aggregation-server,"
echo "  $parties client-agents; each party holds $((70000 / parties)) images and sees only its own"
echo

# 1. the federated run. Mask blocks of 1024 (>= the 784 features, so a block's
# masked rows span no detectable subspace; docs/wire-fedsvd.md) keep each
# party's key download ~150 MB instead of ~600 MB.
"$F" local --algorithm fedpca --input "$train" --input "$t10k" --parties "$parties" --k "$k" \
    --block-size 1024 --verify --out "$out/fedpca" --format json >"$out/fedpca.json" 2>"$out/fedpca.log" || {
    echo "demo: fedsvd local failed:" >&2
    tail -n 5 "$out/fedpca.log" >&2
    exit 1
}

# 2. the centralised PCA of the pooled data, and the comparison
"$F" svd --input "$train" --input "$t10k" --center --k "$k" --out "$out/central" --format json \
    >"$out/central.json"
sv_err=$("$F" compare --a "$out/fedpca/singular_values.npy" --b "$out/central/S.npy" --metric sv)
proj=$("$F" compare --a "$out/fedpca/components.npy" --b "$out/central/V.npy" --metric subspace)

# 3. figures (fedsvd plot)
scores=$(for i in $(seq 1 "$parties"); do printf '%s,' "$out/fedpca/party-$i/scores.npy"; done)
scores=${scores%,}
names="T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"
plots=""
if "$F" plot --help >/dev/null 2>&1; then
    "$F" plot scatter --input "$scores" \
        --labels "$D/train-labels-idx1-ubyte.gz,$D/t10k-labels-idx1-ubyte.gz" \
        --class-names "$names" --title "Fashion-MNIST, federated PCA over $parties parties" \
        --out "$out/pca.svg" >/dev/null &&
        "$F" plot scree --input "$out/fedpca/explained_variance_ratio.npy" --cumulative \
            --max "$k" --title "Explained variance (federated PCA)" --out "$out/scree.svg" >/dev/null &&
        plots="$out/pca.svg, $out/scree.svg"
fi

# 4. the report (summary.json of fedsvd local holds the figures)
S="$out/fedpca/summary.json"
flat() { tr -d '\n' <"$1" | tr -s ' '; }
jnum() { # KEY [FILE]: the first number after "KEY":
    flat "${2:-$S}" | grep -o "\"$1\": [-+0-9.eE]*" | head -n 1 | sed 's/.*: //'
}
jobj() { # KEY: the flat object after "KEY": as "a=1 b=2"
    flat "$S" | sed -n "s/.*\"$1\": *{\\([^{}]*\\)}.*/\\1/p" | tr -d ' "' | tr ',' '\n'
}
human() { awk -v b="$1" 'BEGIN { u="B"; if (b >= 1e9) { b /= 1e9; u = "GB" } else if (b >= 1e6) { b /= 1e6; u = "MB" } else if (b >= 1e3) { b /= 1e3; u = "kB" }; printf "%.1f %s", b, u }'; }

echo "seconds per phase (aggregation server; party_* = the slowest party):"
jobj phases | awk -F: '{ printf "  %-20s %8.2f\n", $1, $2 }'
printf '  total: the job %.1f s, fedsvd local %.1f s (start-up, job, results, verification);\n' \
    "$(jnum job)" "$(jnum total)"
printf '         the centralised PCA %.1f s (LAPACK top-%s of the pooled matrix)\n' \
    "$(jnum seconds "$out/central.json")" "$k"
echo "  (advertise_keys includes each agent's key download from the masking server)"
echo
echo "bytes per party (sent / received):"
flat "$S" | grep -o '"party": [0-9]*, "file"[^}]*"bytes_sent": [0-9]*, "bytes_received": [0-9]*' |
    sed 's/"party": \([0-9]*\).*"bytes_sent": \([0-9]*\), "bytes_received": \([0-9]*\)/\1 \2 \3/' |
    while read -r p s r; do echo "  party $p: $(human "$s") / $(human "$r")"; done
echo "  aggregation-server in $(human "$(jnum bytes_in)"), masking-server out (keys)" \
    "$(human "$(flat "$S" | sed -n 's/.*"masking": {[^}]*"bytes_out": \([0-9]*\).*/\1/p')")"
echo
echo "accuracy against the centralised PCA of the pooled 70000 x 784 matrix (top $k):"
echo "  largest singular-value error, relative to s_1:   $sv_err"
echo "  projection distance of the components:          $proj"
echo "  smallest |cosine| between matching components:  $(jnum min_abs_cosine_shared)"
echo "  numerical rank: $(jnum rank) (all $k components above the rank tolerance)"
echo
echo "results:"
echo "  $out/fedpca/  components.npy (784 x $k), singular_values.npy, explained_variance(_ratio).npy,"
echo "               mean.npy, party-<i>/scores.npy (each party's own), summary.json, logs/"
echo "  $out/central/ the centralised PCA (V.npy, S.npy, mean.npy)"
[ -n "$plots" ] && echo "  figures: $plots"
exit 0
