#!/bin/sh
# Issue: `spotdeck-worker --standalone --model cnn --dataset fashion-mnist
# --epochs 3` reaches test accuracy >= 0.90 on the full 10,000-image test set.
. "$(dirname "$0")/../lib.sh"
tmpdir
[ -d "$FMNIST" ] || fail "$FMNIST missing (Debian package dataset-fashion-mnist)"
"$WORKER" --standalone --model cnn --dataset fashion-mnist --epochs 3 --threads 2 \
	>"$T/log" 2>"$T/err" || { cat "$T/err"; fail "worker exited $?"; }
cat "$T/log"
acc=$(json_field "$T/log" done test_accuracy) || fail "no done line"
steps=$(json_field "$T/log" done steps)
# 3 epochs of 60,000 images at batch 64, last partial batch dropped.
[ "$steps" = 2811 ] || fail "expected 2811 steps, got $steps"
python3 -c "import sys; sys.exit(0 if $acc >= 0.90 else 1)" || fail "test accuracy $acc < 0.90"
ok "cnn fashion-mnist 3 epochs: test accuracy $acc"
