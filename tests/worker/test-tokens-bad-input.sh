#!/bin/sh
# Dataset "tokens" (engine/tokens.h files, "block_size") is checked when
# spotdeck reads the job, before any run directory, worker or server: each
# mistake is one line naming the job file and the token file or field, exit
# 1, no run directory left; spotdeck doctor says the same on its data line.
# The checks that need a language model the engine can load (token ids
# against its vocabulary, block_size against its time dimension, an image
# dataset given to it) run when the engine accepts examples/char-gpt's
# export (the graph lowering of GPTs); until then they are skipped with a
# note, and the rest still runs.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
SPOTDECK="$top_builddir/spotdeck"
GEN="$top_builddir/tests/engine/onnx-gen"

# tokens FILE llmc|raw|magic=M COUNT [FIRST_ID]: COUNT uint16 ids i % 50 +
# FIRST_ID, with llm.c's 256-int32 header (magic M), or headerless.
tokens() {
	python3 - "$@" <<'PY'
import struct, sys
path, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
ids = struct.pack("<%dH" % n, *[(i % 50) + first for i in range(n)])
if kind == "raw":
    head = b""
else:
    magic = 20240520 if kind == "llmc" else int(kind.split("=")[1])
    head = struct.pack("<256i", *([magic, 1, n] + [0] * 253))
open(path, "wb").write(head + ids)
PY
}
job() {   # job FILE JSON-BODY: the job, with the sim provider's defaults
	printf '{%s}' "$2" >"$1"
}
refused() {   # refused DESC PATTERN JOB: spotdeck refuses it, nothing left behind
	expect_error "$1" "$2" $SPOTDECK --headless --job "$3" --run-dir "$T/run"
	[ ! -e "$T/run" ] || fail "$1: a run directory was left"
}

mkdir "$T/d"
tokens "$T/d/train.bin" llmc 4000
tokens "$T/d/val.bin" llmc 1000
"$GEN" "$T/img.onnx" 28 28 10 || fail "onnx-gen"

job "$T/j1.json" "\"model\":\"$T/img.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/d\""
refused "tokens without block_size" \
	"j1\.json: block_size: dataset tokens needs the sequence length" "$T/j1.json"
job "$T/j2.json" '"model":"cnn","dataset":"fashion-mnist","block_size":64'
refused "block_size with an image dataset" \
	"j2\.json: block_size: only for dataset tokens \(fashion-mnist holds images\)$" "$T/j2.json"
job "$T/j3.json" "\"model\":\"cnn\",\"dataset\":\"tokens\",\"data_dir\":\"$T/d\",\"block_size\":16"
refused "tokens with a built-in image model" \
	"j3\.json: model: cnn is an image model; dataset tokens needs a language model" "$T/j3.json"
job "$T/j4.json" "\"model\":\"$T/img.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/d\",\"block_size\":16"
refused "tokens with an ONNX image model" \
	"j4\.json: .*img\.onnx: an image model \(1x28x28 inputs\); dataset tokens needs a language model$" \
	"$T/j4.json"

mkdir "$T/e"
tokens "$T/e/val.bin" llmc 1000
job "$T/j5.json" "\"model\":\"$T/img.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/e\",\"block_size\":16"
refused "a missing train.bin" "j5\.json: .*/e/train\.bin: .*[Nn]o such file" "$T/j5.json"
tokens "$T/e/train.bin" magic=20240521 4000
refused "a wrong magic" "j5\.json: .*/e/train\.bin: .*magic" "$T/j5.json"
tokens "$T/e/train.bin" raw 4000
printf 'x' >>"$T/e/train.bin"
refused "an odd length" "j5\.json: .*/e/train\.bin: 8001 bytes, an odd number" "$T/j5.json"
tokens "$T/e/train.bin" llmc 4000
tokens "$T/e/val.bin" raw 10
refused "too few tokens for a window" \
	"j5\.json: .*/e/val\.bin: 10 tokens, fewer than block_size \+ 1 = 17" "$T/j5.json"
tokens "$T/e/val.bin" raw 1000
job "$T/j6.json" "\"model\":\"$T/img.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/e\",\"block_size\":16,\"global_batch\":300"
refused "a global batch over an epoch's windows" \
	"j6\.json: global_batch: 300 is more than the 250 windows of 16 tokens in .*/e/train\.bin$" \
	"$T/j6.json"

# spotdeck doctor: the same line on its data check, exit 1.
tokens "$T/e/train.bin" magic=20240521 4000
job "$T/doc.json" "\"model\":\"$T/img.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/e\",\"block_size\":16,\"provider\":{\"name\":\"gce\",\"project\":\"p1\",\"zones\":[\"us-central1-a\"],\"credentials\":\"$T/none.json\"}"
$SPOTDECK doctor "$T/doc.json" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] || fail "doctor on a bad train.bin: exit status $rc, expected 1"
grep -Eq "^FAIL +data: .*/e/train\.bin: .*magic" "$T/out" ||
	{ cat "$T/out" "$T/err" >&2; fail "doctor: no FAIL data line for the wrong magic"; }
ok "doctor: $(grep 'data:' "$T/out")"

# The checks against a language model: examples/char-gpt's GPT, small.
if ! /usr/bin/python3 -c 'import torch, onnx' 2>/dev/null; then
	echo "note: no torch/onnx for /usr/bin/python3: the language-model checks are skipped" >&2
	exit 0
fi
/usr/bin/python3 - "$top_srcdir/examples/char-gpt" "$T/gpt.onnx" <<'PY' || fail "GPT export"
import sys, torch
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/..")
from model import GPT, GPTConfig
from export import export
torch.manual_seed(1)
export(GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=16)), sys.argv[2])
PY
mkdir "$T/g"
tokens "$T/g/train.bin" llmc 4000
tokens "$T/g/val.bin" llmc 1000
job "$T/good.json" "\"model\":\"$T/gpt.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/g\",\"block_size\":16,\"global_batch\":8,\"provider\":{\"name\":\"gce\",\"project\":\"p1\",\"zones\":[\"us-central1-a\"],\"credentials\":\"$T/none.json\"}"
$SPOTDECK doctor "$T/good.json" >"$T/out" 2>"$T/err"
if ! grep -Eq "^ok +model: .*gpt\.onnx: .*a language model of block_size 16, vocabulary 64" "$T/out"; then
	echo "note: the engine does not take the GPT yet ($(grep 'model:' "$T/out")): the language-model checks are skipped" >&2
	exit 0
fi
ok "doctor: $(grep 'model:' "$T/out")"
tokens "$T/g/val.bin" llmc 1000 20   # ids up to 69 against a vocabulary of 64
refused "a token id beyond the vocabulary" \
	"good\.json: .*/g/val\.bin: token 64 at position 44 is not below the model's vocabulary of 64" \
	"$T/good.json"
tokens "$T/g/val.bin" llmc 1000
job "$T/j7.json" "\"model\":\"$T/gpt.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/g\",\"block_size\":32,\"global_batch\":8"
refused "block_size beyond the position table" \
	"j7\.json: block_size: 32 is more than the 16 positions .*gpt\.onnx holds" "$T/j7.json"
job "$T/j8.json" "\"model\":\"$T/gpt.onnx\",\"dataset\":\"tokens\",\"data_dir\":\"$T/g\",\"block_size\":8,\"global_batch\":8"
refused "block_size short of the model's time dimension" \
	"j8\.json: block_size: 8, but .*gpt\.onnx takes sequences of 16 tokens" "$T/j8.json"
job "$T/j9.json" "\"model\":\"$T/gpt.onnx\",\"dataset\":\"synthetic\""
refused "an image dataset with a language model" \
	"j9\.json: .*gpt\.onnx: a language model \(sequences of 16 tokens\); dataset synthetic holds images" \
	"$T/j9.json"
exit 0
