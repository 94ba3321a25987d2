#!/bin/sh
# A language model trains elastically end to end: examples/char-gpt's GPT
# (small: 1 layer, 2 heads, 32 channels, block 16, vocabulary 64) exported
# by its export.py, token files in llm.c's format, two local workers under
# spotdeck --headless.  The first step's loss is the uniform guess's ln 64
# (the export's initial weights give near-uniform logits), the loss falls
# on a corpus with structure, the journal's run_start says the unit is
# tokens (and each step carries tokens_per_sec, neither images_per_sec
# nor an accuracy), and every evaluation (epoch events) and the done event carry
# val_loss and perplexity = exp(val_loss) instead of an accuracy.
# Needs the engine to lower a GPT (sd_model_seq_len > 0) and /usr/bin/python3
# with torch and onnx (SKIP without them).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch, onnx' 2>/dev/null || { echo "SKIP: no torch/onnx for $PY" >&2; exit 77; }
tmpdir
$PY - "$top_srcdir/examples/char-gpt" "$T" <<'PYEOF' || fail "GPT export or token files"
import struct, sys, torch
src, t = sys.argv[1], sys.argv[2]
sys.path.insert(0, src)
sys.path.insert(0, src + "/..")
from model import GPT, GPTConfig
from export import export
torch.manual_seed(1)
export(GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=32)),
       t + "/gpt.onnx")
# A corpus with structure: words of a small alphabet in a fixed order, so
# that the next token is mostly predictable from the previous ones.
words = [[(7 * w + k) % 60 + 1 for k in range(2 + w % 5)] + [0] for w in range(23)]
def corpus(n, start):
    out, w = [], start
    while len(out) < n:
        out += words[w % 23]
        w = (w * 5 + 3) % 23
    return out[:n]
for name, n, start in (("train", 8000, 1), ("val", 2000, 2)):
    ids = corpus(n, start)
    with open("%s/%s.bin" % (t, name), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, n] + [0] * 253)))
        f.write(struct.pack("<%dH" % n, *ids))
PYEOF
cat >"$T/job.json" <<EOF
{"model": "$T/gpt.onnx", "dataset": "tokens", "data_dir": "$T", "block_size": 16,
 "global_batch": 16, "epochs": 2, "optimizer": "adamw", "lr": 0.01, "weight_decay": 0.0,
 "warmup_steps": 0, "schedule": "constant", "eval_batch": 16, "log_every": 1,
 "workers": 2, "min_workers": 2, "provider": {"name": "sim", "boot_scale": 0.01}}
EOF
mkdir "$T/samples"
SD_TEST_SAMPLE_LOG="$T/samples" timeout 300 "$top_builddir/spotdeck" --headless --job "$T/job.json" --run-dir "$T/run" \
	</dev/null >"$T/journal" 2>"$T/err"
rc=$?
[ "$rc" -eq 0 ] || { tail -5 "$T/err" >&2; fail "spotdeck --headless on tokens: exit status $rc"; }
$PY - "$T/journal" "$T/samples" <<'PYEOF' || exit 1
import json, math, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
kind = lambda k: [e for e in ev if e.get("type") == k]
start, steps, evals, done = kind("run_start"), kind("step"), kind("epoch"), kind("done")
if not start or start[0].get("unit") != "tokens":
    sys.exit("FAIL: run_start does not say unit tokens: %s" % start[:1])
# 8000 tokens / 16 = 500 windows per epoch, / 16 = 31 steps, 2 epochs.
if not done or done[0]["steps"] != 62:
    sys.exit("FAIL: no done event after 62 steps: %s" % done)
for e in steps:
    if not e.get("tokens_per_sec", -1) > 0 or "images_per_sec" in e or "train_accuracy" in e:
        sys.exit("FAIL: step %d: tokens_per_sec %r, or an images_per_sec / train_accuracy: %s"
                 % (e["step"], e.get("tokens_per_sec"), e))
first = steps[0]["loss"]
if abs(first - math.log(64)) > 0.3:
    sys.exit("FAIL: first loss %.4f, expected about ln 64 = %.4f" % (first, math.log(64)))
last = sum(e["loss"] for e in steps[-5:]) / 5
if not last < 0.6 * first:
    sys.exit("FAIL: the loss did not fall: %.4f, then %.4f over the last 5 steps" % (first, last))
if len(evals) != 2:
    sys.exit("FAIL: %d evaluations, expected one per epoch: %s" % (len(evals), evals))
for e in evals + done:
    if "test_accuracy" in e or "val_loss" not in e or "perplexity" not in e:
        sys.exit("FAIL: an evaluation without val_loss/perplexity, or with an accuracy: %s" % e)
    if not math.isclose(e["perplexity"], math.exp(e["val_loss"]), rel_tol=1e-9):
        sys.exit("FAIL: perplexity %r is not exp(val_loss %r)" % (e["perplexity"], e["val_loss"]))
if not evals[-1]["val_loss"] < 0.7 * math.log(64) or done[0]["val_loss"] != evals[-1]["val_loss"]:
    sys.exit("FAIL: val_loss %r after 2 epochs (ln 64 = %.3f), done says %r"
             % (evals[-1]["val_loss"], math.log(64), done[0]["val_loss"]))
# The workers' windows (SD_TEST_SAMPLE_LOG: generation, step, rank, world,
# offset, count, then each window's first token): in every step the two
# slices tile the global batch of 16 and take 16 different windows (a rank
# that numbered its windows from 0 would repeat the other's).
import glob
rec = {}
for f in glob.glob(sys.argv[2] + "/*.samples"):
    for line in open(f):
        g, step, rank, world, off, cnt, *starts = map(int, line.split())
        rec.setdefault(step, {})[(g, off)] = (cnt, starts)
if sorted(rec) != list(range(62)):
    sys.exit("FAIL: sample records for steps %s, expected 0 to 61" % sorted(rec))
for step, slices in rec.items():
    g = max(k[0] for k in slices)
    parts = sorted((off, cnt, st) for (gg, off), (cnt, st) in slices.items() if gg == g)
    pos, wins = 0, []
    for off, cnt, st in parts:
        if off != pos or len(st) != cnt:
            sys.exit("FAIL: step %d: slices %s do not tile the batch" % (step, parts))
        pos += cnt
        wins += st
    if pos != 16 or len(set(wins)) < 15:
        sys.exit("FAIL: step %d: %d samples, %d different windows: %s" % (step, pos, len(set(wins)), wins))
print("ok: loss %.3f -> %.3f, val_loss %.3f (perplexity %.2f) after 62 steps on 2 workers"
      % (first, last, done[0]["val_loss"], done[0]["perplexity"]))
PYEOF
