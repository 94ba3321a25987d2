#!/bin/sh
# `spotdeck export`: short runs (the built-in cnn and resnet20, and an ONNX
# model torch.onnx.export wrote) exported as ONNX and safetensors, loaded
# back into PyTorch and scored on the run's test set: the run's accuracy
# within 0.1 point; both files hold the same tensors; bad input refused
# with one line and no file.  tests/engine/export_check.py has the checks.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, onnx, numpy' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch, onnx and numpy (Debian: python3-torch, python3-onnx, python3-numpy)" >&2; exit 77; }
[ -d "$FMNIST" ] || { echo "SKIP: no $FMNIST (Debian: dataset-fashion-mnist)" >&2; exit 77; }
export top_builddir
exec "$PY" "$top_srcdir/tests/engine/export_check.py"
