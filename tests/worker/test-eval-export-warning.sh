#!/bin/sh
# A model exported in eval mode (torch.onnx.export's default) trains, but
# not as its author meant (no Dropout; BatchNorm exported in inference
# form; equal initializers merged and so trained as one): the start says
# so in one warning line, and a training-mode export of the same model
# gets none.  A small MLP with BatchNorm and Dropout on the synthetic set
# (3x32x32, 10 classes): spotdeck-worker --standalone prints the line on
# stderr; spotdeck --headless prints it and journals it in run_start
# (model_warning).  The char-GPT of examples/char-gpt (1 layer) exported in
# eval mode is told by its merged initializers (Identity aliases).
# Needs /usr/bin/python3 with torch and onnx (SKIP without them).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch, onnx' 2>/dev/null || { echo "SKIP: $PY cannot import torch and onnx (Debian: python3-torch, python3-onnx)" >&2; exit 77; }
tmpdir
$PY - "$top_srcdir/examples/char-gpt" "$T" <<'PYEOF' >"$T/export.out" 2>&1 || { cat "$T/export.out" >&2; fail "exports"; }
import sys, warnings, torch
warnings.simplefilter("ignore")
src, t = sys.argv[1], sys.argv[2]
torch.manual_seed(1)
# (A BatchNorm after a Conv would be fused into it by the eval export,
# leaving no sign; after a Linear it stays, in inference form.)
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 16), torch.nn.BatchNorm1d(16),
                          torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 10))
x = torch.zeros(2, 3, 32, 32)
for mode, name in ((torch.onnx.TrainingMode.TRAINING, "train"), (torch.onnx.TrainingMode.EVAL, "eval")):
    torch.onnx.export(net, x, "%s/bn-%s.onnx" % (t, name), training=mode, do_constant_folding=False,
                      opset_version=14, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
sys.path.insert(0, src); sys.path.insert(0, src + "/..")
from model import GPT, GPTConfig
from export import export
gpt = GPT(GPTConfig(block_size=16, vocab_size=256, n_layer=1, n_head=2, n_embd=32))
export(gpt, t + "/gpt-eval.onnx", training=False)
PYEOF

std() {
	_m=$1; shift
	"$WORKER" --standalone --model "$T/$_m.onnx" --threads 1 --log-every 0 --max-steps 1 "$@" \
		>"$T/$_m.out" 2>"$T/$_m.err"
	_rc=$?
	[ $_rc -eq 0 ] || { cat "$T/$_m.err" >&2; fail "$_m: exit status $_rc"; }
}
std bn-train --dataset synthetic --batch 16
[ -s "$T/bn-train.err" ] && { cat "$T/bn-train.err" >&2; fail "a training-mode export was warned about"; }
std bn-eval --dataset synthetic --batch 16
[ "$(wc -l <"$T/bn-eval.err")" -eq 1 ] &&
	grep -q "^spotdeck-worker: warning: $T/bn-eval.onnx: looks exported in eval mode (1 BatchNormalization node in inference form)" "$T/bn-eval.err" ||
	{ cat "$T/bn-eval.err" >&2; fail "the eval-mode MLP: not one warning line naming its BatchNormalization"; }
ok "standalone: $(cat "$T/bn-eval.err")"

# The GPT: token files of 4000 bytes of text, byte tokens.
$PY - "$T" <<'PYEOF' || fail "token files"
import struct, sys
text = bytes(range(32, 127)) * 50
for name, part in (("train", text[:4000]), ("val", text[4000:4700])):
    with open("%s/%s.bin" % (sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(part)] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(part), *part))
PYEOF
std gpt-eval --dataset tokens --data-dir "$T" --block-size 16 --batch 8
[ "$(wc -l <"$T/gpt-eval.err")" -eq 1 ] &&
	grep -q "^spotdeck-worker: warning: $T/gpt-eval.onnx: looks exported in eval mode ([0-9]* initializers merged into Identity aliases)" "$T/gpt-eval.err" ||
	{ cat "$T/gpt-eval.err" >&2; fail "the eval-mode GPT: not one warning line naming its merged initializers"; }
ok "standalone GPT: $(cat "$T/gpt-eval.err")"

# spotdeck --headless: the same line on stderr, and run_start's model_warning.
head_run() {
	printf '{"model": "%s/%s.onnx", "dataset": "synthetic", "synthetic_samples": 64, "global_batch": 16, "epochs": 1, "workers": 1, "threads_per_worker": 1, "log_every": 100}\n' "$T" "$1" >"$T/$1.json"
	timeout $((120 * ${SD_TIMEOUT_SCALE:-3})) "$top_builddir/spotdeck" --headless --job "$T/$1.json" --run-dir "$T/run-$1" \
		</dev/null >"$T/$1.journal" 2>"$T/$1.herr"
	_rc=$?
	[ $_rc -eq 0 ] || { tail -5 "$T/$1.herr" >&2; fail "spotdeck --headless $1: exit status $_rc"; }
}
head_run bn-train
grep -q "warning" "$T/bn-train.herr" && { cat "$T/bn-train.herr" >&2; fail "spotdeck warned about a training-mode export"; }
grep '"type":"run_start"' "$T/bn-train.journal" | grep -q model_warning && fail "run_start of a training-mode export has a model_warning"
head_run bn-eval
[ "$(grep -c "^spotdeck: warning: " "$T/bn-eval.herr")" -eq 1 ] || { cat "$T/bn-eval.herr" >&2; fail "spotdeck: not one warning line for the eval-mode MLP"; }
grep '"type":"run_start"' "$T/bn-eval.journal" | grep -q '"model_warning":"[^"]*bn-eval.onnx: looks exported in eval mode' ||
	fail "run_start of the eval-mode MLP has no model_warning: $(grep run_start "$T/bn-eval.journal")"
ok "spotdeck: $(grep "^spotdeck: warning: " "$T/bn-eval.herr")"
