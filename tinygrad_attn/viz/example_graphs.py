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
from .matrices import format_number

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
        head: the one attention head whose matrices are printed (None: every head).
    """

    loss: Tensor
    model: Module
    tokens: tuple[str, ...] | None
    intro: str
    vocab: tuple[str, ...] | None = None
    has_attention: bool = True
    head: int | None = None


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
    """x → fc2(relu(fc1(x))): the smallest network with a hidden layer.

    z = x W₁ + b₁ (n, 4); hidden = relu(z); logits = hidden W₂ + b₂ (n, 2).
    """

    def __init__(self, d_in: int = 3, d_hidden: int = 4, d_out: int = 2):
        self.fc1 = Linear(d_in, d_hidden)
        self.fc2 = Linear(d_hidden, d_out)

    def forward(self, x: Tensor) -> Tensor:
        z = named(self.fc1(x), "z")
        return named(self.fc2(named(z.relu(), "hidden")), "logits")


def _matrix(values: np.ndarray, rows: list[str], columns: list[str]) -> str:
    """A small table of numbers with row and column labels, four significant digits each."""
    cells = [[format_number(float(v)) for v in row] for row in np.atleast_2d(values)]
    width = max(8, *(len(c) + 2 for c in columns), *(len(c) + 2 for row in cells for c in row))
    pad = max(len(r) for r in rows)
    lines = [" " * pad + "".join(f"{c:>{width}}" for c in columns)]
    lines += [f"{r:>{pad}}" + "".join(f"{c:>{width}}" for c in row) for r, row in zip(rows, cells)]
    return "\n".join("    " + line for line in lines)


def _parameter(name: str, value: np.ndarray, rows: list[str], columns: list[str], what: str) -> str:
    """'value of fc1.weight (3, 4), rows: …, columns: …' and the matrix (a vector as one row)."""
    return f"value of {name} {value.shape} ({what}):\n" + _matrix(value, rows, columns)


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
        + " ".join(f"−log {format_number(probs[i, t])}" for i, t in enumerate(targets)) + ") / 3"])
    return Example(named(F.cross_entropy(logits, targets), "loss"), model, tokens, intro, vocab=WORDS)


def mlp(fused: bool = True) -> Example:
    """A two-layer MLP (3 → 4 → 2, ReLU) classifying 4 points into 2 classes."""
    manual_seed(0)
    model = TwoLayerMLP()
    x = named(Tensor([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.0], [0.0, -0.5, 2.0]]), "x")
    targets = np.array([0, 1, 1, 0])
    logits = model(x)
    rows, features = [f"x{i}" for i in range(4)], ["f0", "f1", "f2"]
    units, classes = [f"h{j}" for j in range(4)], ["class 0", "class 1"]
    probs, params = _probabilities(logits), dict(model.named_parameters())
    intro = "\n".join([
        "model: 3 input features → 4 hidden units (ReLU) → 2 class logits",
        "    z = x · fc1.weight + fc1.bias          (4 points × 4 hidden units)",
        "    hidden = relu(z)                        (max(z, 0), element by element)",
        "    logits = hidden · fc2.weight + fc2.bias (4 points × 2 classes)",
        "    loss = mean over the 4 points of −log softmax(logits)[target]   (cross-entropy)",
        "input, value of x (4 points, 3 features each):", _matrix(x.numpy(), rows, features),
        f"targets  classes {targets.tolist()} (one per point)",
        "parameters (seed 0), every number the forward pass uses:",
        _parameter("fc1.weight", params["fc1.weight"].numpy(), features, units,
                   "rows: input features, columns: hidden units"),
        _parameter("fc1.bias", params["fc1.bias"].numpy(), [""], units, "one per hidden unit"),
        _parameter("fc2.weight", params["fc2.weight"].numpy(), units, classes,
                   "rows: hidden units, columns: classes"),
        _parameter("fc2.bias", params["fc2.bias"].numpy(), [""], classes, "one per class"),
        "predicted probabilities, value of softmax(logits) (rows: points, columns: classes):",
        _matrix(probs, rows, classes),
        "loss = mean over points of −log p(target) = ("
        + " ".join(f"−log {format_number(probs[i, t])}" for i, t in enumerate(targets)) + ") / 4"])
    loss = F.cross_entropy(logits, named(Tensor(targets), "targets"))
    return Example(named(loss, "loss"), model, None, intro, has_attention=False)


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
        _parameter("tok_emb.weight", net.tok_emb.weight.numpy(), list(WORDS), [str(j) for j in range(8)],
                   "the token embeddings: row w is word w's vector, X picks rows 0, 1, 2"),
        _parameter("head.bias", dict(net.named_parameters())["head.bias"].numpy(), [""], list(WORDS),
                   "added to every row of ln_f's output · head.weight (step 1 prints both)"),
        "predicted probabilities, value of softmax(logits) (rows: positions, columns: next word):",
        _matrix(_probabilities(logits), list(tokens), list(WORDS))])
    return Example(named(F.cross_entropy(logits, targets), "loss"), net, tokens, intro)


EXAMPLES: dict[str, Callable[..., Example]] = {
    "head": head, "mlp": mlp, "mha": mha, "block": block, "model": model, "llama": llama}
