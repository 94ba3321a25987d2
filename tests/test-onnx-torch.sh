#!/bin/sh
# An ONNX model exported by PyTorch trains to the same numbers in spotdeck
# as in PyTorch: 30 SGD steps from the file's weights on the same batches,
# every step's loss and the final parameters and batch-norm running
# statistics within the drift band of PyTorch runs nudged by 1 ulp
# (tests/onnx_torch_ref.py says the bounds).  Two exports of the same small
# residual CNN: with batch-norm, TrainingMode.TRAINING (x.view(x.size(0),
# -1): Shape, Gather, Unsqueeze, Concat, Reshape folded at load), and
# without, eval mode with do_constant_folding=False (Flatten).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, onnx' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch and onnx (Debian: python3-torch, python3-onnx)" >&2; exit 77; }
tmpdir
REF="$top_srcdir/tests/onnx_torch_ref.py"
TRAIN="$top_builddir/tests/onnx-train"
for variant in train eval; do
	mkdir "$T/$variant"
	set -- $("$PY" "$REF" prepare "$T/$variant" "$variant" 2>"$T/$variant/prepare.err" | tail -n 1) ||
		fail "$variant: export: $(tail -n 3 "$T/$variant/prepare.err")"
	for kv in "$@"; do eval "$kv"; done
	[ -n "$LR" ] || fail "$variant: export printed no settings: $(tail -n 3 "$T/$variant/prepare.err")"
	"$TRAIN" "$T/$variant/model.onnx" "$T/$variant/batches.bin" "$T/$variant/out.txt" \
		"$LR" "$MOMENTUM" "$WEIGHT_DECAY" || fail "$variant: onnx-train failed"
	echo "$variant export:"
	"$PY" "$REF" compare "$T/$variant" "$variant" || fail "$variant: spotdeck differs from PyTorch"
	ok "$variant export: 30 steps as PyTorch's"
	LR=
done
