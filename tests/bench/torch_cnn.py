#!/usr/bin/python3
"""PyTorch peer for tests/bench/engine-vs-torch: the same `cnn` (conv 5x5x32
pad 2, ReLU, maxpool 2, conv 5x5x64 pad 2, ReLU, maxpool 2, fc 128, ReLU,
fc 10) trained with SGD (momentum 0.9, weight decay 5e-4) on Fashion-MNIST at
the same batch and thread count.  Prints one JSON line with images/s measured
over the timed steps (data already in memory, as in spotdeck's engine)."""
import argparse, json, time
import torch
import torch.nn as nn
from torch_common import cnn, load_fashion_mnist

p = argparse.ArgumentParser()
p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=300)
p.add_argument("--warmup", type=int, default=20)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)

x, y, n = load_fashion_mnist(a.data_dir)

model = cnn()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loss_fn = nn.CrossEntropyLoss()
perm = torch.randperm(n)

def step(i):
    idx = perm[(i * a.batch) % (n - a.batch):][:a.batch]
    opt.zero_grad()
    loss = loss_fn(model(x[idx]), y[idx])
    loss.backward()
    opt.step()
    return loss.item()

for i in range(a.warmup):
    step(i)
t0 = time.perf_counter()
for i in range(a.steps):
    last = step(a.warmup + i)
dt = time.perf_counter() - t0
print(json.dumps({"peer": "pytorch " + torch.__version__, "images_per_sec": a.steps * a.batch / dt,
                  "steps": a.steps, "batch": a.batch, "threads": a.threads, "last_loss": last}))
