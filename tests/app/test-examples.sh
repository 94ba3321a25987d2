#!/bin/sh
# The two examples a newcomer starts from (examples/): each export script
# runs (small: 1024 Fashion-MNIST images; a narrow ResNet-18 on 512 made-up
# CIFAR-shaped images), writes model.onnx, the four .npy files and a job
# file that spotdeck accepts, and the model trains from them.  The Fashion
# CNN's multiply-adds must be those of the built-in cnn it copies
# (engine/model.h), the ResNet-18's job must ask for crop4+flip with
# CIFAR-10's normalisation, and every first loss must be that of an
# untrained 10-class model (about ln 10).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
PY=/usr/bin/python3
$PY -c 'import torch, numpy' 2>/dev/null || { echo "SKIP: $PY cannot import torch and numpy (Debian: python3-torch, python3-numpy)" >&2; exit 77; }
[ -d "$FMNIST" ] || { echo "SKIP: $FMNIST missing (Debian package dataset-fashion-mnist)" >&2; exit 77; }
EX="$top_srcdir/examples"

$PY "$EX/fashion-cnn/export.py" --out "$T/f" --train-samples 1024 >"$T/f.out" 2>&1 || { cat "$T/f.out" >&2; fail "fashion-cnn/export.py failed"; }
$PY "$EX/cifar-resnet18/export.py" --out "$T/r" --train-samples 512 --test-samples 256 --width 16 >"$T/r.out" 2>&1 ||
	{ cat "$T/r.out" >&2; fail "cifar-resnet18/export.py failed"; }
for f in f/model.onnx f/data/train_x.npy f/data/test_y.npy f/job.json r/model.onnx r/data/train_x.npy r/job.json; do
	[ -s "$T/$f" ] || fail "the examples did not write $f"
done

# Each job file is accepted by spotdeck's own checks (graph, data, shapes):
# plan reads it without starting anything.
for d in f r; do
	"$top_builddir/spotdeck" plan --job "$T/$d/job.json" >"$T/plan.out" 2>&1 ||
		{ cat "$T/plan.out" >&2; fail "spotdeck plan refused the $d example's job"; }
done
$PY - "$T/r/job.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
want = {"model": "model.onnx", "dataset": "npy", "augment": "crop4+flip",
        "normalize": {"mean": [0.4914, 0.4822, 0.4465], "std": [0.247, 0.2435, 0.2616]}}
for k, v in want.items():
    if j.get(k) != v:
        print("FAIL: ResNet-18 job: %s is %r, expected %r" % (k, j.get(k), v)); sys.exit(1)
PY

train() {   # train NAME ARGS...: 3 standalone steps; prints the done line
	"$WORKER" --standalone --threads 1 --max-steps 3 --dataset npy "$@" >"$T/train.out" 2>"$T/train.err" ||
		{ cat "$T/train.err" >&2; fail "training the example's model failed: $*"; }
}
check() {   # check NAME FLOPS|-: the first loss near ln 10, 3 steps, FLOPs if given
	$PY - "$T/train.out" "$1" "$2" <<'PY' || exit 1
import json, math, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
done = [e for e in ev if e["type"] == "done"][-1]
ep = [e for e in ev if e["type"] == "epoch"][-1]
if done["steps"] != 3:
    print("FAIL: %s: %d steps, expected 3" % (sys.argv[2], done["steps"])); sys.exit(1)
if not abs(ep["train_loss"] - math.log(10)) < 0.5:
    print("FAIL: %s: first steps' loss %g, an untrained 10-class model gives about %.3f" % (sys.argv[2], ep["train_loss"], math.log(10))); sys.exit(1)
if sys.argv[3] != "-" and done["flops_per_image"] != int(sys.argv[3]):
    print("FAIL: %s: %d FLOPs per image, expected %s" % (sys.argv[2], done["flops_per_image"], sys.argv[3])); sys.exit(1)
print("ok: %s: 3 steps, loss %.4f, %.1f MFLOPs per image" % (sys.argv[2], ep["train_loss"], done["flops_per_image"] / 1e6))
PY
}
train --model "$T/f/model.onnx" --data-dir "$T/f/data" --normalize 0.2860/0.3530
# engine/model.h's cnn: 2 FLOPs per multiply-add, backward twice forward.
check "Fashion CNN" $((6 * (28 * 28 * 32 * 25 + 14 * 14 * 64 * 32 * 25 + 3136 * 128 + 128 * 10)))
train --model "$T/r/model.onnx" --data-dir "$T/r/data" --augment crop4+flip \
	--normalize 0.4914,0.4822,0.4465/0.2470,0.2435,0.2616
check "ResNet-18 (width 16)" -
