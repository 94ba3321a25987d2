#!/bin/sh
# The char-level GPT of examples/char-gpt (a small config: 2 layers, 2
# heads, 32 channels, block 16, vocabulary 64, dropout 0), exported by
# export.py at opsets 14, 15, 16 (the LayerNorm chain: ReduceMean, Sub, Pow,
# Sqrt, Div, Mul, Add) and 17 (LayerNormalization), in training mode
# without constant folding, computes in spotdeck what it computes in
# PyTorch from the same initial weights (the file's initializers) on the
# same token windows: the mean next-token loss (1e-5 relative), every
# parameter's gradient by name, the tied embedding / output projection as
# one tensor (max |diff| / max |torch| per tensor, bound in
# tests/engine/test-gpt-onnx.c), the eval-mode loss, and 30 steps of SGD
# and 30 of AdamW (export.py's betas, eps, weight decay and clipping)
# within PyTorch's 1-ulp drift band (tests/engine/gpt_torch_ref.py).  A
# constant-folded export (the tie lost: the output projection is a
# transposed copy) and an eval-mode one (equal initializers merged) load
# and compute the same training-mode and eval-mode losses.  Each gradient
# range the gradient-ready calls declare final (what the elastic worker
# overlaps its all-reduce with) is final, the tied table's too.  A token id
# outside the vocabulary is refused with a line naming it.  The trained
# model written back into its file reloads with the trained parameters.
# Exports edited to hold what the engine does not implement (a Softmax on
# another axis, a Transpose moving the batch, a ReduceMean outside the
# LayerNorm chain) are refused with one line naming the file and node.
# An image MLP whose MatMul reads a Transpose of its weight (the layout of
# a GPT's Linears) computes PyTorch's loss.
# The attention and the GELU run as one fused node each per block (checked
# against the unfused nodes, SPOTDECK_FUSE=off, which also must match
# PyTorch on their own).
# The same with GPT-2's tanh GELU (its Mul / Tanh chain, fused too), and
# with Linears without biases (nanoGPT's bias=False), at opsets 14 and 17.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, onnx' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch and onnx (Debian: python3-torch, python3-onnx)" >&2; exit 77; }
tmpdir
"$PY" "$top_srcdir/tests/engine/gpt_torch_ref.py" "$T" 2>"$T/ref.err" ||
	fail "PyTorch reference: $(tail -n 3 "$T/ref.err")"
for opset in 14 15 16 17; do
	echo "opset $opset:"
	"$top_builddir/tests/engine/test-gpt-onnx" "$T/gpt$opset.onnx" "$T" ||
		fail "opset $opset: spotdeck differs from PyTorch"
	ok "opset $opset: loss, gradients, eval loss, 30 SGD and 30 AdamW steps as PyTorch's"
done
echo "opset 14, nothing fused (the reference path):"
SPOTDECK_FUSE=off "$top_builddir/tests/engine/test-gpt-onnx" "$T/gpt14.onnx" "$T" ||
	fail "opset 14 unfused: spotdeck differs from PyTorch"
ok "opset 14, nothing fused: loss, gradients, eval loss, 30 SGD and 30 AdamW steps as PyTorch's"
for variant in 14-fold 17-eval; do
	echo "$variant:"
	"$top_builddir/tests/engine/test-gpt-onnx" --forward "$T/gpt$variant.onnx" "$T" ||
		fail "$variant: spotdeck's loss differs from PyTorch's"
	ok "$variant: training and eval loss as PyTorch's"
done
"$top_builddir/tests/engine/test-gpt-onnx" --mlp "$T" ||
	fail "an image MLP's MatMul by a transposed initializer differs from PyTorch"
ok "image MLP with MatMul(x, Transpose(W)): PyTorch's loss"
while IFS='	' read -r file want; do
	"$top_builddir/tests/engine/test-gpt-onnx" --bad "$T/$file" "$want" ||
		fail "$file: not refused with one line saying \"$want\""
	ok "$file refused in one line"
done <"$T/bad.txt"
for variant in tanh nobias; do
	mkdir "$T/$variant"
	"$PY" "$top_srcdir/tests/engine/gpt_torch_ref.py" "$T/$variant" $variant \
		2>"$T/$variant/ref.err" ||
		fail "PyTorch reference, $variant: $(tail -n 3 "$T/$variant/ref.err")"
	for opset in 14 17; do
		echo "$variant, opset $opset:"
		"$top_builddir/tests/engine/test-gpt-onnx" "$T/$variant/gpt$opset.onnx" "$T/$variant" ||
			fail "$variant, opset $opset: spotdeck differs from PyTorch"
		ok "$variant, opset $opset: loss, gradients, eval loss, 30 SGD and 30 AdamW steps as PyTorch's"
	done
done
