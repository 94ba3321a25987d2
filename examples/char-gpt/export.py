#!/usr/bin/python3
"""The char-level GPT (model.py: 4 layers, 4 heads, 128 channels, block 64,
vocabulary 256) exported to ONNX, with the job file that trains it on the
token files prepare.py writes: what a person does to train their own small
GPT with spotdeck.

    /usr/bin/python3 examples/char-gpt/prepare.py --out gpt/data
    /usr/bin/python3 examples/char-gpt/export.py --out gpt --data-dir gpt/data

writes gpt/model.onnx (input "tokens" (batch, 64) int64, output "logits"
(batch, 64, 256)) and gpt/job.json, which spotdeck trains:
spotdeck --job gpt/job.json (README, "Language models"; the job keys
"dataset": "tokens" and "block_size" are spotdeck-job(5)'s).

The export is torch.onnx.export's: opset 14 by default (--opset 15, 16, 17;
17 is the first with LayerNormalization, older ones decompose it into
ReduceMean/Sub/Pow/Sqrt/Div), in training mode with no constant folding
by default, as examples/common.py exports, so that every parameter stays an
initializer of its own and the Dropout nodes stay in the graph; --eval
exports in eval mode (which merges equal initializers: not for training),
--fold folds constants (the shape chains, and every Linear weight into a
transposed copy, the tied embedding's too: doc/gpt-onnx-ops.md)."""
import argparse, os, sys, warnings
import torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, ".."))
from common import write_job
from model import GPT, GPTConfig

# The training settings, the job file's and tests/bench/gpt-torch's: AdamW
# as nanoGPT's shakespeare_char configuration (betas 0.9/0.99, weight decay
# 0.1, warm-up 100 steps, cosine decay to 0), a learning rate of 2e-3 (a
# model this small takes a larger one than nanoGPT's 1e-3 for its 10.7M
# parameters), gradients clipped to a global L2 norm of 1.
TRAIN = dict(optimizer="adamw", lr=2e-3, betas=[0.9, 0.99], eps=1e-8, weight_decay=0.1,
             clip_grad_norm=1.0, schedule="cosine", warmup_steps=100, global_batch=64, epochs=1)


def export(model, path, opset=14, training=True, fold=False):
    """torch.onnx.export of model with a (2, block) int64 example; the batch
    dimension is dynamic, the time dimension the block size."""
    model.train(training)
    # The exporter warns about tracing internals that change nothing here.
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    example = torch.zeros(2, model.config.block_size, dtype=torch.long)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, example, path, opset_version=opset, training=mode,
                      do_constant_folding=fold, input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch"}, "logits": {0: "batch"}})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="char-gpt", help="folder to write model.onnx and job.json into")
    p.add_argument("--data-dir", default=None, help="prepare.py's folder (default OUT/data)")
    p.add_argument("--opset", type=int, default=14, choices=(14, 15, 16, 17))
    p.add_argument("--eval", action="store_true", help="export in eval mode (default training)")
    p.add_argument("--fold", action="store_true", help="fold constants (default off)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=TRAIN["epochs"])
    a = p.parse_args()
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    model = GPT(GPTConfig())
    export(model, os.path.join(a.out, "model.onnx"), a.opset, not a.eval, a.fold)
    # Written relative to the job file's folder (write_job), as spotdeck
    # reads it: the folder with its data can be moved.
    data_dir = a.data_dir or os.path.join(a.out, "data")
    settings = dict(TRAIN, epochs=a.epochs)
    job = write_job(a.out, model="model.onnx", dataset="tokens", data_dir=data_dir,
                    block_size=model.config.block_size, **settings, workers=2, seed=a.seed)
    print("wrote %s/model.onnx (opset %d, %s mode%s, %d parameters) and %s"
          % (a.out, a.opset, "eval" if a.eval else "training", ", constants folded" if a.fold else "",
             sum(q.numel() for q in model.parameters()), job))


if __name__ == "__main__":
    main()
