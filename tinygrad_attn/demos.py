"""Small ready-made graphs for the ``step`` and ``graph`` commands and the docs.

Each demo builds a seeded module and a scalar loss on fixed data, and returns both.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from . import functional as F
from .creation import manual_seed
from .nn import Embedding, Linear, Module, MultiHeadAttention, TinyTransformer, TransformerBlock
from .tensor import Tensor

WORDS = ("the", "cat", "sat")


class AttentionHead(Module):
    """One head of attention over a 3-token sentence, predicting each next word."""

    def __init__(self, d_model: int = 4):
        self.embed = Embedding(len(WORDS), d_model)
        self.attn = MultiHeadAttention(d_model, num_heads=1)
        self.head = Linear(d_model, len(WORDS))

    def forward(self, ids: np.ndarray) -> Tensor:
        return self.head(self.attn(self.embed(ids), is_causal=True))    # (T, V)


class TwoLayerMLP(Module):
    """x → fc2(relu(fc1(x))): the smallest network with a hidden layer."""

    def __init__(self, d_in: int = 3, d_hidden: int = 4, d_out: int = 2):
        self.fc1 = Linear(d_in, d_hidden)
        self.fc2 = Linear(d_hidden, d_out)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).relu())


def head() -> tuple[Tensor, Module]:
    """'the cat sat': one causal attention head, cross-entropy on the next word."""
    manual_seed(0)
    model = AttentionHead()
    ids = np.array([0, 1, 2])
    return F.cross_entropy(model(ids), np.array([1, 2, 2])), model


def mlp() -> tuple[Tensor, Module]:
    """A two-layer MLP classifying 4 points into 2 classes."""
    manual_seed(0)
    model = TwoLayerMLP()
    x = Tensor([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.0], [0.0, -0.5, 2.0]])
    return F.cross_entropy(model(x), np.array([0, 1, 1, 0])), model


def mha() -> tuple[Tensor, Module]:
    """Two-head self-attention on a (1, 3, 8) input; loss = mean of squares."""
    manual_seed(0)
    model = MultiHeadAttention(8, num_heads=2)
    out = model(Tensor(np.random.default_rng(0).standard_normal((1, 3, 8)).astype(np.float32)))
    return (out * out).mean(), model


def block() -> tuple[Tensor, Module]:
    """One pre-norm transformer block on a (1, 3, 8) input; loss = mean of squares."""
    manual_seed(0)
    model = TransformerBlock(8, num_heads=2, d_ff=16)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 3, 8)).astype(np.float32))
    out = model(x, is_causal=True)
    return (out * out).mean(), model


def model() -> tuple[Tensor, Module]:
    """A 2-layer TinyTransformer predicting the next token of '1 2 3 4'."""
    manual_seed(0)
    net = TinyTransformer(vocab_size=6, d_model=8, num_heads=2, num_layers=2, max_len=8)
    return F.cross_entropy(net(np.array([[1, 2, 3, 4]])), np.array([[2, 3, 4, 5]])), net


DEMOS: dict[str, Callable[[], tuple[Tensor, Module]]] = {
    "head": head, "mlp": mlp, "mha": mha, "block": block, "model": model}


def example_parser(subparsers: argparse._SubParsersAction, command: str, summary: str,
                   description: str, default: str) -> argparse.ArgumentParser:
    """The subparser of a command that works on one demo, with its --example option."""
    listing = "\n".join(f"  {name:6s} {fn.__doc__}" for name, fn in DEMOS.items())
    parser = subparsers.add_parser(command, help=summary, description=description,
                                   epilog=f"examples:\n{listing}",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", choices=list(DEMOS), default=default,
                        help=f"which example graph (default {default})")
    return parser
