#!/usr/bin/python3
"""The reference side of tests/engine/test-gpt-torch.sh: a small
examples/char-gpt GPT (2 layers, 2 heads, 32 channels, block 16, vocabulary
64, dropout 0) from a fixed seed, exported by export.py's export() at
opsets 14 and 17 in training mode without constant folding, and what
PyTorch computes with it on fixed token windows:

    gpt_torch_ref.py OUTDIR [tanh | nobias]

writes OUTDIR/gpt14.onnx .. gpt17.onnx, gpt14-fold.onnx (constants folded)
and gpt17-eval.onnx (eval mode), OUTDIR/tokens.i32 (STEPS x
BATCH x (BLOCK + 1) int32 windows: x = window[:-1], y = window[1:]) and
OUTDIR/ref.txt, read by tests/engine/gpt-onnx.c:
    config STEPS BATCH BLOCK VOCAB LR
    loss MEAN            the first window batch's mean cross-entropy (train mode)
    eval_loss MEAN       the same in eval mode, no gradient
    grad NAME COUNT      per parameter (named_parameters: the tied
    v v v ...            wte.weight once), its gradient of the mean loss
    adamw_config LR BETA1 BETA2 EPS WEIGHT_DECAY CLIP   (export.py's TRAIN)
    step S MEAN ALLOWED  SGD at LR (plain, no momentum), one batch per step:
                         the loss before step S's update, and the relative
                         difference the engine's may have from it
    adamw S MEAN ALLOWED the same from the same weights with AdamW at that
                         constant rate, gradients clipped to norm CLIP
With "tanh" the MLPs use GPT-2's tanh approximation of GELU
(nn.GELU(approximate="tanh"): the export's Mul / Tanh chain instead of
Erf); with "nobias" the Linears have no biases (GPTConfig(bias=False), as
nanoGPT's default: MatMuls without an Add); either writes only the opset
14 and 17 training exports.
All values %.9g of float32 (torch's own precision: this is the run the
engine must match).  ALLOWED is the yardstick of
tests/engine/onnx_torch_ref.py: PyTorch trains NUDGED more times from its
initial weights moved by 1 ulp (up, down, alternating), and step S allows
max(FLOOR, DRIFT_FACTOR x the nudged runs' largest relative loss drift up
to step S): how far this model's training carries a rounding difference."""
import copy, dataclasses, os, sys
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "char-gpt"))
sys.path.insert(0, os.path.join(here, "..", "..", "examples"))
from export import TRAIN, export   # noqa: E402
from model import GPT, GPTConfig, loss_nats   # noqa: E402

STEPS, BATCH, LR = 30, 4, 0.2
NUDGED, DRIFT_FACTOR, FLOOR = 3, 10.0, 1e-5
CONFIG = GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0)


def train(model, windows, adamw=False):
    """STEPS steps of SGD at LR, or of AdamW with export.py's settings at a
    constant rate (gradients clipped to its norm first), one batch of
    windows each: the losses."""
    if adamw:
        opt = torch.optim.AdamW(model.parameters(), lr=TRAIN["lr"], betas=TRAIN["betas"],
                                eps=TRAIN["eps"], weight_decay=TRAIN["weight_decay"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for s in range(STEPS):
        x, y = windows[s, :, :-1], windows[s, :, 1:]
        opt.zero_grad()
        loss = loss_nats(model(x), y)
        loss.backward()
        if adamw:
            torch.nn.utils.clip_grad_norm_(model.parameters(), TRAIN["clip_grad_norm"])
        opt.step()
        losses.append(loss.item())
    return losses


def nudge(model, k):
    """Every parameter 1 ulp up (k 0), down (1) or alternating (2)."""
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


def write_bad(out):
    """Exports edited into graphs the engine must refuse, one line each:
    OUTDIR/bad.txt holds "FILE<TAB>what the message must contain"."""
    import onnx
    cases = []

    def edit(src, name, node_op, fn, want):
        m = onnx.load(os.path.join(out, src))
        nd = next(n for n in m.graph.node if n.op_type == node_op)
        fn(m, nd)
        onnx.save(m, os.path.join(out, name))
        cases.append("%s\t%s" % (name, want))

    def set_attr(nd, key, ints=None, i=None):
        a = next(a for a in nd.attribute if a.name == key)
        if ints is not None:
            del a.ints[:]
            a.ints.extend(ints)
        else:
            a.i = i

    edit("gpt17.onnx", "bad-softmax.onnx", "Softmax", lambda m, nd: set_attr(nd, "axis", i=2),
         "on its last axis only")
    # The first Transpose of an activation (the head split, (0, 2, 1, 3))
    # made to move the batch.
    m = onnx.load(os.path.join(out, "gpt17.onnx"))
    nd = next(n for n in m.graph.node if n.op_type == "Transpose" and
              list(n.attribute[0].ints) == [0, 2, 1, 3])
    set_attr(nd, "perm", ints=[2, 0, 1, 3])
    onnx.save(m, os.path.join(out, "bad-transpose.onnx"))
    cases.append("bad-transpose.onnx\tthe batch must stay first")
    edit("gpt14.onnx", "bad-reducemean.onnx", "ReduceMean",
         lambda m, nd: set_attr(nd, "axes", ints=[1]), "head of the LayerNorm chain")
    with open(os.path.join(out, "bad.txt"), "w") as f:
        f.write("\n".join(cases) + "\n")


def write_mlp(out):
    """An image MLP whose first layer is MatMul(x, Transpose(W)), the
    layout a GPT's Linears export in, and whose second multiplies by a plain
    (K, N) weight: OUTDIR/mlp.onnx, mlp.x (3 x 1 x 2 x 6 float32) and
    mlp.txt, "LOSS" the summed cross-entropy on labels 1, 4, 2."""
    torch.manual_seed(5)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(10, 12) * 0.3)
            self.w2 = torch.nn.Parameter(torch.randn(10, 5) * 0.3)

        def forward(self, x):
            return torch.relu(x.flatten(1) @ self.w.t()) @ self.w2

    m = MLP()
    x = torch.randn(3, 1, 2, 6)
    torch.onnx.export(m, x, os.path.join(out, "mlp.onnx"), opset_version=14,
                      do_constant_folding=False, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}})
    x.numpy().astype("float32").tofile(os.path.join(out, "mlp.x"))
    loss = torch.nn.functional.cross_entropy(m(x), torch.tensor([1, 4, 2]), reduction="sum")
    with open(os.path.join(out, "mlp.txt"), "w") as f:
        f.write("%.9g\n" % loss.item())


def main():
    out = sys.argv[1]
    variant = sys.argv[2] if len(sys.argv) > 2 else None
    tanh = variant == "tanh"
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    model = GPT(dataclasses.replace(CONFIG, bias=False) if variant == "nobias" else CONFIG)
    if tanh:
        for block in model.h:
            block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    for opset in ((14, 17) if variant else (14, 15, 16, 17)):
        export(model, os.path.join(out, "gpt%d.onnx" % opset), opset, True, False)
    # Forward only: constant folding unties the output projection (a
    # transposed copy of wte under another name) and eval mode merges equal
    # initializers, so neither trains as the model does; both compute its
    # loss.
    if not variant:
        export(model, os.path.join(out, "gpt14-fold.onnx"), 14, True, True)
        export(model, os.path.join(out, "gpt17-eval.onnx"), 17, False, False)
        write_bad(out)
        write_mlp(out)
    g = torch.Generator().manual_seed(99)
    T, V = CONFIG.block_size, CONFIG.vocab_size
    # Skewed ids (a few frequent ones, as text has) so the loss moves.
    windows = (torch.randint(0, V, (STEPS, BATCH, T + 1), generator=g) *
               torch.randint(0, 2, (STEPS, BATCH, T + 1), generator=g)) % V
    windows.to(torch.int32).numpy().tofile(os.path.join(out, "tokens.i32"))
    lines = ["config %d %d %d %d %.9g" % (STEPS, BATCH, T, V, LR)]
    x, y = windows[0, :, :-1], windows[0, :, 1:]
    model.train()
    model.zero_grad()
    loss = loss_nats(model(x), y)
    loss.backward()
    lines.append("loss %.9g" % loss.item())
    for name, p in model.named_parameters():
        lines.append("grad %s %d" % (name, p.numel()))
        lines.append(" ".join("%.9g" % v for v in p.grad.flatten().tolist()))
    model.eval()
    with torch.no_grad():
        lines.append("eval_loss %.9g" % loss_nats(model(x), y).item())
    model.train()
    start = copy.deepcopy(model.state_dict())
    lines.append("adamw_config %.9g %.9g %.9g %.9g %.9g %.9g" % (
        TRAIN["lr"], TRAIN["betas"][0], TRAIN["betas"][1], TRAIN["eps"], TRAIN["weight_decay"],
        TRAIN["clip_grad_norm"]))
    for adamw in (False, True):
        model.load_state_dict(start)
        plain = train(model, windows, adamw)
        nudged = []
        for k in range(NUDGED):
            model.load_state_dict(start)
            nudge(model, k)
            nudged.append(train(model, windows, adamw))
        drift = 0.0
        for s in range(STEPS):
            drift = max([drift] + [abs(n[s] - plain[s]) / abs(plain[s]) for n in nudged])
            lines.append("%s %d %.9g %.3g" % ("adamw" if adamw else "step", s, plain[s],
                                              max(FLOOR, DRIFT_FACTOR * drift)))
    with open(os.path.join(out, "ref.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
