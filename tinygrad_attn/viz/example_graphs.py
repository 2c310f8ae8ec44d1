"""Small ready-made graphs for the ``step``, ``graph`` and ``explore`` commands and the docs.

Each example graph builds a seeded module and a scalar loss on fixed data and returns an ``Example``: the
loss, the model, the tokens that label the sequence's positions, and an introduction (inputs,
targets, predicted probabilities) for a learner to read before the backward pass. Every example
takes ``fused``: False builds attention from primitives, so each piece is its own backward step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import functional as F
from ..creation import manual_seed
from ..engine import no_grad
from ..labels import named
from ..nn import Embedding, Linear, Module, MultiHeadAttention, TinyTransformer, TransformerBlock
from ..tensor import Tensor

__all__ = ["AttentionHead", "EXAMPLES", "Example", "TwoLayerMLP", "WORDS", "block", "head", "llama", "mha",
           "mlp", "model"]


WORDS = ("the", "cat", "sat", ".")


@dataclass(frozen=True)
class Example:
    """An example graph.

    Attributes:
        loss: the scalar loss (forward done, backward not yet).
        model: the module that made it (its parameters get the gradients).
        tokens: the label of each sequence position (rows and columns of attention matrices),
            or None where the input is not a sequence of tokens.
        intro: what to read first: the input, the targets and the predicted probabilities.
        vocab: the word of each logit (the columns of logits), or None where they are classes.
        has_attention: whether the model attends (the step command says how attention is built).
    """

    loss: Tensor
    model: Module
    tokens: tuple[str, ...] | None
    intro: str
    vocab: tuple[str, ...] | None = None
    has_attention: bool = True


class AttentionHead(Module):
    """One causal head of attention, the smallest model that predicts a next word from context.

    X = embed(ids) (T, 4); Q = X W_Q + b_Q, K = X W_K + b_K, V = X W_V + b_V (T, 2);
    O = softmax(Q Kᵀ / √2, causal) V (T, 2); logits = O W_out + b_out (T, vocabulary).
    """

    def __init__(self, vocab_size: int = len(WORDS), d_model: int = 4, d_head: int = 2,
                 fused: bool = True):
        self.fused = fused
        self.embed = Embedding(vocab_size, d_model)
        self.q_proj = Linear(d_model, d_head)
        self.k_proj = Linear(d_model, d_head)
        self.v_proj = Linear(d_model, d_head)
        self.head = Linear(d_head, vocab_size)

    def forward(self, ids: np.ndarray) -> Tensor:
        x = named(self.embed(ids), "X")                                # (T, D)
        q = named(self.q_proj(x), "Q")                                 # (T, Dh)
        k = named(self.k_proj(x), "K")                                 # (T, Dh)
        v = named(self.v_proj(x), "V")                                 # (T, Dh)
        out = named(F.scaled_dot_product_attention(q, k, v, is_causal=True, fused=self.fused), "O")
        return named(self.head(out), "logits")                         # (T, V)


class TwoLayerMLP(Module):
    """x → fc2(relu(fc1(x))): the smallest network with a hidden layer."""

    def __init__(self, d_in: int = 3, d_hidden: int = 4, d_out: int = 2):
        self.fc1 = Linear(d_in, d_hidden)
        self.fc2 = Linear(d_hidden, d_out)

    def forward(self, x: Tensor) -> Tensor:
        return named(self.fc2(named(self.fc1(x).relu(), "hidden")), "logits")


def _matrix(values: np.ndarray, rows: list[str], columns: list[str]) -> str:
    """A small table of numbers with row and column labels."""
    width = max(8, *(len(c) + 1 for c in columns))
    pad = max(len(r) for r in rows)
    lines = [" " * pad + "".join(f"{c:>{width}}" for c in columns)]
    lines += [f"{r:>{pad}}" + "".join(f"{v:>{width}.3f}" for v in row) for r, row in zip(rows, values)]
    return "\n".join("    " + line for line in lines)


def _probabilities(logits: Tensor) -> np.ndarray:
    with no_grad():
        return F.softmax(logits, axis=-1).numpy().reshape(-1, logits.shape[-1])


def head(fused: bool = True) -> Example:
    """'the cat sat': one causal attention head (d_model 4, d_head 2) predicting each next word."""
    manual_seed(0)
    model = AttentionHead(fused=fused)
    ids, targets = np.array([0, 1, 2]), np.array([1, 2, 3])
    logits = model(ids)
    tokens = tuple(WORDS[i] for i in ids)
    probs = _probabilities(logits)
    intro = "\n".join([
        f"input    {' '.join(tokens)}   (ids {ids.tolist()}; position i sees positions ≤ i)",
        f"targets  {' '.join(WORDS[t] for t in targets)}   (the next word after each position)",
        "predicted probabilities, value of softmax(logits) (rows: positions, columns: next word):",
        _matrix(probs, list(tokens), list(WORDS)),
        "loss = mean over positions of −log p(target) = ("
        + " ".join(f"−log {probs[i, t]:.3f}" for i, t in enumerate(targets)) + ") / 3"])
    return Example(named(F.cross_entropy(logits, targets), "loss"), model, tokens, intro, vocab=WORDS)


def mlp(fused: bool = True) -> Example:
    """A two-layer MLP classifying 4 points into 2 classes."""
    manual_seed(0)
    model = TwoLayerMLP()
    x = Tensor([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.0], [0.0, -0.5, 2.0]])
    targets = np.array([0, 1, 1, 0])
    logits = model(x)
    rows = [f"x{i}" for i in range(4)]
    intro = "\n".join([
        "input, value of x (4 points, 3 features each):", _matrix(x.numpy(), rows, ["f0", "f1", "f2"]),
        f"targets  classes {targets.tolist()}",
        "predicted probabilities, value of softmax(logits):",
        _matrix(_probabilities(logits), rows, ["class 0", "class 1"])])
    return Example(named(F.cross_entropy(logits, targets), "loss"), model, None, intro, has_attention=False)


def mha(fused: bool = True) -> Example:
    """Two-head self-attention on a (1, 3, 8) input; loss = mean of squares."""
    manual_seed(0)
    model = MultiHeadAttention(8, num_heads=2, fused=fused)
    out = model(Tensor(np.random.default_rng(0).standard_normal((1, 3, 8)).astype(np.float32)))
    intro = ("input: 3 positions of 8 random features (batch 1); self-attention with 2 heads of "
             "width 4, no mask;\nloss = mean of the squared outputs (a stand-in for a real loss)")
    return Example(named((out * out).mean(), "loss"), model, ("x0", "x1", "x2"), intro)


def block(fused: bool = True) -> Example:
    """One pre-norm transformer block on a (1, 3, 8) input; loss = mean of squares."""
    manual_seed(0)
    model = TransformerBlock(8, num_heads=2, d_ff=16, fused=fused)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 3, 8)).astype(np.float32))
    out = model(x, is_causal=True)
    intro = ("input: 3 positions of 8 random features (batch 1); one causal pre-norm block "
             "(2 heads, MLP width 16);\nloss = mean of the squared outputs (a stand-in for a real loss)")
    return Example(named((out * out).mean(), "loss"), model, ("x0", "x1", "x2"), intro)


def model(fused: bool = True) -> Example:
    """A 2-layer TinyTransformer predicting the next token of '1 2 3 4'."""
    manual_seed(0)
    net = TinyTransformer(vocab_size=6, d_model=8, num_heads=2, num_layers=2, max_len=8, fused=fused)
    ids, targets = np.array([[1, 2, 3, 4]]), np.array([[2, 3, 4, 5]])
    logits = net(ids)
    tokens = tuple(str(i) for i in ids[0])
    intro = "\n".join([
        f"input    {' '.join(tokens)}   (token ids, batch 1; position i sees positions ≤ i)",
        f"targets  {' '.join(str(t) for t in targets[0])}   (the next token after each position)",
        "predicted probabilities, value of softmax(logits) (rows: positions, columns: token id):",
        _matrix(_probabilities(logits), list(tokens), [str(i) for i in range(6)])])
    return Example(named(F.cross_entropy(logits, targets), "loss"), net, tokens, intro)


def llama(fused: bool = True) -> Example:
    """One Llama-style block (RMSNorm, RoPE, 2 query heads sharing 1 kv head, SwiGLU) on 'the cat sat'."""
    manual_seed(0)
    net = TinyTransformer(vocab_size=len(WORDS), d_model=8, num_heads=2, num_layers=1, max_len=4, d_ff=8,
                          fused=fused, norm="rms", mlp="swiglu", positions="rope", n_kv_heads=1)
    ids, targets = np.array([[0, 1, 2]]), np.array([[1, 2, 3]])
    logits = net(ids)
    tokens = tuple(WORDS[i] for i in ids[0])
    intro = "\n".join([
        f"input    {' '.join(tokens)}   (ids {ids[0].tolist()}, batch 1; position i sees positions ≤ i)",
        f"targets  {' '.join(WORDS[t] for t in targets[0])}   (the next word after each position)",
        "model: token embeddings (no position table), then x + attn(rms_norm(x)) with RoPE on Q and K and "
        "query heads 0 and 1 both reading kv head 0, then x + swiglu(rms_norm(x)), rms_norm, linear head",
        "predicted probabilities, value of softmax(logits) (rows: positions, columns: next word):",
        _matrix(_probabilities(logits), list(tokens), list(WORDS))])
    return Example(named(F.cross_entropy(logits, targets), "loss"), net, tokens, intro)


EXAMPLES: dict[str, Callable[..., Example]] = {
    "head": head, "mlp": mlp, "mha": mha, "block": block, "model": model, "llama": llama}
