"""tests/app/test-export.sh's checks (run with /usr/bin/python3, which has torch
and onnx): short spotdeck runs exported with `spotdeck export`, loaded back
into PyTorch, evaluated on the run's test set.

  The runs are in fp32 ("precision": "fp32"): the job's default, auto,
  is bf16 on a CPU with AMX or AVX512-BF16, and a bf16 run's accuracy is
  of bf16 convolutions, not of the fp32 network PyTorch evaluates (one
  sample in 500 scored differently broke the 0.1 point).
  - cnn (built-in, 200 steps on Fashion-MNIST): the ONNX file passes
    onnx.checker; PyTorch's nn.Module of the same network with
    load_state_dict from the ONNX initializers (onnx.numpy_helper) and a
    small evaluator of the ONNX graph both score the run's final
    test_accuracy (its journal) within 0.1 point.
  - resnet20 (built-in, 30 steps): the graph with batch-norm and the
    option-A shortcuts (Slice + Pad) scores the run's accuracy, through the
    evaluator (a Slice starting at row 1 instead of 0 scores 2 points off);
    the mlp (30 steps) likewise.  The exported resnet20 loads back into
    spotdeck (tests/engine/onnx-train) as exactly the built-in resnet20's node list
    and trains 5 steps.
  - an ONNX model torch.onnx.export wrote (a CNN with batch-norm, trained by
    spotdeck for 100 steps): the exported file is the same graph (same
    nodes) with the trained initializers; the torch module with
    load_state_dict scores the run's accuracy; it exports again from the
    run's copy of the file after the job's file is deleted, and a copy with
    another SHA-256 is refused.
  - every safetensors file, parsed by hand (JSON header + numpy.frombuffer),
    holds exactly the ONNX file's float initializers, with the metadata.
  - bad input: no checkpoint, --step of none, an output in a missing
    directory, no output named: one line, exit 1 (2 for usage), no file.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("SKIP: /usr/bin/python3 cannot import %s (Debian: python3-torch, python3-onnx)" % e.name,
          file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import elastic  # noqa: E402
from elastic import fail, ok  # noqa: E402

torch.set_num_threads(2)
SPOTDECK = elastic.SPOTDECK
# engine/data.c's Fashion-MNIST constants, applied as the engine does:
# float32 (pixel / 255 - mean) / std.
MEAN, STD = np.float32(0.2860), np.float32(0.3530)


def test_set(data):
    with open(os.path.join(data, "t10k-images-idx3-ubyte"), "rb") as f:
        raw = f.read()
    n, h, w = struct.unpack(">III", raw[4:16])
    px = np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, 1, h, w)
    x = (px.astype(np.float32) / np.float32(255.0) - MEAN) / STD
    with open(os.path.join(data, "t10k-labels-idx1-ubyte"), "rb") as f:
        y = np.frombuffer(f.read()[8:], dtype=np.uint8)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))


def accuracy(fn, x, y):
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y), 500):
            correct += int((fn(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum())
    return correct / len(y)


def run_eval(graph, x):
    """The ONNX graph on x with torch's functional ops, batch-norm in
    inference mode: what onnxruntime would compute, for the ops spotdeck's
    exports hold."""
    env = {i.name: torch.from_numpy(onnx.numpy_helper.to_array(i).copy()) for i in graph.initializer}
    env[graph.input[0].name] = x
    for nd in graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in nd.attribute}
        i = [env[n] if n else None for n in nd.input]
        op = nd.op_type
        if op == "Constant":
            y = torch.from_numpy(onnx.numpy_helper.to_array(a["value"]).copy())
        elif op == "Conv":
            assert a.get("group", 1) == 1 and all(d == 1 for d in a.get("dilations", [1, 1]))
            p = a.get("pads", [0, 0, 0, 0])
            assert p[0] == p[2] and p[1] == p[3]
            y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None, stride=a.get("strides", [1, 1]),
                         padding=(p[0], p[1]))
        elif op == "BatchNormalization":
            y = F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0, a.get("epsilon", 1e-5))
        elif op == "Relu":
            y = F.relu(i[0])
        elif op in ("MaxPool", "AveragePool"):
            p = a.get("pads", [0, 0, 0, 0])
            assert p[0] == p[2] and p[1] == p[3] and not a.get("ceil_mode", 0)
            f = F.max_pool2d if op == "MaxPool" else F.avg_pool2d
            y = f(i[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]), (p[0], p[1]))
        elif op == "GlobalAveragePool":
            y = i[0].mean((2, 3), keepdim=True)
        elif op == "Flatten":
            y = torch.flatten(i[0], a.get("axis", 1))
        elif op == "Gemm":
            assert a.get("alpha", 1.0) == 1.0 and a.get("beta", 1.0) == 1.0 and not a.get("transA", 0)
            w = i[1].t() if a.get("transB", 0) else i[1]
            y = i[0] @ w + (i[2] if len(i) > 2 else 0)
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Slice":
            y = i[0]
            starts, ends = i[1].tolist(), i[2].tolist()
            axes = i[3].tolist() if len(i) > 3 else list(range(len(starts)))
            steps = i[4].tolist() if len(i) > 4 else [1] * len(starts)
            idx = [slice(None)] * y.dim()
            for s, e, ax, st in zip(starts, ends, axes, steps):
                idx[ax] = slice(s, min(e, y.shape[ax]), st)
            y = y[tuple(idx)]
        elif op == "Pad":
            assert a.get("mode", b"constant") in (b"constant", "constant")
            pads = i[1].tolist()
            r = len(pads) // 2
            tp = []
            for ax in reversed(range(r)):   # F.pad: last axis first
                tp += [pads[ax], pads[ax + r]]
            y = F.pad(i[0], tp, value=float(i[2]) if len(i) > 2 and i[2] is not None else 0.0)
        else:
            fail("the evaluator has no %s (node %s)" % (op, nd.name))
        env[nd.output[0]] = y
    return env[graph.output[0].name]


def read_safetensors(path):
    """The safetensors format by hand: u64 LE header size, JSON header,
    data; tensors as numpy arrays, and the metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if n % 8:
        fail("%s: header of %d bytes, not padded to 8" % (path, n))
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__")
    data = raw[8 + n:]
    out, end = {}, 0
    for name, t in sorted(head.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = t["data_offsets"]
        if t["dtype"] != "F32" or b != end:
            fail("%s: %s is %s at %d, expected F32 at %d" % (path, name, t["dtype"], b, end))
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
        end = e
    if end != len(data):
        fail("%s: %d data bytes, the header covers %d" % (path, len(data), end))
    return out, meta


def export(run_dir, out, *extra):
    p = subprocess.run([SPOTDECK, "export", run_dir, "--onnx", out + ".onnx", "--safetensors",
                        out + ".safetensors"] + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        fail("spotdeck export %s: exit %d: %s" % (run_dir, p.returncode, p.stderr))
    print(p.stdout, end="")
    return p.stdout


def check_files(out, model, step, dataset):
    """onnx.checker on the ONNX file, the safetensors file against its
    initializers; the ONNX model."""
    m = onnx.load(out + ".onnx")
    onnx.checker.check_model(m, full_check=True)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer
             if i.data_type == onnx.TensorProto.FLOAT}
    st, meta = read_safetensors(out + ".safetensors")
    if sorted(st) != sorted(inits):
        fail("%s: safetensors holds %s, the ONNX file's float initializers are %s"
             % (out, sorted(st), sorted(inits)))
    for k, v in inits.items():
        if st[k].shape != v.shape or st[k].tobytes() != v.astype("<f4").tobytes():
            fail("%s: tensor %s differs between the two files" % (out, k))
    want = {"model": model, "step": str(step), "dataset": dataset}
    if any(meta.get(k) != v for k, v in want.items()) or not meta.get("spotdeck_version"):
        fail("%s: metadata %s, expected %s and spotdeck_version" % (out, meta, want))
    ok("%s: onnx.checker passes; safetensors holds the same %d tensors (%d values), metadata %s"
       % (os.path.basename(out), len(st), sum(v.size for v in st.values()), meta))
    return m


def final(run):
    done = [e for e in run.journal() if e["type"] == "done"]
    ck = [e for e in run.journal() if e["type"] == "checkpoint"]
    if not done or not ck or ck[-1]["step"] != done[-1]["steps"]:
        fail("the run ended without a final checkpoint: %s %s" % (done, ck[-1:]))
    return done[-1]["test_accuracy"], done[-1]["steps"]


def same_accuracy(what, got, want):
    print("%s: PyTorch %.4f, spotdeck's journal %.4f" % (what, got, want))
    if abs(got - want) > 0.001:
        fail("%s: test accuracy %.4f in PyTorch, %.4f in the run" % (what, got, want))


class Cnn(nn.Module):
    """engine/model.h's cnn, its modules named as spotdeck's tensors."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class Small(nn.Module):
    """The ONNX model the third run trains."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu(self.b2(self.c2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def load(module, m):
    sd = {i.name: torch.from_numpy(onnx.numpy_helper.to_array(i).copy()) for i in m.graph.initializer}
    want = module.state_dict()
    sd = {k: v for k, v in sd.items() if k in want}
    for k in want:
        if k.endswith("num_batches_tracked"):
            sd[k] = want[k]
    module.load_state_dict(sd, strict=True)
    return module.eval()


def reload_trains(path, x, y, tmp):
    """The exported resnet20 read back by spotdeck's own loader
    (tests/engine/onnx-train): its option-A shortcuts lower onto the built-in
    shortcut add, so the node list is the built-in resnet20's (same as
    resnet20: ...), and it trains: 5 SGD steps on test images give finite
    losses."""
    train = os.path.join(os.environ.get("top_builddir", "."), "tests", "engine", "onnx-train")
    p = subprocess.run([train, path, "-", "resnet20", "0", "0", "0"], capture_output=True,
                       text=True)
    if p.returncode != 0 or "same as resnet20" not in p.stdout:
        fail("the exported resnet20 does not load back as resnet20: %s %s" % (p.stdout, p.stderr))
    print("exported resnet20 loaded back:", p.stdout.strip().split("\n")[-1])
    steps, batch = 5, 16
    batches = os.path.join(tmp, "reload.bin")
    with open(batches, "wb") as f:
        f.write(b"SDOB" + struct.pack("<5i", steps, batch, *x.shape[1:]))
        for s in range(steps):
            f.write(x[s * batch:(s + 1) * batch].numpy().astype("<f4").tobytes())
            f.write(y[s * batch:(s + 1) * batch].numpy().astype("<i4").tobytes())
    out = os.path.join(tmp, "reload.txt")
    p = subprocess.run([train, path, batches, out, "0.01", "0.9", "0.0005"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        fail("the exported resnet20 does not train: %s" % p.stderr)
    losses = [float(line.split()[2]) for line in open(out) if line.startswith("loss ")]
    if len(losses) != steps or not all(np.isfinite(losses)):
        fail("the exported resnet20 trained to losses %s" % losses)
    ok("the exported resnet20 trains when loaded back: losses %s"
       % " ".join("%.4f" % v for v in losses))


def bad(args, code, pattern, outputs):
    p = subprocess.run([SPOTDECK, "export"] + args, capture_output=True, text=True)
    lines = p.stderr.splitlines()
    if p.returncode != code or len(lines) != 1 or pattern not in lines[0]:
        fail("export %s: exit %d, stderr %r; expected exit %d and one line with %r"
             % (args, p.returncode, p.stderr, code, pattern))
    left = [o for o in outputs for f in (o, o + ".tmp") if os.path.exists(f)]
    if left:
        fail("export %s left %s" % (args, left))
    ok("refused (exit %d): %s" % (code, lines[0]))


def main():
    tmp = tempfile.mkdtemp(prefix="spotdeck-export.")
    elastic._tmpdirs.append(tmp)
    data = elastic.fashion_subset(tmp, 12800, ntest=2000)
    x, y = test_set(data)

    # 1. The built-in cnn, 200 steps, checkpoints at 100 and 200.
    r = elastic.Run(elastic.job(data_dir=data, checkpoint_every=100, keep_checkpoints=5, precision="fp32"),
                    workers=1, run_dir=os.path.join(tmp, "cnn"))
    if r.finish(600) != 0:
        fail("cnn run failed: %s" % r.stderr_text[-2000:])
    acc, steps = final(r)
    out = os.path.join(tmp, "cnn")
    export(r.run_dir, out + "-out")
    m = check_files(out + "-out", "cnn", steps, "fashion-mnist")
    same_accuracy("cnn as nn.Module with load_state_dict", accuracy(load(Cnn(), m), x, y), acc)
    same_accuracy("cnn through the ONNX graph", accuracy(lambda b: run_eval(m.graph, b), x, y), acc)
    # An older step: another file, the step in its metadata.
    export(r.run_dir, out + "-100", "--step", "100")
    check_files(out + "-100", "cnn", 100, "fashion-mnist")
    m100 = onnx.load(out + "-100.onnx")
    if all((onnx.numpy_helper.to_array(a) == onnx.numpy_helper.to_array(b)).all()
           for a, b in zip(m.graph.initializer, m100.graph.initializer)):
        fail("steps 100 and %d exported the same weights" % steps)

    # Bad input.
    outs = [os.path.join(tmp, "bad.onnx"), os.path.join(tmp, "bad.safetensors")]
    empty = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(empty, "checkpoints"))
    bad([empty, "--onnx", outs[0], "--safetensors", outs[1]], 1, "no checkpoint", outs)
    bad([r.run_dir, "--step", "7", "--onnx", outs[0]], 1, "no checkpoint of step 7", outs)
    bad([r.run_dir, "--onnx", outs[0], "--safetensors", os.path.join(tmp, "nodir", "x.st")], 1,
        "nodir", outs)
    bad([r.run_dir], 2, "nothing to write", outs)
    bad([os.path.join(tmp, "none"), "--onnx", outs[0]], 1, "no such run directory", outs)

    # 2. resnet20: batch-norm and the option-A shortcuts.
    os.mkdir(os.path.join(tmp, "small"))
    data_small = elastic.fashion_subset(os.path.join(tmp, "small"), 1920, ntest=2000)
    r = elastic.Run(elastic.job(model="resnet20", data_dir=data_small, checkpoint_every=100, precision="fp32"),
                    workers=1, run_dir=os.path.join(tmp, "resnet"))
    if r.finish(600) != 0:
        fail("resnet20 run failed: %s" % r.stderr_text[-2000:])
    acc, steps = final(r)
    out = os.path.join(tmp, "resnet")
    export(r.run_dir, out + "-out")
    m = check_files(out + "-out", "resnet20", steps, "fashion-mnist")
    ops = sorted(set(n.op_type for n in m.graph.node))
    print("resnet20 ops:", ops)
    if "Slice" not in ops or "Pad" not in ops:
        fail("resnet20's graph has no option-A shortcut: %s" % ops)
    same_accuracy("resnet20 through the ONNX graph", accuracy(lambda b: run_eval(m.graph, b), x, y), acc)
    reload_trains(out + "-out.onnx", x, y, tmp)

    # The mlp: a Flatten of the input itself, two Gemms.
    r = elastic.Run(elastic.job(model="mlp", data_dir=data_small, checkpoint_every=100),
                    workers=1, run_dir=os.path.join(tmp, "mlp"))
    if r.finish(600) != 0:
        fail("mlp run failed: %s" % r.stderr_text[-2000:])
    acc, steps = final(r)
    export(r.run_dir, os.path.join(tmp, "mlp-out"))
    m = check_files(os.path.join(tmp, "mlp-out"), "mlp", steps, "fashion-mnist")
    same_accuracy("mlp through the ONNX graph", accuracy(lambda b: run_eval(m.graph, b), x, y), acc)

    # 3. An ONNX model torch.onnx.export wrote.
    torch.manual_seed(1)
    src = os.path.join(tmp, "small.onnx")
    net = Small()
    torch.onnx.export(net, torch.randn(8, 1, 28, 28), src, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    orig = onnx.load(src)
    r = elastic.Run(elastic.job(model=src, data_dir=data, lr=0.05, checkpoint_every=50, precision="fp32"),
                    workers=1, run_dir=os.path.join(tmp, "onnx"))
    if r.finish(600) != 0:
        fail("ONNX model run failed: %s" % r.stderr_text[-2000:])
    acc, steps = final(r)
    os.unlink(src)   # the run's copy must do
    out = os.path.join(tmp, "onnx")
    export(r.run_dir, out + "-out")
    m = check_files(out + "-out", src, steps, "fashion-mnist")
    if [(n.op_type, list(n.input), list(n.output)) for n in m.graph.node] != \
       [(n.op_type, list(n.input), list(n.output)) for n in orig.graph.node]:
        fail("the exported graph is not the original's")
    changed = [i.name for i, j in zip(m.graph.initializer, orig.graph.initializer)
               if i.data_type == onnx.TensorProto.FLOAT and
               not np.array_equal(onnx.numpy_helper.to_array(i), onnx.numpy_helper.to_array(j))]
    print("trained initializers:", changed)
    if "c1.weight" not in changed or "b1.running_mean" not in changed:
        fail("the exported initializers are the file's, not the trained ones")
    same_accuracy("the ONNX model as nn.Module with load_state_dict",
                  accuracy(load(Small(), m), x, y), acc)
    with open(os.path.join(r.run_dir, "model.onnx"), "ab") as f:
        f.write(b"\0")
    bad([r.run_dir, "--onnx", outs[0]], 1, "no copy of the model file with SHA-256", outs)
    ok("export: all checks passed")


main()
