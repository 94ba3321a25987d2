"""GPT side of tests/gpu/run.sh: exports examples/char-gpt's model (model.py,
nanoGPT's shape) at a given size to ONNX for spotdeck, and is PyTorch's
peer in the tokens/s check, training the same model the same way.

  export --out F.onnx [size]   torch.onnx.export as examples/char-gpt/export.py
                               does (opset 14, training mode, no folding,
                               dropout 0), N(0, 0.02) weights from --seed
  bench  --batch B --steps N [size] [--tf32] [--device cuda|cpu]
                               whole training steps on random tokens: copy
                               the (B, T) windows to the device, forward,
                               mean next-token cross-entropy, backward, SGD
                               (lr 0.01, momentum 0.9, as gpu-check
                               gpt-throughput), the loss read back (one
                               synchronisation per step, as spotdeck); one
                               JSON line with tokens_per_sec
  size: --layers --heads --embd --block --vocab, and --gelu erf|tanh (the
  MLP's GELU: exact, or GPT-2's tanh approximation).  GPT-2 small is
  --layers 12 --heads 12 --embd 768 --block 1024 --vocab 50257.
Precision: strict float32 unless --tf32 (TF32 matmuls, as
SPOTDECK_CUDA_TF32=1)."""
import argparse
import json
import os
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "char-gpt"))
from model import GPT, GPTConfig  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("what", choices=["export", "bench"])
p.add_argument("--out")
p.add_argument("--layers", type=int, default=2)
p.add_argument("--heads", type=int, default=2)
p.add_argument("--embd", type=int, default=32)
p.add_argument("--block", type=int, default=16)
p.add_argument("--vocab", type=int, default=64)
p.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
p.add_argument("--extra", action="store_true",
               help="export: ops a GPT lacks after the final LayerNorm (Extra below)")
p.add_argument("--seed", type=int, default=1)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--tf32", action="store_true")
p.add_argument("--device", default="cuda")
a = p.parse_args()

torch.manual_seed(a.seed)
cfg = GPTConfig(block_size=a.block, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads,
                n_embd=a.embd, dropout=0.0, bias=True)
model = GPT(cfg)
if a.gelu == "tanh":
    for blk in model.h:
        blk.mlp.gelu = nn.GELU(approximate="tanh")



class Extra(nn.Module):
    """Ops the GPT itself does not export, so that the GPU check covers
    them too: a trained per-channel gain (Mul by an initializer of C values:
    SEQ_BIAS with a trained constant), a trained scalar shift (SEQ_BIAS, a
    trained scalar), Pow by 2 and Sqrt (SEQ_POW), a constant Add and Mul,
    and the sum of two activations."""

    def __init__(self, c):
        super().__init__()
        self.gain = nn.Parameter(1.0 + 0.1 * torch.randn(c))
        self.shift = nn.Parameter(torch.tensor([0.05]))

    def forward(self, x):
        y = x * self.gain + self.shift
        return y + 0.1 * torch.sqrt(y ** 2 + 1.0)


if a.extra:
    extra = Extra(a.embd)
    ln_f = model.ln_f
    model.ln_f = nn.Sequential(ln_f, extra)

if a.what == "export":
    if not a.out:
        raise SystemExit("export: --out F.onnx")
    warnings.filterwarnings("ignore")
    model.train(True)
    example = torch.zeros(2, a.block, dtype=torch.long)
    torch.onnx.export(model, example, a.out, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})
    n = sum(q.numel() for q in model.parameters())
    print("exported %s: %d layers, %d heads, %d channels, block %d, vocabulary %d, GELU %s, "
          "%d parameters" % (a.out, a.layers, a.heads, a.embd, a.block, a.vocab, a.gelu, n))
    sys.exit(0)

if a.device == "cuda" and not torch.cuda.is_available():
    raise SystemExit("torch %s sees no CUDA device" % torch.__version__)
dev = torch.device(a.device)
torch.backends.cuda.matmul.allow_tf32 = a.tf32
torch.backends.cudnn.allow_tf32 = a.tf32
model.to(dev).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = torch.Generator().manual_seed(5)
data = torch.randint(0, a.vocab, (a.batch, a.block + 1), generator=g, dtype=torch.long)
pin = a.device == "cuda"
xh = data[:, :-1].contiguous()
yh = data[:, 1:].contiguous()
if pin:
    xh, yh = xh.pin_memory(), yh.pin_memory()


def step():
    x = xh.to(dev, non_blocking=True)
    y = yh.to(dev, non_blocking=True)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(a.warmup):
    step()
t0 = time.perf_counter()
for _ in range(a.steps):
    last = step()
dt = time.perf_counter() - t0
tokens = a.steps * a.batch * a.block
print(json.dumps({"engine": "pytorch %s" % torch.__version__, "batch": a.batch,
                  "block": a.block, "steps": a.steps, "tokens_per_sec": tokens / dt,
                  "ms_per_step": dt * 1000 / a.steps, "last_loss": last, "tf32": a.tf32,
                  "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu"}))
