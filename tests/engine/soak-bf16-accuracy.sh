#!/bin/sh
# bf16 does not cost accuracy (make soak, not make check: about 5 minutes on
# 2 loaded cores): the built-in cnn, 3 epochs on Fashion-MNIST, same seed,
# standalone, once in fp32 and once in bf16 (spotdeck-job(5) "precision");
# the test accuracies must be within 0.5 point of each other.  The cnn's
# second convolution (32->64, 5x5) runs on oneDNN and so in bf16; its first
# (one input channel) runs on im2col in fp32 either way (engine/layers.c's
# table).  SKIPs where oneDNN has no bf16 kernels or the data set is missing.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
[ -d "$FMNIST" ] || { echo "SKIP: $FMNIST missing (Debian package dataset-fashion-mnist)" >&2; exit 77; }
for p in fp32 bf16; do
	"$WORKER" --standalone --model cnn --epochs 3 --seed 1 --threads 1 --precision $p --log-every 0 \
		>"$T/$p.out" 2>"$T/$p.err" || {
		if grep -q "needs oneDNN with bf16 kernels" "$T/$p.err"; then
			echo "SKIP: $(cat "$T/$p.err")" >&2
			exit 77
		fi
		cat "$T/$p.err" >&2
		fail "training in $p failed"
	}
	grep '"type":"epoch"' "$T/$p.out"
done
[ "$(json_field "$T/bf16.out" done precision)" = bf16 ] || fail "the bf16 run did not run in bf16"
f=$(json_field "$T/fp32.out" done test_accuracy)
b=$(json_field "$T/bf16.out" done test_accuracy)
awk -v f="$f" -v b="$b" 'BEGIN { d = b - f; if (d < 0) d = -d; exit !(d <= 0.005) }' ||
	fail "cnn, 3 epochs: bf16 test accuracy $b, fp32 $f: more than 0.5 point apart"
ok "cnn, 3 epochs, seed 1: test accuracy fp32 $f, bf16 $b (within 0.5 point)"
