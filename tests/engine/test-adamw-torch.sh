#!/bin/sh
# AdamW with gradient-norm clipping trains to the same numbers in spotdeck
# as in PyTorch 1.13 (torch.optim.AdamW, foreach=False, after
# torch.nn.utils.clip_grad_norm_): an MLP exported to ONNX, 30 steps from
# the file's weights on the same batches, every step's loss and gradient
# norm (before clipping) and the final parameters within the drift band of
# PyTorch runs nudged by 1 ulp (tests/engine/onnx_torch_ref.py, variant "adamw",
# says the bounds), with the clip acting on some steps and not on others,
# and the learning rate on the trainer's warm-up + cosine schedule
# (sd_lr_at) against torch's LambdaLR of the same formula.
# onnx-train runs sd_optim_step, the trainer's own CPU step.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: no /usr/bin/python3" >&2; exit 77; }
"$PY" -c 'import torch, onnx' 2>/dev/null ||
	{ echo "SKIP: /usr/bin/python3 cannot import torch and onnx (Debian: python3-torch, python3-onnx)" >&2; exit 77; }
tmpdir
REF="$top_srcdir/tests/engine/onnx_torch_ref.py"
TRAIN="$top_builddir/tests/engine/onnx-train"
set -- $("$PY" "$REF" prepare "$T" adamw 2>"$T/prepare.err" | tail -n 1) ||
	fail "export: $(tail -n 3 "$T/prepare.err")"
for kv in "$@"; do eval "$kv"; done
[ "$OPTIMIZER" = adamw ] && [ -n "$CLIP" ] && [ -n "$WARMUP" ] ||
	fail "export printed no AdamW settings: $(tail -n 3 "$T/prepare.err")"
"$TRAIN" "$T/model.onnx" "$T/batches.bin" "$T/out.txt" "$LR" "$MOMENTUM" "$WEIGHT_DECAY" \
	"$OPTIMIZER" "$BETA1" "$BETA2" "$EPS" "$CLIP" "$WARMUP" 2>"$T/train.err" ||
	fail "onnx-train failed: $(cat "$T/train.err")"
"$PY" "$REF" compare "$T" adamw || fail "spotdeck's AdamW + clipping differs from PyTorch's"
ok "AdamW (betas $BETA1,$BETA2, eps $EPS, weight decay $WEIGHT_DECAY) + clip_grad_norm $CLIP, warm-up $WARMUP then cosine: 30 steps as PyTorch's"
