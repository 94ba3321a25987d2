"""PyTorch peer for tests/gpu/run.sh's throughput check: the same models as
spotdeck's engine (engine/model.h) trained the same way on the same GPU, in
the same precision, with the same data path, so the images/s compare.

  cnn       conv 5x5x32 pad 2, ReLU, maxpool 2, conv 5x5x64 pad 2, ReLU,
            maxpool 2, fc 128, ReLU, fc 10; 1x28x28 inputs (Fashion-MNIST's)
  resnet32  He et al. 2016's CIFAR ResNet-32: conv 3x3x16, 3 stages of 5 basic
            blocks (16, 32, 64 channels), batch-norm after every conv, option A
            shortcuts (stride-2 subsampling, zero-padded channels), global
            average pooling, fc 10; 3x32x32 inputs (CIFAR-10's)

Each step, as spotdeck's: gather the batch from a host dataset (synthetic,
40 batches) into page-locked memory, copy it to the GPU without blocking,
forward, cross-entropy, backward, SGD (momentum 0.9, weight decay 5e-4), and
read the loss back (loss.item(), one synchronisation per step, as spotdeck
reads its metrics).  Precision: strict float32 unless --tf32 (then TF32 in
cuDNN and cuBLAS, as SPOTDECK_CUDA_TF32=1).  --benchmark turns on
torch.backends.cudnn.benchmark (measured algorithm choice, as
SPOTDECK_CUDA_CONV_ALGO=find).  Prints one JSON line."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["cnn", "resnet32", "resnet18"], required=True)
p.add_argument("--width", type=int, default=64, help="resnet18: channels of the first stage")
p.add_argument("--batch", type=int, required=True)
p.add_argument("--steps", type=int, default=200)
p.add_argument("--warmup", type=int, default=20)
p.add_argument("--tf32", action="store_true")
p.add_argument("--benchmark", action="store_true")
p.add_argument("--device", default="cuda", help="cuda (the check) or cpu (a smoke test)")
a = p.parse_args()

if a.device == "cuda" and not torch.cuda.is_available():
    raise SystemExit("torch %s sees no CUDA device" % torch.__version__)
torch.backends.cudnn.allow_tf32 = a.tf32
torch.backends.cuda.matmul.allow_tf32 = a.tf32
torch.backends.cudnn.benchmark = a.benchmark
torch.manual_seed(1)
dev = torch.device(a.device)
cuda = dev.type == "cuda"


def sync():
    if cuda:
        torch.cuda.synchronize()


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, (cout - cin) // 2

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        s = x
        if self.stride != 1 or self.pad:
            s = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(y + s)


class ResNet(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage, ch in enumerate((16, 32, 64)):
            for b in range(n):
                layers.append(Block(cin, ch, 2 if stage > 0 and b == 0 else 1))
                cin = ch
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Block18(nn.Module):
    """examples/cifar-resnet18/export.py's basic block (1x1 conv + batch-norm
    shortcut where the shape changes): the network spotdeck trains from that
    script's ONNX file."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))


class ResNet18(nn.Module):
    """examples/cifar-resnet18/export.py's CIFAR ResNet-18."""

    def __init__(self, w, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, w, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        layers, cin = [], w
        for stage, stride in enumerate((1, 2, 2, 2)):
            cout = w << stage
            layers += [Block18(cin, cout, stride), Block18(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


if a.model == "resnet18":
    shape = (3, 32, 32)
    model = ResNet18(a.width)
elif a.model == "cnn":
    shape = (1, 28, 28)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
else:
    shape = (3, 32, 32)
    model = ResNet(5)
model = model.to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loss_fn = nn.CrossEntropyLoss()

n = a.batch * 40
x = torch.randn((n,) + shape)
y = torch.randint(0, 10, (n,), dtype=torch.uint8)
xb_host = torch.empty((a.batch,) + shape)
yb_host = torch.empty((a.batch,), dtype=torch.uint8)
if cuda:
    xb_host, yb_host = xb_host.pin_memory(), yb_host.pin_memory()
xb = torch.empty((a.batch,) + shape, device=dev)
yb = torch.empty((a.batch,), dtype=torch.uint8, device=dev)
perm = torch.randperm(n)


def step(i):
    start = (i * a.batch) % (n - a.batch)
    idx = perm[start:start + a.batch]
    torch.index_select(x, 0, idx, out=xb_host)
    torch.index_select(y, 0, idx, out=yb_host)
    xb.copy_(xb_host, non_blocking=True)
    yb.copy_(yb_host, non_blocking=True)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(xb), yb.long())
    loss.backward()
    opt.step()
    return loss.item()


for i in range(a.warmup):
    step(i)
sync()
t0 = time.perf_counter()
for i in range(a.steps):
    last = step(a.warmup + i)
sync()
dt = time.perf_counter() - t0
print(json.dumps({
    "engine": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
    "steps": a.steps, "images_per_sec": a.steps * a.batch / dt, "ms_per_step": dt * 1000 / a.steps,
    "last_loss": last, "tf32": a.tf32, "benchmark": a.benchmark,
    "device": torch.cuda.get_device_name(0) if cuda else "cpu",
    "cudnn": torch.backends.cudnn.version() if cuda else None}))
