#!/usr/bin/python3
"""The example char-level GPT (examples/char-gpt/model.py: 4 layers, 4 heads,
128 channels, block 64, vocabulary 256, 0.83 M parameters) made into the
same model for both trainers tests/bench/gpt-vs-llmc compares:

    /usr/bin/python3 tests/bench/llmc_ckpt.py --out DIR [--seed 1]

writes
  DIR/model.ckpt   the initial weights in llm.c's checkpoint format, read by
                   train_gpt2.c's gpt2_build_from_checkpoint (github.com/
                   karpathy/llm.c, train_gpt2.c; written as llm.c's
                   train_gpt2.py write_model does): 256 little-endian int32 -
                   magic 20240326, version 3 (float32 parameters), maxT, V, L,
                   NH, C, Vp, the rest 0 - then the 16 parameter tensors as
                   float32 in train_gpt2.c's ParameterTensors order:
                   wte (Vp, C), wpe (maxT, C), ln1w, ln1b (L, C), qkvw (L, 3C, C),
                   qkvb (L, 3C), attprojw (L, C, C), attprojb, ln2w, ln2b (L, C),
                   fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C),
                   lnfw, lnfb (C).  PyTorch's Linear weights are (out, in),
                   the layout llm.c's matmul_forward reads, so none is
                   transposed.  Vp is V rounded up to a multiple of 128 as
                   train_gpt2.py pads (256 stays 256: no padded rows).
  DIR/model.onnx   the same weights exported for spotdeck by export.py's
                   export() (opset 14, training mode), with the MLP's GELU
                   switched to the tanh approximation llm.c's gelu_forward
                   computes (model.py's is exact, erf); switching the module
                   draws no random numbers, so the weights are those
                   export.py writes for the same seed.

The model is built as export.py builds it (torch.manual_seed(seed), then
model.py's GPT()), so the initial weights are the example's.  Everything else
in the two models already agrees: biases in every Linear but the output
projection, LayerNorm eps 1e-5 (llm.c's layernorm_forward), attention scaled
by 1/sqrt(head size) with the causal mask, the output projection tied to the
token embedding (llm.c's forward multiplies by wte and its backward adds
that gradient into wte's), no dropout, and mean next-token cross-entropy."""
import argparse, os, sys
import numpy as np
import torch
import torch.nn as nn

here = os.path.dirname(os.path.abspath(__file__))
example = os.path.join(here, "..", "..", "examples", "char-gpt")
sys.path.insert(0, example)
sys.path.insert(0, os.path.join(example, ".."))
from model import GPT, GPTConfig  # noqa: E402

LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240326, 3, 256


def tanh_gelu_model(seed):
    """model.py's GPT with export.py's initial weights for seed, its GELUs
    tanh-approximate as llm.c's."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig())
    for block in model.h:
        block.mlp.gelu = nn.GELU(approximate="tanh")
    return model


def padded_vocab(v):
    """llm.c's padded vocabulary: v rounded up to a multiple of 128."""
    return (v + 127) // 128 * 128


def write_llmc_checkpoint(model, path):
    """model's parameters as train_gpt2.c reads them (see the module's doc)."""
    c = model.config
    vp = padded_vocab(c.vocab_size)
    header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
    header[:8] = [LLMC_MAGIC, LLMC_VERSION, c.block_size, c.vocab_size, c.n_layer, c.n_head, c.n_embd, vp]
    wte = torch.zeros(vp, c.n_embd)
    wte[:c.vocab_size] = model.wte.weight.detach()

    def per_layer(get):
        return torch.stack([get(b).detach() for b in model.h])

    tensors = [
        wte, model.wpe.weight,
        per_layer(lambda b: b.ln_1.weight), per_layer(lambda b: b.ln_1.bias),
        per_layer(lambda b: b.attn.c_attn.weight), per_layer(lambda b: b.attn.c_attn.bias),
        per_layer(lambda b: b.attn.c_proj.weight), per_layer(lambda b: b.attn.c_proj.bias),
        per_layer(lambda b: b.ln_2.weight), per_layer(lambda b: b.ln_2.bias),
        per_layer(lambda b: b.mlp.c_fc.weight), per_layer(lambda b: b.mlp.c_fc.bias),
        per_layer(lambda b: b.mlp.c_proj.weight), per_layer(lambda b: b.mlp.c_proj.bias),
        model.ln_f.weight, model.ln_f.bias,
    ]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            f.write(t.detach().contiguous().numpy().astype("<f4").tobytes())
    return sum(t.numel() for t in tensors)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder to write model.ckpt and model.onnx into")
    p.add_argument("--seed", type=int, default=1, help="export.py's --seed (default 1)")
    a = p.parse_args()
    from export import export
    os.makedirs(a.out, exist_ok=True)
    model = tanh_gelu_model(a.seed)
    n = write_llmc_checkpoint(model, os.path.join(a.out, "model.ckpt"))
    export(model, os.path.join(a.out, "model.onnx"))
    print("wrote %s/model.ckpt (llm.c, %d parameters) and %s/model.onnx (tanh GELU), seed %d"
          % (a.out, n, a.out, a.seed))


if __name__ == "__main__":
    main()
