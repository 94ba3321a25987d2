#!/usr/bin/python3
"""PyTorch's losses for the steps llm.c's train_gpt2.c takes in
tests/bench/gpt-vs-llmc: the same model (llmc_ckpt.py's tanh-GELU example
GPT, the weights llm.c loads from model.ckpt), the same windows and the same
AdamW, so that llm.c's printed losses can be checked against them.

    /usr/bin/python3 tests/bench/llmc_reference.py --data train.bin --batch B --steps N [--double]

The windows are train_gpt2.c's DataLoader's with shuffling off (the bench
patches dataloader_init's should_shuffle to 0; llmc/dataloader.h,
dataloader_load_batch): step k reads the B*T + 1 tokens from token k*B*T of
the file (after its 256-int32 header) and window b is tokens b*T .. b*T + T
of them, the targets shifted by one.  The optimizer is train_gpt2.c's
gpt2_update call: AdamW lr 1e-4, betas 0.9/0.999, eps 1e-8, weight decay 0,
no clipping, no schedule (torch.optim.AdamW computes the same update).
Prints one JSON line: {"losses": [loss of step 0, 1, ...]} in nats, each the
loss of the forward pass before that step's update, as train_gpt2.c prints
it.  --double runs in float64, the reference the float32 runs' drift is
measured against."""
import argparse, json, os, sys
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmc_ckpt import tanh_gelu_model  # noqa: E402

T = 64   # train_gpt2.c's sequence length, the example's block size


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="train.bin in llm.c's format (prepare.py)")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--double", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    tokens = np.fromfile(a.data, dtype="<u2")[512:].astype(np.int64)   # after the 256-int32 header
    if len(tokens) < a.steps * a.batch * T + 1:
        sys.exit("llmc_reference.py: %s: %d tokens, fewer than %d steps of %d windows need"
                 % (a.data, len(tokens), a.steps, a.batch))
    model = tanh_gelu_model(a.seed)
    if a.double:
        model = model.double()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses = []
    for k in range(a.steps):
        buf = torch.from_numpy(tokens[k * a.batch * T:(k + 1) * a.batch * T + 1])
        x = buf[:-1].view(a.batch, T)
        y = buf[1:].view(a.batch, T)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(json.dumps({"losses": losses}))


if __name__ == "__main__":
    main()
