#!/bin/sh
# The npy dataset end to end: Fashion-MNIST converted to .npy by numpy
# (numpy.save, the way a user brings arrays) trains to the very same
# parameters as the built-in fashion-mnist loader with the same seed.
# Why bit for bit: uint8 pixels with the built-in constants (normalize
# 0.2860 / 0.3530, engine/data.c) go through the same float expression,
# (p / 255 - mean) / std, so every image is the same floats; the labels and
# sample count are the same, hence the same shuffle, model and steps.  A
# float32 copy holding p / 255 (numpy's float32 division is IEEE's, as C's)
# in NHWC order and .npy version 3.0 must match too.  Short: 40 steps.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || {
	echo "SKIP: $FMNIST not installed (Debian package dataset-fashion-mnist)" >&2; exit 77; }
$PY -c 'import numpy' 2>/dev/null || {
	echo "SKIP: numpy not importable by $PY (Debian package python3-numpy)" >&2; exit 77; }
tmpdir
mkdir "$T/u8" "$T/f32"
$PY - "$FMNIST" "$T" <<'PYEOF' || fail "converting Fashion-MNIST to .npy"
import gzip, sys
import numpy as np
src, out = sys.argv[1:3]
def idx(name, offset):
    with gzip.open("%s/%s.gz" % (src, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
for split, base in (("train", "train"), ("test", "t10k")):
    x = idx(base + "-images-idx3-ubyte", 16).reshape(-1, 28, 28)
    y = idx(base + "-labels-idx1-ubyte", 8)
    # uint8 (n, h, w), format 1.0; labels as int64, numpy's default integer.
    np.save("%s/u8/%s_x.npy" % (out, split), x)
    np.save("%s/u8/%s_y.npy" % (out, split), y.astype(np.int64))
    # float32 p / 255 as (n, h, w, 1), format 3.0; labels int32.
    f = (x.astype(np.float32) / np.float32(255))[..., np.newaxis]
    with open("%s/f32/%s_x.npy" % (out, split), "wb") as fh:
        np.lib.format.write_array(fh, f, version=(3, 0))
    np.save("%s/f32/%s_y.npy" % (out, split), y.astype(np.int32))
PYEOF

run() {
	_out=run-$1; shift
	"$WORKER" --standalone --model cnn --threads 2 --seed 3 --log-every 1 --max-steps 40 "$@" \
		>"$T/$_out" 2>"$T/$_out.err" || { cat "$T/$_out.err" >&2; fail "$_out: exit status $?"; }
	grep '"type":"step"' "$T/$_out" >"$T/$_out.steps"
	[ "$(wc -l <"$T/$_out.steps")" -eq 40 ] || fail "$_out: $(wc -l <"$T/$_out.steps") step lines, want 40"
}
run builtin --dataset fashion-mnist
run u8 --dataset npy --data-dir "$T/u8" --normalize 0.2860/0.3530
run f32 --dataset npy --data-dir "$T/f32" --layout NHWC --normalize 0.2860/0.3530

acc=$(json_field "$T/run-builtin" done test_accuracy) || fail "built-in: no done line"
sum=$(json_field "$T/run-builtin" done param_checksum) || fail "built-in: no checksum"
# Forty steps of the CNN reach about 0.7; chance is 0.1.
python3 -c "import sys; sys.exit(0 if float('$acc') > 0.5 else 1)" ||
	fail "built-in fashion-mnist: test accuracy $acc after 40 steps, expected > 0.5"
for v in u8 f32; do
	cmp -s "$T/run-builtin.steps" "$T/run-$v.steps" ||
		{ diff "$T/run-builtin.steps" "$T/run-$v.steps" | head -4; fail "$v: step losses differ from fashion-mnist"; }
	[ "$(json_field "$T/run-$v" done dataset)" = npy ] || fail "$v: the done line names no npy dataset"
	a=$(json_field "$T/run-$v" done test_accuracy) || fail "$v: no done line"
	s=$(json_field "$T/run-$v" done param_checksum) || fail "$v: no checksum"
	[ "$a" = "$acc" ] || fail "$v: test accuracy $a, fashion-mnist $acc"
	[ "$s" = "$sum" ] || fail "$v: parameter checksum $s, fashion-mnist $sum"
	ok "npy $v: 40 step losses, test accuracy $a and checksum $s bit-identical to fashion-mnist"
done

# Without the normalisation the inputs differ, and so must the first loss
# (the comparison above can fail).
head -1 "$T/run-builtin.steps" >"$T/first"
"$WORKER" --standalone --model cnn --threads 2 --seed 3 --log-every 1 --max-steps 1 \
	--dataset npy --data-dir "$T/u8" >"$T/raw" 2>&1 || fail "unnormalised run: $(cat "$T/raw")"
grep '"type":"step"' "$T/raw" >"$T/raw.steps"
[ "$(wc -l <"$T/raw.steps")" -eq 1 ] || fail "unnormalised run: no step line"
cmp -s "$T/raw.steps" "$T/first" && fail "unnormalised npy gave the normalised first loss"
ok "without normalize the first loss differs"

# Augmentation: crop4+flip trains and changes the batches.
"$WORKER" --standalone --model cnn --threads 2 --seed 3 --log-every 1 --max-steps 1 \
	--dataset npy --data-dir "$T/u8" --normalize 0.2860/0.3530 --augment crop4+flip >"$T/aug" 2>&1 ||
	fail "augmented run: $(cat "$T/aug")"
grep '"type":"step"' "$T/aug" >"$T/aug.steps"
[ "$(wc -l <"$T/aug.steps")" -eq 1 ] || fail "augmented run: no step line"
cmp -s "$T/aug.steps" "$T/first" && fail "crop4+flip gave the unaugmented first loss"
ok "crop4+flip: first loss $(sed 's/.*"loss":\([^,]*\).*/\1/' "$T/aug.steps") vs $(sed 's/.*"loss":\([^,]*\).*/\1/' "$T/first")"

# Elastic: two local workers under spotdeck --headless train on a 2048-sample
# npy subset; each evaluates its half of the mapped test set and the halves
# are summed (src/worker/worker-agent.c), so the accuracy must be a real one.
mkdir "$T/small"
$PY - "$T" <<'PYEOF' || fail "writing the subset"
import sys
import numpy as np
t = sys.argv[1]
for split, n in (("train", 2048), ("test", 500)):
    x = np.load("%s/u8/%s_x.npy" % (t, split), mmap_mode="r")[:n]
    y = np.load("%s/u8/%s_y.npy" % (t, split))[:n]
    np.save("%s/small/%s_x.npy" % (t, split), np.ascontiguousarray(x))
    np.save("%s/small/%s_y.npy" % (t, split), y)
PYEOF
printf '{"model":"mlp","dataset":"npy","data_dir":"%s","normalize":{"mean":[0.286],"std":[0.353]},"epochs":1,"workers":2,"min_workers":2,"provider":{"name":"sim","boot_scale":0.01}}' \
	"$T/small" >"$T/elastic.json"
timeout 300 "$top_builddir/spotdeck" --headless --job "$T/elastic.json" --run-dir "$T/run" >"$T/journal" 2>"$T/elastic.err" ||
	{ tail -5 "$T/elastic.err" >&2; fail "spotdeck --headless on npy: exit status $?"; }
steps=$(json_field "$T/journal" done steps) || fail "elastic: no done event"
eacc=$(json_field "$T/journal" done test_accuracy) || fail "elastic: no test accuracy"
[ "$steps" -eq 32 ] || fail "elastic: $steps steps, expected 32 (2048 / 64)"
grep -q '"world_size":2' "$T/journal" || fail "elastic: no generation of two workers"
python3 -c "import sys; sys.exit(0 if 0.6 < float('$eacc') <= 1 else 1)" ||
	fail "elastic npy: test accuracy $eacc after 32 mlp steps, expected 0.6 to 1"
ok "spotdeck --headless, 2 workers on npy: 32 steps, test accuracy $eacc"
