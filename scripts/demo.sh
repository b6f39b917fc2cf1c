#!/usr/bin/env bash
# make demo: the main job of fedsvd.
#
# The federated PCA over loopback services (masking-server, aggregation-server,
# client agents) is not built yet (see README "Status"). Until it is, this
# demo runs the part that exists: the centralised baseline every federated
# result will be compared with — an SVD/PCA of Fashion-MNIST (70 000 x 784,
# Debian's dataset-fashion-mnist) with the library's LAPACK path — and says
# plainly that the federated run is still to come.
set -euo pipefail
cd "$(dirname "$0")/.."
F=build/bin/fedsvd
D=/usr/share/datasets/fashion-mnist
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"

echo "fedsvd demo"
echo "  NOTE: the federated PCA (all services on loopback) is not built yet;"
echo "        this run shows the centralised baseline it will be checked against."
echo
for part in train t10k; do
    "$F" convert --input "$D/$part-images-idx3-ubyte.gz" --out "$out/$part.npy" >/dev/null
done
echo "loaded Fashion-MNIST: train 60000 x 784, test 10000 x 784 (as $out/*.npy)"
echo "centralised top-50 SVD of the training images (uncentred):"
"$F" svd --input "$out/train.npy" --k 50 --method gesvdx --out "$out/svd-train"
echo
echo "results in $out/svd-train (U.npy, S.npy, V.npy, summary.json)"
