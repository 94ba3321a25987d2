#!/bin/sh
# Bad input to the worker: a one-line error naming the file and the problem
# (each pattern names both, never the file alone), exit status 1, no crash.
. "$(dirname "$0")/../lib.sh"
tmpdir
W="$WORKER --standalone --threads 1 --max-steps 2"

expect_error "missing dataset directory" "$T/nope: no such directory" \
	$W --data-dir "$T/nope"

mkdir "$T/trunc"
cp "$FMNIST"/*.gz "$T/trunc/"
gzip -dc "$FMNIST/train-images-idx3-ubyte.gz" | head -c 100000 | gzip -c >"$T/trunc/train-images-idx3-ubyte.gz"
expect_error "truncated IDX images" "train-images-idx3-ubyte\.gz: truncated: expected 47040000 bytes of image data, got [0-9]+" $W --data-dir "$T/trunc"

mkdir "$T/magic"
cp "$FMNIST"/*.gz "$T/magic/"
{ printf '\000\000\010\004'; gzip -dc "$FMNIST/t10k-labels-idx1-ubyte.gz" | tail -c +5; } | gzip -c >"$T/magic/t10k-labels-idx1-ubyte.gz"
expect_error "wrong IDX magic" "t10k-labels-idx1-ubyte\.gz: wrong magic 0x00000804, expected 0x00000801" $W --data-dir "$T/magic"

mkdir "$T/cifar"
head -c 3073 /dev/zero >"$T/cifar/data_batch_1.bin"
expect_error "short CIFAR-10 file" "data_batch_1\.bin: wrong length: 1 records, expected 10000" \
	$W --dataset cifar10 --data-dir "$T/cifar"

# The optimizer's options: one line naming the option and the value, and
# the usage error's exit status 2.
EXPECT_RC=2 expect_error "unknown optimizer" "--optimizer: expected sgd or adamw, got 'adam'" $W --optimizer adam
EXPECT_RC=2 expect_error "beta2 of 1" "--betas: expected B1,B2 each in \[0, 1\), got '0\.9,1'" $W --betas 0.9,1
EXPECT_RC=2 expect_error "one beta" "--betas: expected B1,B2 each in \[0, 1\), got '0\.9'" $W --betas 0.9
EXPECT_RC=2 expect_error "negative eps" "--eps: expected a number in \[0, 1\], got '-1e-8'" $W --eps -1e-8
EXPECT_RC=2 expect_error "clip norm 0" "--clip-grad-norm: must be positive, got '0'" $W --clip-grad-norm 0
EXPECT_RC=2 expect_error "negative clip norm" "--clip-grad-norm: expected a number in \[0, 1e\+06\], got '-1'" \
	$W --clip-grad-norm -1

$W --model mlp --checkpoint-dir "$T/ck" >/dev/null 2>"$T/err" || { cat "$T/err"; fail "mlp run"; }
expect_error "checkpoint from another model" "latest\.sdckpt: checkpoint is of model 'mlp', this run trains 'cnn'" \
	$W --model cnn --resume "$T/ck"

cp "$T/ck/latest.sdckpt" "$T/flip.sdckpt"
size=$(stat -c %s "$T/flip.sdckpt")
# Flip one byte in the middle of the parameters.
off=$((size / 2))
python3 - "$T/flip.sdckpt" "$off" <<'PY'
import sys
path, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read()); b[off] ^= 0x40
open(path, "wb").write(b)
PY
expect_error "checkpoint with one byte flipped" "flip\.sdckpt: section .params. CRC mismatch" $W --model mlp --resume "$T/flip.sdckpt"

EXPECT_RC=2 expect_error "bad number" "--batch: expected an integer in \[1, [0-9]+\], got 'x'" $W --batch x
EXPECT_RC=2 expect_error "unknown option" "unknown option '--bogus'" $W --bogus
EXPECT_RC=2 expect_error "bad --notice" "--notice: expected auto, gce, aws, azure or none, got 'ibm'" $W --notice ibm
expect_error "unknown model" "unknown model 'vgg'" $W --model vgg

# The npy dataset: a worker checks the files as it loads them.
mkdir "$T/npy"
printf 'PK\003\004 not numpy' >"$T/npy/train_x.npy"
expect_error "npy: wrong magic" "train_x\.npy: wrong magic: not a \.npy file" \
	$W --model mlp --dataset npy --data-dir "$T/npy"
EXPECT_RC=2 expect_error "bad --layout" "--layout: expected NCHW or NHWC, got 'CHW'" $W --layout CHW
EXPECT_RC=2 expect_error "bad --normalize" "--normalize: expected MEAN\[,MEAN...\]/STD\[,STD...\]" \
	$W --normalize 0.5,0.5/0.2
EXPECT_RC=2 expect_error "bad --augment" "--augment: expected none or crop4\+flip, got 'mixup'" $W --augment mixup
