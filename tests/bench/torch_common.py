"""The PyTorch peers' shared parts (tests/bench/torch_cnn.py,
tests/bench/torch_ddp_cnn.py): Fashion-MNIST as spotdeck's engine reads it,
normalised the same way, and its `cnn` (conv 5x5x32 pad 2, ReLU, maxpool 2,
conv 5x5x64 pad 2, ReLU, maxpool 2, fc 128, ReLU, fc 10)."""
import gzip, struct
import torch
import torch.nn as nn


def load_fashion_mnist(data_dir):
    """The training images (n, 1, 28, 28) as normalised floats, their labels,
    and n, from the data set's gzipped IDX files."""
    with gzip.open(data_dir + "/train-images-idx3-ubyte.gz") as f:
        magic, n, h, w = struct.unpack(">IIII", f.read(16))
        x = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).reshape(n, 1, h, w)
    with gzip.open(data_dir + "/train-labels-idx1-ubyte.gz") as f:
        f.read(8)
        y = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    return (x.float() / 255 - 0.2860) / 0.3530, y, n


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
