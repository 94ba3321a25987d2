#!/usr/bin/python3
"""PyTorch peer for tests/bench/bf16-vs-torch: the CIFAR ResNet-32 of
tests/bench/torch_resnet.py (the network engine/model.c builds) trained with
SGD (momentum 0.9, weight decay 5e-4) under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed precision on the
CPU: convolutions and matrix products in bf16 (oneDNN's bf16 kernels, AMX or
AVX512-BF16 where the CPU has them), fp32 weights, optimizer and loss, as in
spotdeck's bf16.  --channels-last keeps model and input in
torch.channels_last, the layout PyTorch recommends for it.  Synthetic
CIFAR-shaped data already in memory; warm-up steps first, not timed.  Prints
one JSON line: images/s over the timed steps and what ran."""
import argparse, json, os, sys, time
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_resnet import ResNet


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=5, help="5: resnet32, 3: resnet20")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = ResNet(a.blocks).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(4 * a.batch, 3, 32, 32).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (4 * a.batch,))

    dtype = [None]   # what autocast made the network compute in

    def step(i):
        j = (i % 4) * a.batch
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x[j:j + a.batch])
        dtype[0] = str(out.dtype).replace("torch.", "")
        # The loss in fp32, as autocast's recipe has it.
        loss = loss_fn(out.float(), y[j:j + a.batch])
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(a.steps):
        last = step(a.warmup + i)
    dt = time.perf_counter() - t0
    print(json.dumps({"peer": "pytorch %s autocast bf16%s" % (torch.__version__,
                                                             ", channels-last" if a.channels_last else ""),
                      "images_per_sec": a.steps * a.batch / dt, "steps": a.steps, "batch": a.batch,
                      "threads": a.threads, "last_loss": last,
                      "mkldnn": torch.backends.mkldnn.is_available(), "logits_dtype": dtype[0]}))


if __name__ == "__main__":
    main()
