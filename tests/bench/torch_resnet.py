#!/usr/bin/python3
"""PyTorch peer for tests/bench/engine-vs-torch: the CIFAR ResNet-20/32 of
He et al. 2016 (section 4.2) exactly as engine/model.c builds it: conv 3x3x16,
batch-norm, ReLU; 3 stages of n basic blocks (16, 32, 64 channels; the first
block of stages 2 and 3 has stride 2) with parameter-free "option A" shortcuts
(stride-2 subsampling, new channels zero-padded equally on both sides);
global average pooling; fc 10.  Convolutions carry no bias (batch-norm follows).
Trained with SGD (momentum 0.9, weight decay 5e-4) on synthetic CIFAR-shaped
data (3x32x32, 10 classes) already in memory, at the given batch and thread
count.  Warm-up steps are run first and not timed.  Prints one JSON line with
images/s over the timed steps, and images per second of the process's CPU
time.

With --export PATH it instead writes this network to PATH as ONNX
(torch.onnx.export, opset 13, TrainingMode.TRAINING, the batch a dynamic
axis), the file tests/bench/onnx-vs-builtin trains in the engine; the
shortcut exports as Slice (steps s) and Pad.  tests/engine/onnx_torch_ref.py
imports Block and ResNet from here, so the tests and the bench use the same
network."""
import argparse, json, time
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.stride, self.pad = stride, (cout - cin) // 2

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x
        if self.stride != 1 or self.pad:
            sc = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + sc)


class ResNet(nn.Module):
    def __init__(self, n, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage in range(3):
            cout = 16 << stage
            for b in range(n):
                layers.append(Block(cin, cout, 2 if stage > 0 and b == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def export(model, path, batch=2, hw=32):
    """The network as torch.onnx.export writes it in training mode."""
    model.train()
    torch.onnx.export(model, torch.randn(batch, 3, hw, hw), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], dynamic_axes={"x": {0: "N"}})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=5, help="5: resnet32, 3: resnet20")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--export", metavar="PATH", help="write the network as ONNX and exit")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = ResNet(a.blocks)
    if a.export:
        export(model, a.export)
        return
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    # A few batches of synthetic data, cycled: the data is not what is measured.
    x = torch.randn(4 * a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (4 * a.batch,))

    def step(i):
        j = (i % 4) * a.batch
        opt.zero_grad()
        loss = loss_fn(model(x[j:j + a.batch]), y[j:j + a.batch])
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(a.steps):
        last = step(a.warmup + i)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    # images per second of this process's CPU time: with one thread the figure
    # least disturbed by other processes (as bench-train's images_per_cpu_sec).
    print(json.dumps({"peer": "pytorch " + torch.__version__, "images_per_sec": a.steps * a.batch / dt,
                      "images_per_cpu_sec": a.steps * a.batch / dc,
                      "steps": a.steps, "batch": a.batch, "threads": a.threads, "last_loss": last}))


if __name__ == "__main__":
    main()
