"""The PyTorch side of each workload, written plainly as a PyTorch user would (CPU, eager).

Imported only when PyTorch is importable; tinygrad_attn never depends on it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-norm block as nn.TransformerBlock: x + attn(ln1(x)), then x + fc2(gelu(fc1(ln2(x))))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        y = self.ln1(x)
        q, k, v = (proj(y).view(b, t, self.num_heads, d // self.num_heads).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))         # (B, H, T, Dh)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out_proj(heads.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class TinyTransformer(nn.Module):
    """Token + position embeddings, causal blocks, a final LayerNorm and a linear head."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, max_len: int,
                 d_ff: int):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.ln_f, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def train_step(config: dict, ids: np.ndarray, targets: np.ndarray):
    """A closure doing one step (forward, cross-entropy, backward, Adam) of a fresh model."""
    torch.manual_seed(0)
    model = TinyTransformer(config["vocab"], config["d_model"], config["heads"], config["layers"],
                            config["seq"], config["d_ff"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids_t, targets_t = torch.from_numpy(ids), torch.from_numpy(targets)

    def step() -> None:
        logits = model(ids_t)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets_t.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def _leaves(*arrays: np.ndarray) -> list[torch.Tensor]:
    return [torch.tensor(a, requires_grad=True) for a in arrays]


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    """softmax(Q Kᵀ/√d, causal) V written out: the (n, n) matrix is held."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v


def attention_passes(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray) -> dict:
    """Forward + backward closures: explicit math and the fused scaled_dot_product_attention."""
    qt, kt, vt = _leaves(q, k, v)
    grad = torch.from_numpy(d_out)
    n = q.shape[-2]

    def math_pass() -> None:
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        for t in (qt, kt, vt):
            t.grad = None
        math_attention(qt, kt, vt, causal).backward(grad)

    def sdpa_pass() -> None:
        for t in (qt, kt, vt):
            t.grad = None
        F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).backward(grad)
    return {"torch math": math_pass, "torch sdpa": sdpa_pass}


def op_chain(x: np.ndarray, w: np.ndarray, length: int):
    """`length` elementwise ops (alternately ·w and tanh) on a small tensor, then backward."""
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.from_numpy(w)

    def chain() -> None:
        xt.grad = None
        y = xt
        for _ in range(length // 2):
            y = torch.tanh(y * wt)
        y.sum().backward()
    return chain
