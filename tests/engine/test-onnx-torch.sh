#!/bin/sh
# An ONNX model exported by PyTorch trains to the same numbers in spotdeck
# as in PyTorch: 30 SGD steps from the file's weights on the same batches,
# every step's loss and the final parameters and batch-norm running
# statistics within the drift band of PyTorch runs nudged by 1 ulp
# (tests/engine/onnx_torch_ref.py says the bounds).  Two exports of the same small
# residual CNN: with batch-norm, TrainingMode.TRAINING (x.view(x.size(0),
# -1): Shape, Gather, Unsqueeze, Concat, Reshape folded at load), and
# without, eval mode with do_constant_folding=False (Flatten); and a CNN
# with LeakyReLU, ReLU6 (Clip), Tanh, Sigmoid and a channel concatenation;
# and torchvision's ResNet
# stem (7x7 stride-2 conv, padded max pooling, a strided 1x1 shortcut); and
# a CIFAR ResNet block with 16 channels, which the engine runs in oneDNN's
# channel-blocked layout with batch-norm, add and ReLU fused where oneDNN is
# there (onnx-train says which layout in the log); and tests/bench/
# torch_resnet.py's CIFAR ResNet with one block per stage, whose option-A
# shortcuts export as Slice (steps 2) and Pad with folded int64 pads; and
# a CNN with the general convolutions (depthwise dilated, grouped 1x3, 3x1
# with strides (2, 1), 2x2 after an asymmetric F.pad: Pad + Conv),
# Add/Sub/Mul/Div of activations and of scalar and
# per-channel constants on either side (trained parameters and literals),
# Reciprocal, and padded average pooling with count_include_pad False and
# True (the latter exported as Pad + AveragePool); and a CNN with two
# nn.Dropout exported in training mode, which PyTorch trains with the masks
# spotdeck drew (onnx-train writes them): the same trajectory shows the
# masks are applied with PyTorch's scaling and the gradient goes through
# them.  The last two also check inference (dropout the identity) with
# spotdeck's trained weights against PyTorch's eval(), and that the file
# written back (sd_onnx_export_file) passes onnx.checker and holds the
# trained tensors, the trained arithmetic constants included.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, onnx' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch and onnx (Debian: python3-torch, python3-onnx)" >&2; exit 77; }
tmpdir
REF="$top_srcdir/tests/engine/onnx_torch_ref.py"
TRAIN="$top_builddir/tests/engine/onnx-train"
for variant in train eval acts stem cifar resnet general dropout; do
	mkdir "$T/$variant"
	set -- $("$PY" "$REF" prepare "$T/$variant" "$variant" 2>"$T/$variant/prepare.err" | tail -n 1) ||
		fail "$variant: export: $(tail -n 3 "$T/$variant/prepare.err")"
	for kv in "$@"; do eval "$kv"; done
	[ -n "$LR" ] || fail "$variant: export printed no settings: $(tail -n 3 "$T/$variant/prepare.err")"
	"$TRAIN" "$T/$variant/model.onnx" "$T/$variant/batches.bin" "$T/$variant/out.txt" \
		"$LR" "$MOMENTUM" "$WEIGHT_DECAY" 2>"$T/$variant/train.err" ||
		fail "$variant: onnx-train failed: $(cat "$T/$variant/train.err")"
	cat "$T/$variant/train.err"
	echo "$variant export:"
	"$PY" "$REF" compare "$T/$variant" "$variant" || fail "$variant: spotdeck differs from PyTorch"
	ok "$variant export: 30 steps as PyTorch's"
	LR=
done

# What torch.onnx.export writes in opsets 13 to 17, eval and training mode,
# with and without constant folding, loads: the CNN above with dropout and
# log_softmax added, and an MLP through MatMul + Add.  Their sizes:
#   training mode: convs 8x3x3x3 + 8x8x3x3, batch-norms 2 x (8 + 8), fc 8x10
#     + 10 = 914 parameters, 2 x (8 + 8) = 32 running statistics, 11 engine
#     nodes (conv bn relu maxpool conv bn add relu avgpool dropout linear);
#   eval mode: each batch-norm folded into its conv, which gains a bias, and
#     the dropout left out by torch:
#     216 + 8 + 576 + 8 + 90 = 898 parameters, no statistics, 8 nodes;
#   MLP: 192x16 + 16 + 16x10 + 10 = 3258 parameters, 3 nodes.
mkdir "$T/exports"
"$PY" "$REF" exports "$T/exports" 2>"$T/exports.err" ||
	fail "exports: $(tail -n 3 "$T/exports.err")"
n=0
for f in "$T"/exports/*.onnx; do
	name=$(basename "$f" .onnx)
	line=$("$TRAIN" "$f" - - 0 0 0) || fail "$name does not load"
	case $name in
	cnn-*-train-*) want="input 3x8x8 classes 10 params 914 buffers 32 " end=" engine_nodes 11" ;;
	cnn-*-eval-*) want="input 3x8x8 classes 10 params 898 buffers 0 " end=" engine_nodes 8" ;;
	mlp-*) want="input 3x8x8 classes 10 params 3258 buffers 0 " end=" engine_nodes 3" ;;
	esac
	case $line in
	"$want"*"$end") ;;
	*) fail "$name: $line, expected $want..." ;;
	esac
	n=$((n + 1))
done
[ "$n" -eq 22 ] || fail "$n exports, expected 22"
ok "22 exports load (opsets 13-17, eval and training, folded or not)"

# The same network with three blocks per stage, exported in opsets 13 and
# 17 with and without constant folding, lowers to exactly the built-in
# resnet20: onnx-train compares the two node lists op by op (shapes,
# strides, shortcut settings, parameter tensors, batch-norm fusion marks)
# and the activation layout chosen (oneDNN's channel-blocked one where
# oneDNN is there).  resnet20 on 3x32x32: 269722 parameters, 1376 running
# statistics, 68 engine nodes.  Slice and Pad that are no such shortcut are
# refused with a line that says so.
mkdir "$T/resnets"
"$PY" "$REF" resnets "$T/resnets" 2>"$T/resnets.err" ||
	fail "resnets: $(tail -n 3 "$T/resnets.err")"
n=0
for f in "$T"/resnets/resnet20-*.onnx; do
	name=$(basename "$f" .onnx)
	out=$("$TRAIN" "$f" - resnet20 0 0 0 2>&1) || fail "$name: $out"
	case $out in
	*"same as resnet20: 68 engine nodes, 269722 params, 1376 buffers, layout blk "*) ;;
	*) fail "$name: $out" ;;
	esac
	echo "$name: ${out##*
}"
	n=$((n + 1))
done
[ "$n" -eq 4 ] || fail "$n resnet20 exports, expected 4"
ok "resnet20 exports (opsets 13, 17, folded or not) lower to the built-in resnet20's node list"
for bad in slice pad read; do
	if out=$("$TRAIN" "$T/resnets/bad-$bad.onnx" - - 0 0 0 2>&1); then
		fail "bad-$bad.onnx loads: $out"
	fi
	case $out in
	*"supported only as a ResNet option-A shortcut"*) echo "bad-$bad: $out" ;;
	*) fail "bad-$bad.onnx: $out" ;;
	esac
done
ok "Slice and Pad that are no option-A shortcut are refused, saying so"
# What the arithmetic and dropout do not take, each refused in one line that
# names the node and says why: a squeeze-excitation gate (two activations of
# different shapes), a constant per row, nn.Dropout(1.0).
for bad in gate rows ratio; do
	case $bad in
	gate) want="two activations must have the same shape" ;;
	rows) want="supported: a scalar or one value per channel" ;;
	ratio) want="dropout needs 0 <= ratio < 1" ;;
	esac
	if out=$("$TRAIN" "$T/resnets/badop-$bad.onnx" - - 0 0 0 2>&1); then
		fail "badop-$bad.onnx loads: $out"
	fi
	case $out in
	*"badop-$bad.onnx: node "*"$want"*) echo "badop-$bad: $out" ;;
	*) fail "badop-$bad.onnx: $out (expected \"$want\")" ;;
	esac
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "badop-$bad: more than one line"
done
ok "a squeeze-excitation gate, a per-row constant and dropout 1.0 are refused, saying why"

# The int64 evaluator against numpy: each fold-*.onnx computes a tensor
# with Slice (negative and clamped steps), Transpose, Gather, Unsqueeze,
# Squeeze, Concat, Mul/Sub/Add with broadcasting, ConstantOfShape, Reshape,
# Shape with start/end, Cast, or F.pad's whole pads chain, and every value's
# difference from numpy's gates a Reshape of the activation: the file loads
# only when the loader computed every value right.  The mutants expect one
# value off by one and must be refused at that Reshape.
mkdir "$T/fold"
"$PY" "$REF" fold "$T/fold" 2>"$T/fold.err" || fail "fold: $(tail -n 3 "$T/fold.err")"
n=0
for f in "$T"/fold/fold-*.onnx; do
	name=$(basename "$f" .onnx)
	case $name in
	fold-mutant-*)
		if out=$("$TRAIN" "$f" - - 0 0 0 2>&1); then
			fail "$name loads: the gate did not catch a wrong value"
		fi
		case $out in
		*"does not hold the 192 values per sample"*) ;;
		*) fail "$name: $out" ;;
		esac ;;
	*)
		out=$("$TRAIN" "$f" - - 0 0 0 2>&1) || fail "$name: $out"
		n=$((n + 1)) ;;
	esac
done
[ "$n" -eq 14 ] || fail "$n fold cases, expected 14"
ok "14 int64 computations fold to numpy's values; 2 off-by-one expectations are caught"
