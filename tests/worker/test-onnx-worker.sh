#!/bin/sh
# spotdeck-worker trains an ONNX file (--model PATH.onnx, or "model" in a
# job file) on Fashion-MNIST: the loss falls, and the done line names the
# file.  A model whose input shape or classes differ from the dataset's is
# refused with one line naming the file and both shapes, and a checkpoint
# resumes only with the same file (its SHA-256).  The model is
# tests/engine/onnx-gen.h's tiny CNN (no Python needed).
. "$(dirname "$0")/../lib.sh"
[ -d "$FMNIST" ] || { echo "SKIP: no $FMNIST (Debian: dataset-fashion-mnist)" >&2; exit 77; }
tmpdir
GEN="$top_builddir/tests/engine/onnx-gen"
"$GEN" "$T/tiny.onnx" 28 28 10 || fail "onnx-gen"
"$WORKER" --standalone --threads 1 --model "$T/tiny.onnx" --epochs 1 --max-steps 300 \
	--log-every 20 --lr 0.2 >"$T/out" 2>"$T/err" || fail "training: $(cat "$T/err")"
python3 - "$T/out" "$T/tiny.onnx" <<'PY' || exit 1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
steps = [e for e in ev if e["type"] == "step"]
done = [e for e in ev if e["type"] == "done"]
if not done or done[0]["model"] != sys.argv[2] or done[0]["steps"] != 300:
    sys.exit("FAIL: no done line for %s after 300 steps: %s" % (sys.argv[2], done))
first, last = steps[0]["loss"], sum(e["loss"] for e in steps[-3:]) / 3
print("ok: loss %.3f at step %d, %.3f over the last 3 logs; test accuracy %.3f"
      % (first, steps[0]["step"], last, done[0]["test_accuracy"]))
# Two filters and a 2x10 classifier: far from a good model, far from chance.
if not last < 0.85 * first or done[0]["test_accuracy"] < 0.2:
    sys.exit("FAIL: the ONNX model did not learn")
PY

# Checkpoints record the file's SHA-256: a resume with the same file goes
# on, one with another file at the same path (the same network exported
# again) is refused.
"$WORKER" --standalone --threads 1 --model "$T/tiny.onnx" --max-steps 5 \
	--checkpoint-dir "$T/ck" >/dev/null 2>"$T/err" || fail "checkpointed run: $(cat "$T/err")"
sha=$(sha256sum "$T/tiny.onnx" | cut -d' ' -f1)
"$WORKER" --standalone --threads 1 --model "$T/tiny.onnx" --max-steps 8 \
	--resume "$T/ck" >"$T/out" 2>"$T/err" || fail "resume: $(cat "$T/err")"
grep -q '"type":"done".*"steps":8' "$T/out" || fail "resume did not go on to step 8: $(tail -n 1 "$T/out")"
"$GEN" "$T/tiny.onnx" 28 28 10 "exported again" || fail "onnx-gen"
new=$(sha256sum "$T/tiny.onnx" | cut -d' ' -f1)
"$WORKER" --standalone --threads 1 --model "$T/tiny.onnx" --max-steps 8 \
	--resume "$T/ck" >/dev/null 2>"$T/err" && fail "resumed with another model file"
short=$(printf %.12s "$sha"); new_short=$(printf %.12s "$new")
grep -q "checkpoint is of model file $T/tiny.onnx (SHA-256 $short), this run's $T/tiny.onnx has SHA-256 $new_short\$" "$T/err" ||
	fail "changed model file: $(cat "$T/err")"
ok "resume refused after the file changed: $(cat "$T/err")"

"$GEN" "$T/small.onnx" 14 14 10 || fail "onnx-gen"
"$WORKER" --standalone --threads 1 --model "$T/small.onnx" --max-steps 1 >/dev/null 2>"$T/err" &&
	fail "a 14x14 model trained on 28x28 images"
grep -q "^spotdeck-worker: $T/small.onnx: the model takes 1x14x14 inputs and gives 10 classes; dataset fashion-mnist has 1x28x28 images and 10 classes$" "$T/err" ||
	fail "mismatch error: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "mismatch error is not one line: $(cat "$T/err")"
ok "shape mismatch refused: $(cat "$T/err")"

printf 'not a model' >"$T/junk.onnx"
"$WORKER" --standalone --threads 1 --model "$T/junk.onnx" --max-steps 1 >/dev/null 2>"$T/err" &&
	fail "junk trained"
grep -q "junk.onnx: not an ONNX model" "$T/err" || fail "junk error: $(cat "$T/err")"
ok "junk refused: $(cat "$T/err")"
