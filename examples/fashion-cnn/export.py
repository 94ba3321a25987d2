#!/usr/bin/python3
"""The built-in `cnn` written in PyTorch, exported to ONNX, with Debian's
Fashion-MNIST (package dataset-fashion-mnist) saved as NumPy arrays: what a
person does to train their own model on their own data with spotdeck.

    /usr/bin/python3 examples/fashion-cnn/export.py --out fmnist
    ./spotdeck --job fmnist/job.json

writes fmnist/model.onnx, fmnist/data/{train,test}_{x,y}.npy and
fmnist/job.json (3 epochs, global batch 256, four workers).  The network:
conv 5x5x32 pad 2, ReLU, max-pool 2, conv 5x5x64 pad 2, ReLU, max-pool 2,
fc 128, ReLU, fc 10, as engine/model.h describes `cnn`."""
import argparse, gzip, os, sys
import numpy as np
import torch
import torch.nn as nn
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import export_onnx, save_npy, write_job

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--out", default="fmnist-example", help="folder to write into")
p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="the IDX .gz files")
p.add_argument("--train-samples", type=int, default=60000, help="first N training images (tests use fewer)")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()


def idx(name):
    """An IDX file of the MNIST format (yann.lecun.com/exdb/mnist): big-endian
    magic, dimensions, then uint8 data."""
    with gzip.open(os.path.join(a.data, name + ".gz"), "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


torch.manual_seed(a.seed)
os.makedirs(a.out, exist_ok=True)
export_onnx(CNN(), torch.randn(2, 1, 28, 28), os.path.join(a.out, "model.onnx"))
xtr, ytr = idx("train-images-idx3-ubyte"), idx("train-labels-idx1-ubyte")
xte, yte = idx("t10k-images-idx3-ubyte"), idx("t10k-labels-idx1-ubyte")
n = min(a.train_samples, len(xtr))
# (n, 28, 28) uint8 is one channel; labels as int64 class ids.
save_npy(a.out, xtr[:n], ytr[:n].astype(np.int64), xte, yte.astype(np.int64))
# Fashion-MNIST's pixel mean and std (the constants engine/data.c uses).
job = write_job(a.out, model="model.onnx", dataset="npy", data_dir=os.path.abspath(os.path.join(a.out, "data")),
                normalize={"mean": [0.2860], "std": [0.3530]}, epochs=a.epochs, global_batch=256,
                lr=0.05, workers=4, seed=a.seed)
print("wrote %s/model.onnx, %s/data/*.npy (%d training images) and %s" % (a.out, a.out, n, job))
