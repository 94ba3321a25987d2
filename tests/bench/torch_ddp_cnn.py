#!/usr/bin/python3
"""PyTorch DDP peer for tests/bench/ddp-vs-torch: the `cnn` of torch_cnn.py
(conv 5x5x32 pad 2, ReLU, maxpool 2, conv 5x5x64 pad 2, ReLU, maxpool 2,
fc 128, ReLU, fc 10; SGD momentum 0.9, weight decay 5e-4) trained by
--world processes x 1 thread with DistributedDataParallel over the gloo
backend on loopback, on Fashion-MNIST, each rank computing its half of the
same global batch.  Measured as tests/bench/scaling.py measures spotdeck:
rank 0 stamps the wall clock when a step has completed (the loss read back,
so the all-reduce and update are done) at --samples steps --gap apart from
step --warm on.  Prints one JSON line with images/s (global batch) over that
stretch."""
import argparse, json, os, socket, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--batch", type=int, default=64, help="global batch")
p.add_argument("--world", type=int, default=2)
p.add_argument("--warm", type=int, default=100)
p.add_argument("--gap", type=int, default=20)
p.add_argument("--samples", type=int, default=8)
p.add_argument("--rank", type=int, default=-1, help="internal: this process's rank")
p.add_argument("--port", type=int, default=0, help="internal: rendezvous port")
a = p.parse_args()

if a.rank < 0:
    # Launcher: one process per rank, this script again, on a free port.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    ps = [subprocess.Popen([sys.executable, __file__] + sys.argv[1:] + ["--rank", str(r), "--port", str(port)],
                           env=env, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL)
          for r in range(a.world)]
    out = ps[0].communicate()[0]
    rcs = [p.wait() for p in ps]
    sys.stdout.buffer.write(out)
    sys.exit(max(rcs))

# Each rank keeps to a CPU of its own when there are enough, as spotdeck's
# local workers do (the job's pin_workers), before torch starts its threads.
cpus = sorted(os.sched_getaffinity(0))
if a.world <= len(cpus):
    os.sched_setaffinity(0, {cpus[a.rank]})

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch_common import cnn, load_fashion_mnist

torch.set_num_threads(1)
torch.manual_seed(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=a.rank, world_size=a.world)

x, y, n = load_fashion_mnist(a.data_dir)

model = DDP(cnn())
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loss_fn = nn.CrossEntropyLoss()
perm = torch.randperm(n)   # same seed on every rank: the same global order
share = a.batch // a.world


def step(i):
    # This rank's share of step i's global batch (drop_last, as spotdeck).
    steps_per_epoch = n // a.batch
    base = (i % steps_per_epoch) * a.batch + a.rank * share
    idx = perm[base:base + share]
    opt.zero_grad()
    loss = loss_fn(model(x[idx]), y[idx])
    loss.backward()
    opt.step()
    return loss.item()


stamps = []
i = 0
while len(stamps) < a.samples:
    step(i)
    i += 1
    if i >= a.warm and (i - a.warm) % a.gap == 0:
        stamps.append((i, time.time()))
dist.barrier()
dist.destroy_process_group()
if a.rank == 0:
    (s0, t0), (s1, t1) = stamps[0], stamps[-1]
    print(json.dumps({"peer": "pytorch %s DDP gloo" % torch.__version__, "world": a.world,
                      "images_per_sec": (s1 - s0) * a.batch / (t1 - t0), "batch": a.batch}), flush=True)
