"""The char-level GPT of examples/char-gpt: nanoGPT's model.py
(github.com/karpathy/nanoGPT) cut to what a small example needs, written so
that torch.onnx.export shows the attention as the ops it is made of.

A decoder-only transformer: token and position embeddings, n_layer blocks of
pre-LayerNorm causal self-attention and a GELU MLP (4x wide), a final
LayerNorm and the output projection, which shares its weight with the token
embedding (weight tying, Press & Wolf 2017).  The attention is written out -
MatMul, scale by 1/sqrt(head size), causal mask, Softmax, MatMul - rather than
F.scaled_dot_product_attention, so the exported graph holds that pattern for
the engine to recognise.  Initialisation as nanoGPT's: N(0, 0.02) weights,
zero biases, the residual projections N(0, 0.02 / sqrt(2 n_layer))."""
import math
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    block_size: int = 64     # context length, tokens
    vocab_size: int = 256    # byte-level
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128        # channels
    dropout: float = 0.0
    bias: bool = True        # biases in the Linears and LayerNorms, as GPT-2


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        assert c.n_embd % c.n_head == 0
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        # The causal mask, lower triangle of ones; a buffer, not a parameter.
        self.register_buffer("mask", torch.tril(torch.ones(c.block_size, c.block_size))
                             .view(1, 1, c.block_size, c.block_size))

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)   # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = nn.GELU()   # exact (erf); the export writes the Erf chain
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd, elementwise_affine=True)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd, elementwise_affine=True)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c=None):
        super().__init__()
        self.config = c = c or GPTConfig()
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.block_size, c.n_embd)
        self.drop = nn.Dropout(c.dropout)
        self.h = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight   # weight tying: one parameter
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        """idx (B, T) int64 token ids, T <= block_size -> logits (B, T, vocab)."""
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def loss_nats(logits, targets):
    """Next-token cross-entropy, mean over every position, in nats."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
