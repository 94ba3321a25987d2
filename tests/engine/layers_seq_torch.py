"""tests/engine/layers_seq_torch.py DIR - compares what
tests/engine/test-layers-seq-dump wrote into DIR (inputs and spotdeck's
results, raw float32) with PyTorch's autograd on the same inputs, in
float32 as training runs: layer norm (torch.nn.functional.layer_norm),
GELU exact and tanh (torch.nn.functional.gelu, approximate='none'/'tanh')
and causal self-attention as a GPT computes it without a fused kernel
(torch 1.13 has no scaled_dot_product_attention): q k^T * scale, masked
with -inf above the diagonal, softmax, times v.

Error of a value a against torch's r (as the C tests):
  |a - r| / max(|r|, mean |r| over the tensor)  <= TOL = 1e-5.
Both sides are float32 with sums ordered differently (OpenBLAS and double
statistics here, torch's own kernels there); measured max on the 2-core
AVX-512 Xeon this was written on: 5.0e-07 (layer norm), 1.3e-06
(attention), 3.5e-07 (GELU) except the tanh form's gradient, 3.9e-06:
torch computes 1 - tanh(u)^2 in float, which loses digits where tanh(u) is
near -1 (spotdeck's kernel is 3.5e-07 from a double reference there, see
engine/layers-seq.c).  Prints one line per tensor; exits 1 on any failure."""
import sys

import numpy as np
import torch

TOL = 1e-5
d = sys.argv[1]


def load(name, shape):
    a = np.fromfile("%s/%s.f32" % (d, name), dtype="<f4")
    if a.size != int(np.prod(shape)):
        sys.exit("%s/%s.f32: %d floats, expected %s" % (d, name, a.size, shape))
    return torch.from_numpy(a.reshape(shape).copy())


def leaf(name, shape):
    return load(name, shape).requires_grad_(True)


failures = 0


def compare(what, ours, ref):
    global failures
    a = ours.detach().double().flatten()
    r = ref.detach().double().flatten()
    den = torch.clamp(r.abs(), min=r.abs().mean().item())
    err = ((a - r).abs() / den).max().item()
    ok = err <= TOL
    failures += not ok
    print("%-24s max rel err %.2e (tol %.0e, %d values)  %s"
          % (what, err, TOL, a.numel(), "ok" if ok else "FAIL"))


with open("%s/shapes.txt" % d) as f:
    n, c, eps = f.readline().split()
    n, c, eps = int(n), int(c), float(eps)
    g = int(f.readline())
    b, h, t, hd, scale = f.readline().split()
    b, h, t, hd, scale = int(b), int(h), int(t), int(hd), float(scale)

torch.set_num_threads(2)

# Layer norm.
x, gamma, beta = leaf("ln_x", (n, c)), leaf("ln_gamma", (c,)), leaf("ln_beta", (c,))
y = torch.nn.functional.layer_norm(x, (c,), gamma, beta, eps)
y.backward(load("ln_dy", (n, c)))
compare("layernorm y", load("ln_y", (n, c)), y)
compare("layernorm dx", load("ln_dx", (n, c)), x.grad)
compare("layernorm dgamma", load("ln_dgamma", (c,)), gamma.grad)
compare("layernorm dbeta", load("ln_dbeta", (c,)), beta.grad)

# GELU, both forms.
for form, approx in (("erf", "none"), ("tanh", "tanh")):
    gx = leaf("gelu_x", (g,))
    gy = torch.nn.functional.gelu(gx, approximate=approx)
    gy.backward(load("gelu_dy", (g,)))
    compare("gelu %s y" % form, load("gelu_%s_y" % form, (g,)), gy)
    compare("gelu %s dx" % form, load("gelu_%s_dx" % form, (g,)), gx.grad)

# Causal attention, unfused, as nanoGPT's CausalSelfAttention without flash.
shape = (b, h, t, hd)
q, k, v = leaf("att_q", shape), leaf("att_k", shape), leaf("att_v", shape)
att = (q @ k.transpose(-2, -1)) * scale
mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
att = att.masked_fill(~mask, float("-inf"))
att = torch.softmax(att, dim=-1)
ay = att @ v
ay.backward(load("att_dy", shape))
compare("attention y", load("att_y", shape), ay)
compare("attention dq", load("att_dq", shape), q.grad)
compare("attention dk", load("att_dk", shape), k.grad)
compare("attention dv", load("att_dv", shape), v.grad)

sys.exit(1 if failures else 0)
