#!/bin/sh
# The user's path, at full size (make soak, not make check: about 10
# minutes on 2 cores): examples/fashion-cnn/export.py writes the cnn as an
# ONNX file exported from PyTorch and Fashion-MNIST as .npy arrays, and
# spotdeck-worker trains it 3 epochs, standalone, with the settings of the
# built-in cnn's 3-epoch run (README "Training alone", about 0.91).  Its
# test accuracy must reach 0.90.  The built-in cnn is not rerun: both start
# from different weights (PyTorch's default initialisation, not the
# engine's He-normal), so only the threshold is compared.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
PY=/usr/bin/python3
$PY -c 'import torch, numpy' 2>/dev/null || { echo "SKIP: $PY cannot import torch and numpy" >&2; exit 77; }
[ -d "$FMNIST" ] || { echo "SKIP: $FMNIST missing (Debian package dataset-fashion-mnist)" >&2; exit 77; }
$PY "$top_srcdir/examples/fashion-cnn/export.py" --out "$T/f" >"$T/export.out" 2>&1 || { cat "$T/export.out" >&2; fail "export.py"; }
"$WORKER" --standalone --model "$T/f/model.onnx" --dataset npy --data-dir "$T/f/data" --normalize 0.2860/0.3530 \
	--epochs 3 >"$T/train.out" 2>"$T/train.err" || { cat "$T/train.err" >&2; fail "training failed"; }
grep '"type":"epoch"' "$T/train.out"
acc=$(json_field "$T/train.out" done test_accuracy)
secs=$(json_field "$T/train.out" done seconds)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }' || fail "the exported cnn reached $acc test accuracy after 3 epochs (at least 0.90)"
ok "the cnn exported from PyTorch, trained from .npy Fashion-MNIST: test accuracy $acc after 3 epochs ($secs s)"
