#!/usr/bin/python3
"""tests/engine/onnx_torch_ref.py - PyTorch's side of tests/engine/test-onnx-torch.sh.

  onnx_torch_ref.py prepare DIR VARIANT   export DIR/model.onnx, write
                                          DIR/batches.bin, train in PyTorch
                                          (DIR/ref.pt)
  onnx_torch_ref.py compare DIR VARIANT   check DIR/out.txt (tests/engine/onnx-train)
                                          against DIR/ref.pt
  onnx_torch_ref.py resnets DIR           write DIR/resnet20-*.onnx: torch_resnet.py's
                                          ResNet-20 (3x32x32) in opsets 13 and 17,
                                          folded and not; and DIR/bad-*.onnx:
                                          Slice and Pad that are no shortcut
  onnx_torch_ref.py fold DIR              write DIR/fold-*.onnx: int64 computations
                                          (Slice with negative and clamped steps,
                                          Transpose, Gather, Unsqueeze, Squeeze,
                                          Concat, Mul/Sub/Add broadcasting,
                                          ConstantOfShape, Reshape, Shape with
                                          start/end, Cast) whose every value,
                                          against numpy's, gates a Reshape: the
                                          file loads only when the loader folded
                                          them right; fold-mutant-*.onnx expects
                                          one value off by one and must not load
  onnx_torch_ref.py exports DIR           write DIR/*.onnx: a CNN with batch-norm,
                                          dropout, x.view and log_softmax in
                                          opsets 13 to 17, eval and training
                                          mode, with and without constant
                                          folding; an MLP through MatMul + Add

VARIANT "general": the general convolutions (depthwise dilated, grouped
1x3, 3x1 with strides (2, 1)), Add/Sub/Mul/Div with activations, scalar
and per-channel constants on either side, Reciprocal, padded average
pooling both ways, eval mode.  VARIANT "dropout": two nn.Dropout (after a
conv and after a linear layer), training mode; PyTorch trains in compare,
with the masks spotdeck drew (OUT.masks), so the trajectories must agree
as for the other variants.  Both also check inference with spotdeck's
trained weights against PyTorch's eval() (eval_loss in OUT).
VARIANT "resnet": tests/bench/torch_resnet.py's CIFAR ResNet with one block
per stage (16, 32, 64 channels), whose "option A" shortcuts export as Slice
with steps 2 and a Pad fed by folded int64 computations, training mode.
VARIANT "cifar": a CIFAR ResNet block without pooling, 16 channels (the
engine's channel-blocked layout where oneDNN is there), training mode.
VARIANT "stem": torchvision's ResNet stem and a downsampling block
(7x7 stride-2 conv, padded max pooling, strided 1x1 shortcut), training
mode.  VARIANT "acts": a CNN with LeakyReLU, ReLU6 (Clip), Tanh and Sigmoid
and a channel concatenation, eval mode.  VARIANT "train": a small residual CNN with batch-norm (conv, BN, ReLU, max
pool, residual add, global average pool, x.view(x.size(0), -1), gemm)
exported with training=TrainingMode.TRAINING, which keeps the batch-norms
(an eval-mode export folds them into the convolutions).  VARIANT "eval":
the same network without batch-norm (convolutions with bias,
torch.flatten) exported in eval mode with do_constant_folding=False.

VARIANT "adamw": an MLP (Flatten, Linear 192x32, ReLU, Linear 32x10), eval
mode, trained with torch.optim.AdamW (ADAMW: lr, betas, eps, decoupled
weight decay; foreach=False, the 1.13 default this engine follows) after
torch.nn.utils.clip_grad_norm_ to CLIP each step, its learning rate on the
trainer's schedule (WARMUP steps of warm-up, then a cosine; LambdaLR); the global gradient norms
before clipping are compared too, and the clip must have acted on some
steps and not on others, or the check would not show it works.

The other variants train STEPS steps of SGD (LR, MOMENTUM, WEIGHT_DECAY;
PyTorch's convention, which engine/optim.h follows) from the exported
weights on the same batches in the same order.  PyTorch trains NUDGED more times from its
initial weights moved by 1 ulp (torch.nextafter: up, down, alternating),
the yardstick of tests/gpu/gpu-check.c: how far this model's training
carries a rounding difference.  spotdeck must match PyTorch within
  steps 1-EARLY_STEPS: EARLY_TOL relative (no drift has built up yet),
  then every step: max(FLOOR, DRIFT_FACTOR x the nudged runs' largest
                       relative loss drift so far),
  final parameters and batch-norm running statistics (relative L2
  distance): max(FLOOR, DRIFT_FACTOR x the nudged runs' distance).
Exit status 0 when all hold, 1 otherwise, 77 (with "SKIP: ...") when
torch or onnx cannot be imported.
"""
import math
import os
import struct
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx
    import onnx.numpy_helper
except ImportError as e:  # the caller turns this into a SKIP
    print(f"SKIP: /usr/bin/python3 cannot import {e.name} (Debian: python3-torch, python3-onnx)",
          file=sys.stderr)
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import torch_resnet  # noqa: E402  (the bench's network: Block, ResNet)

STEPS, BATCH, C, H, W, CLASSES = 30, 8, 3, 8, 8, 10
LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 5e-4
# The adamw variant's: GPT-style betas and decay, and a clip norm between
# the MLP's small and large gradient norms on these batches (measured, with
# the schedule below: 1.9 to 2.8 over the 30 steps).
ADAMW = {"lr": 0.01, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
CLIP = 2.2
# And the trainer's schedule (engine/optim.h sd_lr_at): linear warm-up over
# WARMUP steps, then a cosine to 0 at step STEPS.
WARMUP = 5
NUDGED, DRIFT_FACTOR, FLOOR = 3, 10.0, 1e-5
EARLY_STEPS, EARLY_TOL = 5, 1e-5


class Net(nn.Module):
    def __init__(self, bn):
        super().__init__()
        self.bn = bn
        self.c1 = nn.Conv2d(C, 8, 3, padding=1, bias=not bn)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=not bn)
        if bn:
            self.b1 = nn.BatchNorm2d(8)
            self.b2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = self.c1(x)
        x = F.relu(self.b1(y) if self.bn else y)
        x = F.max_pool2d(x, 2)
        y = self.c2(x)
        x = F.relu(x + (self.b2(y) if self.bn else y))
        x = F.adaptive_avg_pool2d(x, 1)
        x = x.view(x.size(0), -1) if self.bn else torch.flatten(x, 1)
        return self.fc(x)


class Acts(nn.Module):
    """The other activations: LeakyReLU, ReLU6 (exported as Clip), Tanh,
    Sigmoid; and a concatenation of channels (DenseNet's)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(C, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc1 = nn.Linear(16 * (H // 2) * (W // 2), 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = F.leaky_relu(self.c1(x), 0.1)
        x = F.max_pool2d(torch.cat([x, F.relu6(self.c2(x))], 1), 2)
        x = torch.tanh(self.fc1(torch.flatten(x, 1)))
        return self.fc3(torch.sigmoid(self.fc2(x)))


class Stem(nn.Module):
    """torchvision's ResNet shape: a 7x7 stride-2 stem, padded max pooling,
    a block whose shortcut is a strided 1x1 conv + batch-norm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(C, 8, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.c1 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.down = nn.Conv2d(8, 16, 1, stride=2, bias=False)
        self.bd = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        x = F.relu(y + self.bd(self.down(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Cifar(nn.Module):
    """A CIFAR ResNet block without max pooling and 16 channels: what the
    engine runs in oneDNN's channel-blocked layout with batch-norm, add and
    ReLU fused, where oneDNN is there."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(C, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.c1 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        x = F.relu(y + x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class General(nn.Module):
    """The general convolutions and the arithmetic: a depthwise dilated
    conv, a grouped 1x3 conv, a 3x1 conv with strides (2, 1), a 2x2 conv
    after an asymmetric F.pad (exported as Pad + Conv); Mul by a
    per-channel parameter (on the left), Sub and Mul of two activations
    (x * sigmoid(y)), Div by and Sub from a literal, Add of a scalar
    parameter, Add of a literal, a literal divided by an activation; padded
    average pooling with count_include_pad False and True."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(C, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.g2 = nn.Conv2d(8, 8, (1, 3), padding=(0, 1), groups=2)
        self.rect = nn.Conv2d(8, 8, (3, 1), stride=(2, 1), padding=(1, 0), bias=False)
        self.even = nn.Conv2d(8, 8, 2)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 8).reshape(1, 8, 1, 1))
        self.shift = nn.Parameter(torch.full((1,), 0.1))
        self.fc = nn.Linear(8 * (H // 2 - 1) * (W // 2 + 1), CLASSES)

    def forward(self, x):
        x = F.relu(self.c1(x))
        y = self.scale * self.dw(x) - x
        x = x * torch.sigmoid(y)
        x = 1.0 - x / 4.0
        x = self.g2(x) + self.shift
        x = self.even(F.pad(x, (0, 1, 0, 1)))   # 'same' for an even kernel: Pad + Conv
        x = 2.0 / (torch.sigmoid(x) + 1.0)
        x = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
        x = F.avg_pool2d(self.rect(x), 2, 2, 1, count_include_pad=True)
        return self.fc(torch.flatten(x, 1))


class Masked(nn.Module):
    """Dropout with given masks: what torch.nn.Dropout computes in training,
    input * (mask / (1 - p)), with the mask of each call taken in turn from
    a list (spotdeck's, from onnx-train's OUT.masks)."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.masks = None

    def forward(self, x):
        if not self.training or self.masks is None:
            return x
        return x * (self.masks.pop(0).reshape(x.shape).float().div_(1 - self.p))


class Drop(nn.Module):
    """Dropout after a convolution (4-D) and after the first linear layer
    (2-D), exported in training mode so that the Dropout nodes stay."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(C, 8, 3, padding=1)
        self.d1 = nn.Dropout(0.3)
        self.fc1 = nn.Linear(8 * (H // 2) * (W // 2), 32)
        self.d2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(32, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(self.d1(F.relu(self.c1(x))), 2)
        return self.fc2(self.d2(F.relu(self.fc1(torch.flatten(x, 1)))))

    def use_masks(self):
        """The same network with Masked in place of the Dropouts."""
        self.d1, self.d2 = Masked(0.3), Masked(0.5)
        return [self.d1, self.d2]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(C * H * W, 32)
        self.fc2 = nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def make_model(variant):
    if variant == "adamw":
        return MLP()
    if variant == "general":
        return General()
    if variant == "dropout":
        return Drop()
    if variant == "resnet":
        return torch_resnet.ResNet(1, CLASSES)
    if variant == "cifar":
        return Cifar()
    if variant == "stem":
        return Stem()
    return Acts() if variant == "acts" else Net(variant == "train")


def batches():
    g = torch.Generator().manual_seed(1234)
    xs = torch.randn(STEPS, BATCH, C, H, W, generator=g)
    ys = torch.randint(0, CLASSES, (STEPS, BATCH), generator=g)
    return xs, ys


def train(model, xs, ys, adamw=False):
    sched = None
    if adamw:
        opt = torch.optim.AdamW(model.parameters(), foreach=False, **ADAMW)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / WARMUP if s < WARMUP else
                                                  0.5 * (1 + math.cos(math.pi * (s - WARMUP) /
                                                                      (STEPS - WARMUP))))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM,
                              weight_decay=WEIGHT_DECAY)
    model.train()
    losses, norms = [], []
    for s in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(xs[s]), ys[s])
        loss.backward()
        if adamw:
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP).item())
        opt.step()
        if sched:
            sched.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}, norms


def settings(variant):
    """The line the test script reads: onnx-train's settings."""
    line = f"LR={LR} MOMENTUM={MOMENTUM} WEIGHT_DECAY={WEIGHT_DECAY}"
    if variant == "adamw":
        line = (f"LR={ADAMW['lr']} MOMENTUM=0 WEIGHT_DECAY={ADAMW['weight_decay']} "
                f"OPTIMIZER=adamw BETA1={ADAMW['betas'][0]} BETA2={ADAMW['betas'][1]} "
                f"EPS={ADAMW['eps']} CLIP={CLIP} WARMUP={WARMUP}")
    return line


def nudge(model, k):
    with torch.no_grad():
        for p in model.parameters():
            up = torch.nextafter(p, torch.full_like(p, float("inf")))
            down = torch.nextafter(p, torch.full_like(p, float("-inf")))
            if k == 0:
                p.copy_(up)
            elif k == 1:
                p.copy_(down)
            else:
                alt = (torch.arange(p.numel()) % 2 == 0).reshape(p.shape)
                p.copy_(torch.where(alt, up, down))


def prepare(d, variant):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    bn = variant in ("train", "stem", "cifar", "resnet")
    model = make_model(variant)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    example = torch.randn(BATCH, C, H, W)
    if bn or variant == "dropout":
        model.train()
        torch.onnx.export(model, example, f"{d}/model.onnx", opset_version=13,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        model.eval()
        torch.onnx.export(model, example, f"{d}/model.onnx", opset_version=13,
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=False)
    # The same start on both sides: the file's initializers (exporting in
    # training mode runs the model, which moves the running statistics).
    inits = {i.name: torch.tensor(onnx.numpy_helper.to_array(i).copy())
             for i in onnx.load(f"{d}/model.onnx").graph.initializer}
    for k in init:
        if k in inits:
            init[k] = inits[k].reshape(init[k].shape).to(init[k].dtype)
        elif not k.endswith("num_batches_tracked"):
            sys.exit(f"{d}/model.onnx has no initializer {k}")
    xs, ys = batches()
    with open(f"{d}/batches.bin", "wb") as f:
        f.write(b"SDOB" + struct.pack("<5i", STEPS, BATCH, C, H, W))
        for s in range(STEPS):
            f.write(xs[s].numpy().astype("<f4").tobytes())
            f.write(ys[s].numpy().astype("<i4").tobytes())
    if variant == "dropout":
        # Trained in compare, with spotdeck's masks.
        torch.save({"init": init}, f"{d}/ref.pt")
        print(f"LR={LR} MOMENTUM={MOMENTUM} WEIGHT_DECAY={WEIGHT_DECAY}")
        return
    adamw = variant == "adamw"
    model.load_state_dict(init)
    ref = {"plain": train(model, xs, ys, adamw), "nudged": []}
    for k in range(NUDGED):
        model.load_state_dict(init)
        nudge(model, k)
        ref["nudged"].append(train(model, xs, ys, adamw))
    torch.save(ref, f"{d}/ref.pt")
    print(settings(variant))


def train_masked(d):
    """The dropout variant's reference: PyTorch trains (plain and nudged)
    with the masks spotdeck drew, read from OUT.masks (tests/engine/onnx-train.c)."""
    init = torch.load(f"{d}/ref.pt")["init"]
    model = Drop()
    drops = model.use_masks()
    raw = open(f"{d}/out.txt.masks", "rb").read()
    sizes = [BATCH * 8 * H * W, BATCH * 32]
    if len(raw) != STEPS * sum(sizes):
        sys.exit(f"{d}/out.txt.masks: {len(raw)} bytes, expected {STEPS * sum(sizes)}")
    masks = torch.frombuffer(bytearray(raw), dtype=torch.uint8)

    def load():
        at = 0
        lists = [[], []]
        for _ in range(STEPS):
            for j, n in enumerate(sizes):
                lists[j].append(masks[at:at + n])
                at += n
        for dr, lst in zip(drops, lists):
            dr.masks = lst

    xs, ys = batches()
    model.load_state_dict(init)
    load()
    ref = {"plain": train(model, xs, ys), "nudged": []}
    for k in range(NUDGED):
        model.load_state_dict(init)
        nudge(model, k)
        load()
        ref["nudged"].append(train(model, xs, ys))
    kept = masks.double().mean().item()
    print(f"  masks: {masks.numel()} elements, {kept:.3f} kept (expected "
          f"{(sizes[0] * 0.7 + sizes[1] * 0.5) / sum(sizes):.3f})")
    return ref


def read_out(path, norms=None):
    losses, tensors, buffers = [], {}, None
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        w = lines[i].split()
        if not w:
            i += 1
            continue
        if w[0] == "loss":
            losses.append(float(w[2]))
        elif w[0] == "norm" and norms is not None:
            norms.append(float(w[2]))
        elif w[0] == "tensor":
            tensors[w[1]] = torch.tensor([float(v) for v in lines[i + 1].split()])
            i += 1
        elif w[0] == "buffers":
            buffers = torch.tensor([float(v) for v in lines[i + 1].split()])
            i += 1
        i += 1
    return losses, tensors, buffers


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def bn_buffer_names(d):
    names = []
    for n in onnx.load(f"{d}/model.onnx").graph.node:
        if n.op_type == "BatchNormalization":
            names += [n.input[3], n.input[4]]
    return names


def compare_norms(ref, ours):
    """The gradient norms before clipping, step by step, within the same
    band as the losses; and the clip acted on some steps, not all."""
    norms = ref["plain"][2]
    if len(ours) != STEPS:
        print(f"FAIL: spotdeck reported {len(ours)} gradient norms, expected {STEPS}")
        return 1
    fails, drift = 0, 0.0
    for s in range(STEPS):
        e = abs(ours[s] - norms[s]) / norms[s]
        drift = max(drift, max(abs(n[2][s] - norms[s]) / norms[s] for n in ref["nudged"]))
        allowed = EARLY_TOL if s < EARLY_STEPS else max(FLOOR, DRIFT_FACTOR * drift)
        if e > allowed:
            print(f"  step {s + 1:2d}  gradient norm spotdeck {ours[s]:.7f}  torch "
                  f"{norms[s]:.7f}  rel.diff {e:.1e}  allowed {allowed:.1e}  FAIL")
            fails += 1
    clipped = sum(n > CLIP for n in norms)
    print(f"  gradient norms: {STEPS} steps as torch's ({min(norms):.3f} to {max(norms):.3f}), "
          f"{clipped} clipped to {CLIP}")
    if clipped == 0 or clipped == STEPS:
        print(f"FAIL: the clip norm {CLIP} acted on {clipped} of {STEPS} steps: choose one "
              "between the smallest and the largest norm")
        fails += 1
    return fails


def compare(d, variant):
    ref = train_masked(d) if variant == "dropout" else torch.load(f"{d}/ref.pt")
    losses, state = ref["plain"][:2]
    our_norms = []
    ours, tensors, buffers = read_out(f"{d}/out.txt", our_norms)
    fails = 0
    if variant == "adamw":
        fails += compare_norms(ref, our_norms)
    if len(ours) != STEPS:
        print(f"FAIL: spotdeck reported {len(ours)} steps, expected {STEPS}")
        return 1
    drift = 0.0
    worst = 0.0
    for s in range(STEPS):
        e = abs(ours[s] - losses[s]) / abs(losses[s])
        d_s = max(abs(n[0][s] - losses[s]) / abs(losses[s]) for n in ref["nudged"])
        drift = max(drift, d_s)
        allowed = EARLY_TOL if s < EARLY_STEPS else max(FLOOR, DRIFT_FACTOR * drift)
        ok = e <= allowed
        worst = max(worst, e / allowed)
        print(f"  step {s + 1:2d}  loss spotdeck {ours[s]:.7f}  torch {losses[s]:.7f}  "
              f"rel.diff {e:.1e}  nudged torch {d_s:.1e}  allowed {allowed:.1e}"
              f"{'' if ok else '  FAIL'}")
        fails += not ok
    # Parameters, by name: spotdeck names each tensor after its initializer,
    # which torch.onnx.export names after the state_dict key.
    params = [k for k, _ in make_model(variant).named_parameters()]
    missing = [k for k in params if k not in tensors]
    if missing or len(tensors) != len(params):
        print(f"FAIL: spotdeck's tensors {sorted(tensors)} are not the model's {params}")
        return 1
    ours_p = torch.cat([tensors[k] for k in params])
    ref_p = torch.cat([state[k].flatten() for k in params])
    dp = rel(ours_p, ref_p)
    dn = max(rel(torch.cat([n[1][k].flatten() for k in params]), ref_p) for n in ref["nudged"])
    allowed = max(FLOOR, DRIFT_FACTOR * dn)
    print(f"  parameters after {STEPS} steps: spotdeck {dp:.1e} from torch's, nudged torch "
          f"{dn:.1e}, allowed {allowed:.1e}{'' if dp <= allowed else '  FAIL'}")
    fails += dp > allowed
    names = bn_buffer_names(d)
    if variant in ("train", "stem", "cifar", "resnet"):
        if buffers is None or len(names) == 0 or buffers.numel() != sum(
                state[k].numel() for k in names):
            print("FAIL: batch-norm running statistics missing or of the wrong size")
            return 1
        ref_b = torch.cat([state[k].flatten() for k in names])
        db = rel(buffers, ref_b)
        dnb = max(rel(torch.cat([n[1][k].flatten() for k in names]), ref_b)
                  for n in ref["nudged"])
        allowed = max(FLOOR, DRIFT_FACTOR * dnb)
        print(f"  batch-norm running statistics: spotdeck {db:.1e} from torch's, nudged torch "
              f"{dnb:.1e}, allowed {allowed:.1e}{'' if db <= allowed else '  FAIL'}")
        fails += db > allowed
        # They moved: a loader that ignored the updates would fail above,
        # but say so plainly too.
        init_b = torch.cat([torch.tensor(onnx.numpy_helper.to_array(i)).flatten()
                            for k in names for i in onnx.load(f"{d}/model.onnx").graph.initializer
                            if i.name == k])
        moved = rel(ref_b, init_b)
        print(f"  (running statistics moved {moved:.1e} from the file's in {STEPS} steps)")
        fails += moved < 1e-3
    if variant in ("dropout", "general"):
        # Inference with spotdeck's trained tensors: PyTorch's eval() loss on
        # the first batch (dropout the identity) is spotdeck's.
        model = make_model(variant)
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(tensors[k].reshape(p.shape))
        model.eval()
        xs, ys = batches()
        with torch.no_grad():
            want = F.cross_entropy(model(xs[0]), ys[0]).item()
        got = [float(line.split()[1]) for line in open(f"{d}/out.txt")
               if line.startswith("eval_loss ")]
        e = abs(got[0] - want) / abs(want) if got else float("inf")
        print(f"  inference with spotdeck's weights: loss spotdeck {got[0] if got else 'none'} "
              f"torch {want:.7f} rel.diff {e:.1e} allowed {EARLY_TOL:.0e}"
              f"{'' if e <= EARLY_TOL else '  FAIL'}")
        fails += not e <= EARLY_TOL
        # The way back: OUT.onnx (sd_onnx_export_file) passes onnx.checker
        # and holds spotdeck's trained tensors, the constants included.
        back = onnx.load(f"{d}/out.txt.onnx")
        onnx.checker.check_model(back)
        inits = {i.name: torch.tensor(onnx.numpy_helper.to_array(i).copy())
                 for i in back.graph.initializer}
        off = [k for k in params if k not in inits or
               not torch.equal(inits[k].flatten().float(), tensors[k].float())]
        print(f"  written back: {len(params)} trained tensors in the exported file"
              f"{', differing: ' + ', '.join(off) if off else ', all equal'}")
        fails += bool(off)
    print(f"  worst loss difference / allowed: {worst:.2f}")
    return 1 if fails else 0


class Wide(nn.Module):
    """What real exports add around the layers: dropout, log_softmax."""

    def __init__(self):
        super().__init__()
        self.net = Net(True)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        return F.log_softmax(self.drop(self.net(x)), dim=1)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(C * H * W, 16) * 0.05)
        self.b = nn.Parameter(torch.zeros(16))
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.fc(F.relu(torch.flatten(x, 1) @ self.w + self.b))


def exports(d):
    torch.manual_seed(0)
    model = Wide()
    for opset in range(13, 18):
        for mode in ("train", "eval"):
            for fold in (0, 1):
                model.train(mode == "train")
                torch.onnx.export(model, torch.randn(BATCH, C, H, W),
                                  f"{d}/cnn-{opset}-{mode}-fold{fold}.onnx", opset_version=opset,
                                  training=torch.onnx.TrainingMode.TRAINING if mode == "train"
                                  else torch.onnx.TrainingMode.EVAL,
                                  do_constant_folding=bool(fold),
                                  input_names=["x"], dynamic_axes={"x": {0: "N"}})
    for opset in (13, 17):
        torch.onnx.export(Mlp().eval(), torch.randn(BATCH, C, H, W), f"{d}/mlp-{opset}.onnx",
                          opset_version=opset)


class BadSlice(nn.Module):
    """x[:, :, 1::2]: a subsampling that starts at 1, not a shortcut."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3, padding=1)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = self.c(x)
        y = F.relu(y[:, :, ::2, ::2] + y[:, :, 1::2, 1::2])
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class BadPad(nn.Module):
    """A spatial zero pad feeding a max pooling: no shortcut, no Conv or
    AveragePool to take it into its padding."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = F.max_pool2d(F.pad(F.relu(self.c(x)), (1, 1, 1, 1)), 2)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class BadRead(nn.Module):
    """A subsampled activation read by a convolution, not by an Add."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3, padding=1)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = F.relu(self.c(x[:, :, ::2, ::2]))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class BadGate(nn.Module):
    """A squeeze-excitation gate: x times its own pooled (N, C, 1, 1) map,
    two activations of different shapes."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3, padding=1)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = F.relu(self.c(x))
        y = y * torch.sigmoid(F.adaptive_avg_pool2d(y, 1))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class BadRows(nn.Module):
    """A constant with one value per row, (1, 1, H, 1): neither a scalar
    nor per channel."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3, padding=1)
        self.rows = nn.Parameter(torch.ones(1, 1, H, 1))
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = F.relu(self.c(x)) * self.rows
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class BadRatio(nn.Module):
    """nn.Dropout(1.0): every element dropped, nothing to train."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(C, 8, 3, padding=1)
        self.d = nn.Dropout(1.0)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x):
        y = self.d(F.relu(self.c(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


def fold(d):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    big = 2 ** 63 - 1
    a34 = np.arange(12, dtype=np.int64).reshape(3, 4) * 7 - 20
    a232 = np.arange(12, dtype=np.int64).reshape(2, 3, 2) - 5
    a10 = np.arange(10, dtype=np.int64) * 3
    # name: (nodes computing "r" from constants c0.., the constants, numpy's r)
    cases = {
        "slice-neg": (["Slice(c0, c1, c2, c3, c4)"],
                      [a34, [-1, 0], [-big, 4], [0, 1], [-1, 2]], a34[::-1, 0:4:2]),
        "slice-clamp": (["Slice(c0, c1, c2, c3, c4)"], [a10, [1], [100], [0], [3]], a10[1:100:3]),
        "slice-back": (["Slice(c0, c1, c2, c3, c4)"], [a10, [-2], [-9], [0], [-2]],
                       a10[-2:-9:-2]),
        "transpose": (["Transpose(c0) perm=1,0,2"], [a232], a232.transpose(1, 0, 2)),
        "transpose-default": (["Transpose(c0)"], [a232], a232.transpose()),
        "gather": (["Gather(c0, c1) axis=1"], [a34, [[0, 2], [1, -1]]],
                   np.take(a34, [[0, 2], [1, 3]], axis=1)),
        "unsqueeze-squeeze": (["Unsqueeze(c0, c1)", "Squeeze(t0, c2)"],
                              [a10[:3], [0, -1], [0]], a10[:3].reshape(3, 1)),
        "concat": (["Concat(c0, c1) axis=1"], [a34[:2, :2], a34[:2, 3:]],
                   np.concatenate([a34[:2, :2], a34[:2, 3:]], 1)),
        "arith": (["Mul(c0, c1)", "Sub(c2, t0)", "Add(t1, c3)"],
                  [[[2], [-3]], [1, 5, 9], np.array(4, dtype=np.int64), [[10, 20, 30]]],
                  4 - np.array([[2], [-3]]) * np.array([1, 5, 9]) + np.array([[10, 20, 30]])),
        "constantofshape": (["ConstantOfShape(c0) value=7"], [[2, 3]], np.full((2, 3), 7)),
        "reshape": (["Reshape(c0, c1)"], [a232, [0, -1]], a232.reshape(2, 6)),
        "shape-range": (["Shape(c0) start=1", "Shape(c0) end=-1", "Concat(t0, t1) axis=0"],
                        [a232], np.array([3, 2, 2, 3])),
        "cast": (["Cast(c0) to=1", "Cast(t0) to=7"], [a34], a34),
        # F.pad's pads, as torch exports them: (0,0,0,0,8,8) -> ONNX's order.
        "pads": (["Shape(c0)", "Gather(t0, c1) axis=0", "Mul(c2, c3)", "Sub(t2, t1)",
                  "ConstantOfShape(t3) value=0", "Concat(c0, t4) axis=0", "Reshape(t5, c4)",
                  "Slice(t6, c5, c6, c7, c5)", "Transpose(t7) perm=1,0", "Reshape(t8, c5)"],
                 [[0, 0, 0, 0, 8, 8], [0], np.array(4, dtype=np.int64),
                  np.array(2, dtype=np.int64), [-1, 2], [-1], [-big], [0]],
                 np.array([0, 8, 0, 0, 0, 8, 0, 0])),
    }
    F_ = C * H * W

    def build(name, spec, expected, path):
        steps, consts, _ = spec
        nodes, inits = [], []
        for k, v in enumerate(consts):
            inits.append(numpy_helper.from_array(np.asarray(v, dtype=np.int64), f"c{k}"))
        for k, s in enumerate(steps):
            op, rest = s.split("(", 1)
            args, attrs = rest.split(")", 1)
            kw = {}
            for a in attrs.split():
                key, val = a.split("=")
                if key == "value":
                    kw[key] = numpy_helper.from_array(np.array([int(val)], dtype=np.int64))
                elif key == "perm":
                    kw[key] = [int(x) for x in val.split(",")]
                else:
                    kw[key] = int(val)
            nodes.append(helper.make_node(op, [x.strip() for x in args.split(",")],
                                          [f"t{k}" if k < len(steps) - 1 else "r"], **kw))
        flat = np.asarray(expected, dtype=np.int64).reshape(-1)
        inits += [numpy_helper.from_array(flat, "expected"),
                  numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1"),
                  numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
                  numpy_helper.from_array(np.array([F_], dtype=np.int64), "feat"),
                  numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0"),
                  numpy_helper.from_array(np.random.RandomState(0).randn(CLASSES, F_)
                                          .astype(np.float32), "fc.weight"),
                  numpy_helper.from_array(np.zeros(CLASSES, dtype=np.float32), "fc.bias")]
        nodes += [helper.make_node("Reshape", ["r", "minus1"], ["rflat"]),
                  helper.make_node("Sub", ["rflat", "expected"], ["diff"]),
                  helper.make_node("Flatten", ["x"], ["h0"], axis=1)]
        # Every difference gates one Reshape of the activation to (N, F + diff).
        for i in range(flat.size):
            inits.append(numpy_helper.from_array(np.array(i, dtype=np.int64), f"i{i}"))
            nodes += [helper.make_node("Gather", ["diff", f"i{i}"], [f"g{i}"], axis=0),
                      helper.make_node("Unsqueeze", [f"g{i}", "axis0"], [f"u{i}"]),
                      helper.make_node("Add", [f"u{i}", "feat"], [f"f{i}"]),
                      helper.make_node("Concat", ["zero", f"f{i}"], [f"s{i}"], axis=0),
                      helper.make_node("Reshape", [f"h{i}", f"s{i}"], [f"h{i + 1}"])]
        nodes.append(helper.make_node("Gemm", [f"h{flat.size}", "fc.weight", "fc.bias"],
                                      ["logits"], transB=1))
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, ["N", C, H, W])], [helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, ["N", CLASSES])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
        onnx.checker.check_model(m)
        onnx.save(m, path)

    for name, spec in cases.items():
        build(name, spec, spec[2], f"{d}/fold-{name}.onnx")
    # The gate can fail: one expected value off by one.
    for name in ("slice-neg", "pads"):
        wrong = np.asarray(cases[name][2], dtype=np.int64).copy().reshape(-1)
        wrong[len(wrong) // 2] += 1
        build(name, cases[name], wrong, f"{d}/fold-mutant-{name}.onnx")


def resnets(d):
    torch.manual_seed(0)
    model = torch_resnet.ResNet(3).train()
    for opset, fold in ((13, 0), (13, 1), (17, 0), (17, 1)):
        torch.onnx.export(model, torch.randn(2, 3, 32, 32), f"{d}/resnet20-{opset}-fold{fold}.onnx",
                          opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=bool(fold), input_names=["x"],
                          dynamic_axes={"x": {0: "N"}})
    for name, m in (("slice", BadSlice()), ("pad", BadPad()), ("read", BadRead())):
        torch.onnx.export(m.eval(), torch.randn(BATCH, C, H, W), f"{d}/bad-{name}.onnx",
                          opset_version=13, do_constant_folding=False)
    for name, m in (("gate", BadGate()), ("rows", BadRows()), ("ratio", BadRatio())):
        torch.onnx.export(m.train(), torch.randn(BATCH, C, H, W), f"{d}/badop-{name}.onnx",
                          opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


if __name__ == "__main__":
    mode, d = sys.argv[1:3]
    variant = sys.argv[3] if len(sys.argv) > 3 else ""
    if mode == "exports":
        exports(d)
    elif mode == "fold":
        fold(d)
    elif mode == "resnets":
        resnets(d)
    elif mode == "prepare":
        prepare(d, variant)
    else:
        sys.exit(compare(d, variant))
