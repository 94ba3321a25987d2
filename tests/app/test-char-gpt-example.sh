#!/bin/sh
# The char-level GPT example (examples/char-gpt/) and its PyTorch reference
# (tests/bench/gpt-torch): prepare.py's train.bin / val.bin hold exactly the
# corpus's bytes, 90/10, behind llm.c's header (magic, version, count) or
# none (--format nanogpt); a missing corpus is one line naming it;
# export.py's ONNX passes onnx.checker with the input, output and tied
# weight it should have, LayerNormalization only from opset 17, and a job
# file with the training settings; the reference trains two steps and
# starts from the loss of an untrained byte model (about ln 256).  With
# onnxruntime (not packaged in Debian 12) the export also runs there.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
tmpdir
PY=/usr/bin/python3
CORPUS=/usr/share/games/fortunes
$PY -c 'import torch, numpy, onnx' 2>/dev/null ||
	{ echo "SKIP: $PY cannot import torch, numpy and onnx (Debian: python3-torch, python3-numpy, python3-onnx)" >&2; exit 77; }
[ -f "$CORPUS/fortunes" ] || { echo "SKIP: $CORPUS missing (Debian package fortunes)" >&2; exit 77; }
EX="$top_srcdir/examples/char-gpt"

$PY "$EX/prepare.py" --out "$T/d" >"$T/p.out" 2>&1 || { cat "$T/p.out" >&2; fail "prepare.py failed"; }
$PY "$EX/prepare.py" --out "$T/n" --format nanogpt >"$T/p.out" 2>&1 || { cat "$T/p.out" >&2; fail "prepare.py --format nanogpt failed"; }
$PY - "$CORPUS" "$T/d" "$T/n" <<'PY' || exit 1
import os, sys
import numpy as np
corpus, d, n = sys.argv[1:]
def bad(msg):
    print("FAIL: " + msg); sys.exit(1)
names = sorted(f for f in os.listdir(corpus) if not f.endswith((".dat", ".u8")))
text = b"".join(open(os.path.join(corpus, f), "rb").read() for f in names
                if os.path.isfile(os.path.join(corpus, f)) and not os.path.islink(os.path.join(corpus, f)))
want = np.frombuffer(text, np.uint8).astype(np.uint16)
cut = int(len(want) * 0.9)
for part, ref in (("train.bin", want[:cut]), ("val.bin", want[cut:])):
    raw = open(os.path.join(d, part), "rb").read()
    head = np.frombuffer(raw[:1024], "<i4")
    if (head[0], head[1], head[2]) != (20240520, 1, len(ref)):
        bad("%s: header magic %d version %d count %d, expected 20240520 1 %d" % (part, head[0], head[1], head[2], len(ref)))
    if head[3:].any():
        bad("%s: header ints 3..255 are not zero" % part)
    tok = np.frombuffer(raw[1024:], "<u2")
    if len(tok) != len(ref) or (tok != ref).any():
        bad("%s: %d tokens that are not the corpus's %d bytes" % (part, len(tok), len(ref)))
    if open(os.path.join(n, part), "rb").read() != raw[1024:]:
        bad("%s: the nanogpt format is not the llm.c file's tokens without the header" % part)
print("ok: %d corpus bytes, train %d and val %d tokens in both formats" % (len(want), cut, len(want) - cut))
PY

# A corpus folder that is not there: one line naming it, nothing written.
$PY "$EX/prepare.py" --corpus "$T/none" --out "$T/x" >"$T/bad.out" 2>&1 && fail "prepare.py accepted a missing corpus"
[ "$(wc -l <"$T/bad.out")" -eq 1 ] && grep -q "$T/none: no such folder" "$T/bad.out" ||
	{ cat "$T/bad.out" >&2; fail "prepare.py's message for a missing corpus is not one line naming it"; }
[ ! -e "$T/x" ] || fail "prepare.py wrote $T/x for a missing corpus"

$PY "$EX/export.py" --out "$T/g" --data-dir "$T/d" >"$T/e.out" 2>&1 || { cat "$T/e.out" >&2; fail "export.py failed"; }
$PY "$EX/export.py" --out "$T/g17" --opset 17 --eval --fold >"$T/e.out" 2>&1 || { cat "$T/e.out" >&2; fail "export.py --opset 17 --eval --fold failed"; }
$PY - "$T/g" "$T/g17" "$T/d" <<'PY' || exit 1
import collections, json, os, sys
import numpy as np
import onnx
g, g17, d = sys.argv[1:]
def bad(msg):
    print("FAIL: " + msg); sys.exit(1)
m = onnx.load(os.path.join(g, "model.onnx"))
onnx.checker.check_model(m, full_check=True)
if m.opset_import[0].version != 14:
    bad("default export is opset %d, expected 14" % m.opset_import[0].version)
def dims(v):
    return [x.dim_param or x.dim_value for x in v.type.tensor_type.shape.dim]
i, o = m.graph.input[0], m.graph.output[0]
if (i.name, i.type.tensor_type.elem_type, dims(i)) != ("tokens", onnx.TensorProto.INT64, ["batch", 64]):
    bad("input %s type %d %s, expected tokens int64 [batch, 64]" % (i.name, i.type.tensor_type.elem_type, dims(i)))
# The exporter leaves the output's time dimension symbolic.
if o.name != "logits" or len(dims(o)) != 3 or dims(o)[0] != "batch" or dims(o)[2] != 256:
    bad("output %s %s, expected logits [batch, time, 256]" % (o.name, dims(o)))
# The tied embedding is one initializer of 256 x 128, and the parameters
# add up to model.py's 834,304 (mask buffers aside).
inits = {t.name: tuple(t.dims) for t in m.graph.initializer}
emb = [n for n, s in inits.items() if s == (256, 128)]
if len(emb) != 1:
    bad("%d initializers of 256 x 128 (%s), expected the one tied embedding" % (len(emb), emb))
params = sum(int(np.prod(s)) for n, s in inits.items() if not n.endswith(".mask"))
if params != 834304:
    bad("initializers hold %d parameters, model.py has 834304" % params)
ops = collections.Counter(n.op_type for n in m.graph.node)
ops17 = collections.Counter(n.op_type for n in onnx.load(os.path.join(g17, "model.onnx")).graph.node)
if ops["LayerNormalization"] or ops["ReduceMean"] != 18 or ops17["LayerNormalization"] != 9 or ops17["ReduceMean"]:
    bad("LayerNormalization %d / ReduceMean %d at opset 14, %d / %d at 17: expected 0/18 and 9/0"
        % (ops["LayerNormalization"], ops["ReduceMean"], ops17["LayerNormalization"], ops17["ReduceMean"]))
if ops["Softmax"] != 4 or ops["Erf"] != 4 or ops["Dropout"] != 13 or ops17["Dropout"]:
    bad("Softmax %d, Erf %d, Dropout %d (eval %d): expected 4 attention softmaxes, 4 exact GELUs, 13 dropouts only in training"
        % (ops["Softmax"], ops["Erf"], ops["Dropout"], ops17["Dropout"]))
job = json.load(open(os.path.join(g, "job.json")))
want = {"model": "model.onnx", "dataset": "tokens", "data_dir": os.path.relpath(d, g), "block_size": 64,
        "optimizer": "adamw", "betas": [0.9, 0.99], "weight_decay": 0.1, "clip_grad_norm": 1.0,
        "schedule": "cosine", "warmup_steps": 100}
for k, v in want.items():
    if job.get(k) != v:
        bad("job.json: %s is %r, expected %r" % (k, job.get(k), v))
try:
    import onnxruntime
except ImportError:
    print("ok: export checked; onnxruntime not installed, not run there")
    sys.exit(0)
s = onnxruntime.InferenceSession(os.path.join(g, "model.onnx"), providers=["CPUExecutionProvider"])
y = s.run(None, {"tokens": np.zeros((3, 64), np.int64)})[0]
if y.shape != (3, 64, 256) or not np.isfinite(y).all():
    bad("onnxruntime gave %s, expected finite (3, 64, 256) logits" % (y.shape,))
print("ok: export checked and run in onnxruntime")
PY

# spotdeck plan of the example's job: the catalog's GPU speeds scaled by
# FLOPs are not what the trainer gives a language model (it keeps one on
# the CPU executor): the plan says so, on screen and in --json.
"$top_builddir/spotdeck" plan --runs 4 --job "$T/g/job.json" >"$T/plan.out" 2>&1 ||
	{ cat "$T/plan.out" >&2; fail "spotdeck plan of the example's job"; }
sed -n 2p "$T/plan.out" | grep -q "^note: a language model trains on the servers' CPUs for now" ||
	{ head -3 "$T/plan.out" >&2; fail "spotdeck plan of a language model does not say it trains on CPUs"; }
"$top_builddir/spotdeck" plan --runs 4 --json --job "$T/g/job.json" >"$T/plan.json" 2>&1 ||
	{ cat "$T/plan.json" >&2; fail "spotdeck plan --json of the example's job"; }
$PY -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(not (j["tokens_per_sample"] == 64 and "CPUs" in j["note"]))' \
	"$T/plan.json" || fail "spotdeck plan --json of a language model: no tokens_per_sample 64 and CPU note"
ok "spotdeck plan says the language model trains on CPUs: $(sed -n 2p "$T/plan.out")"

# The job file names its model and data relative to its folder: the
# folder moved with its data (and read from another directory) still plans.
mkdir "$T/moved"
mv "$T/g" "$T/d" "$T/moved/"
(cd / && "$top_builddir/spotdeck" plan --runs 4 --job "$T/moved/g/job.json") >"$T/plan2.out" 2>&1 ||
	{ cat "$T/plan2.out" >&2; fail "spotdeck plan of the example's job after its folder moved"; }
mv "$T/moved/g" "$T/moved/d" "$T/"
ok "the example's folder moved with its data still plans: $(head -1 "$T/plan2.out")"

# The reference: two steps, 8 evaluation windows; an untrained model's
# validation loss is about ln 256 = 5.545 nats.
"$top_srcdir/tests/bench/gpt-torch" --data "$T/d" --job "$T/g/job.json" --steps 2 --eval-every 1 \
	--eval-windows 8 --target 0 >"$T/b.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/b.out" >&2; fail "gpt-torch exited $rc for 2 steps without a target, expected 1"; }
v0=$(sed -n 's/^step 0: val_loss \([0-9.]*\)$/\1/p' "$T/b.out")
n=$(grep -c '^step [12]: loss [0-9.]* val_loss [0-9.]*  [0-9]* tokens/s' "$T/b.out")
$PY -c "import math, sys; sys.exit(not (abs(float('${v0:-nan}') - math.log(256)) < 0.25))" && [ "$n" -eq 2 ] ||
	{ cat "$T/b.out" >&2; fail "gpt-torch: step 0 val_loss '$v0' (expected about 5.545) or $n step lines (expected 2)"; }
ok "char-gpt example and reference (untrained val_loss $v0)"
