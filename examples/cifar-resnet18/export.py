#!/usr/bin/python3
"""A CIFAR-style ResNet-18 (He et al. 2016's basic blocks [2, 2, 2, 2] with
64-512 channels, a 3x3 stem without max-pooling, 1x1 convolution + batch-norm
shortcuts where the shape changes, as the CIFAR variants of kuangliu's and
timm's code build it) exported to ONNX, with CIFAR-10 saved as NumPy arrays.

CIFAR-10 is not packaged in Debian: give --cifar DIR with the "python
version" (cifar-10-batches-py: data_batch_1..5, test_batch) if you have it;
without it the script makes CIFAR-shaped data of its own (3x32x32 uint8,
10 classes, each class a blurred colour pattern plus noise), enough to see
the run train and to try spot revocations on.

    /usr/bin/python3 examples/cifar-resnet18/export.py --out r18
    ./spotdeck --job r18/job.json

The job: 3 epochs, global batch 128, crop4+flip augmentation, CIFAR-10's
per-channel mean and std, four workers."""
import argparse, os, pickle, sys
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import export_onnx, save_npy, write_job

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--out", default="cifar-resnet18-example", help="folder to write into")
p.add_argument("--cifar", help="the cifar-10-batches-py folder, if you have it")
p.add_argument("--train-samples", type=int, default=50000, help="training images (made or first N)")
p.add_argument("--test-samples", type=int, default=10000)
p.add_argument("--width", type=int, default=64, help="channels of the first stage (64: ResNet-18)")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))


class ResNet18(nn.Module):
    def __init__(self, w, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, w, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        layers, cin = [], w
        for stage, stride in enumerate((1, 2, 2, 2)):
            cout = w << stage
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def cifar(folder):
    """CIFAR-10's python version (cs.toronto.edu/~kriz/cifar.html): pickled
    dicts with b"data" (n, 3072) uint8 in R, G, B planes and b"labels"."""
    def load(name):
        with open(os.path.join(folder, name), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        return d[b"data"].reshape(-1, 3, 32, 32), np.array(d[b"labels"], np.int64)
    parts = [load("data_batch_%d" % i) for i in range(1, 6)]
    xtr, ytr = np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])
    xte, yte = load("test_batch")
    return xtr[:a.train_samples], ytr[:a.train_samples], xte[:a.test_samples], yte[:a.test_samples]


def made_up(seed):
    """CIFAR-shaped data of our own: each class a smooth random colour
    pattern, each image its class's pattern, shifted and noisy."""
    g = np.random.default_rng(seed)
    base = g.normal(0, 1, (10, 3, 8, 8))
    base = np.kron(base, np.ones((1, 1, 4, 4)))            # 32x32, blocky
    def split(n):
        y = g.integers(0, 10, n)
        x = 128 + 40 * base[y] + g.normal(0, 30, (n, 3, 32, 32))
        return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)
    xtr, ytr = split(a.train_samples)
    xte, yte = split(a.test_samples)
    return xtr, ytr, xte, yte


torch.manual_seed(a.seed)
os.makedirs(a.out, exist_ok=True)
export_onnx(ResNet18(a.width), torch.randn(2, 3, 32, 32), os.path.join(a.out, "model.onnx"))
xtr, ytr, xte, yte = cifar(a.cifar) if a.cifar else made_up(a.seed)
d = save_npy(a.out, xtr, ytr, xte, yte)
# CIFAR-10's per-channel mean and std of pixel / 255.
job = write_job(a.out, model="model.onnx", dataset="npy", data_dir=os.path.abspath(d), layout="NCHW",
                normalize={"mean": [0.4914, 0.4822, 0.4465], "std": [0.2470, 0.2435, 0.2616]},
                augment="crop4+flip", epochs=a.epochs, global_batch=128, lr=0.05, workers=4, seed=a.seed)
print("wrote %s/model.onnx (ResNet-18, width %d), %s/*.npy (%s, %d training images) and %s"
      % (a.out, a.width, d, "CIFAR-10" if a.cifar else "made-up CIFAR-shaped data", len(xtr), job))
