"""The basic layers: Linear, Embedding, TiedHead, LayerNorm, RMSNorm, Dropout."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import functional as F
from ..apply import apply
from ..creation import generator
from ..dtypes import get_default_dtype
from ..errors import DeviceError
from ..guards.shapes import first_out_of_range
from ..ops.selection import GetItem
from ..tensor import Tensor
from .module import Module, Parameter, check_probability, check_sizes

__all__ = ["Dropout", "Embedding", "LayerNorm", "Linear", "RMSNorm", "TiedHead"]


def _uniform(bound: float, *shape: int) -> np.ndarray:
    return generator().uniform(-bound, bound, shape).astype(get_default_dtype())


class Linear(Module):
    """y = x @ weight + bias, with weight of shape (in_features, out_features) as in Q = X W_Q.

    Both are initialised uniformly in ±1/√in_features (PyTorch's default), so that the output's
    scale does not grow with the number of inputs.

    Example:
        >>> import tinygrad_attn as ta
        >>> layer = Linear(3, 2)
        >>> layer(ta.ones(4, 3)).shape
        (4, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        check_sizes("Linear", in_features=in_features, out_features=out_features)
        bound = 1 / math.sqrt(in_features)
        self.weight = Parameter(_uniform(bound, in_features, out_features))
        self.bias = Parameter(_uniform(bound, out_features)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)


class Embedding(Module):
    """Row `i` of `weight` (num_embeddings, embedding_dim) for each integer id `i`; weight ~ N(0, 1).

    The lookup is integer-array indexing, whose backward scatter-adds, so an id used twice in a
    batch gets both gradients.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        check_sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.weight = Parameter(generator().standard_normal((num_embeddings, embedding_dim))
                                .astype(get_default_dtype()))

    def forward(self, ids: Any) -> Tensor:
        ids = ids if isinstance(ids, Tensor) else Tensor(ids, device=self.weight.device)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Embedding: ids must be integers, got dtype {ids.dtype}")
        if ids.device != self.weight.device:
            raise DeviceError(f"Embedding: ids are on {ids.device} but the weight is on "
                              f"{self.weight.device}; move them with .to()")
        n = self.weight.shape[0]
        # checked here (CuPy would wrap a bad id silently), on the host when the ids came from there
        bad = first_out_of_range(ids.data, n, host_values=ids.host_values)
        if bad is not None:
            raise IndexError(f"Embedding: id {bad} is out of range for {n} embeddings")
        # The ids are checked: the lookup is GetItem itself, without Tensor.__getitem__'s second
        # bounds probe (on the GPU, a second read back to the host). Backward scatters through
        # them, so they are a copy: editing the ids tensor after forward moves no gradient.
        return apply(GetItem, self.weight, index=(ids.data.copy(),))


class TiedHead(Module):
    """logits = x Eᵀ (+ bias): an output layer that reuses a token embedding E (V, D) as its weight.

    Tied input and output embeddings (GPT-2, SmolLM, Press & Wolf 2017): one parameter used twice,
    so backward adds both uses into E's gradient, and ``parameters()`` yields it once (under the
    embedding's name). ``weight`` is the embedding's, (V, D): the transpose of a Linear's.

    Example:
        >>> import tinygrad_attn as ta
        >>> emb = Embedding(5, 4)
        >>> head = TiedHead(emb)
        >>> head(ta.randn(3, 4)).shape, head.weight is emb.weight
        ((3, 5), True)
    """

    def __init__(self, embedding: Embedding, bias: bool = False):
        self.embedding = embedding
        vocab = embedding.weight.shape[0]
        self.bias = Parameter(np.zeros(vocab, dtype=get_default_dtype())) if bias else None

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.embedding.weight.swapaxes(0, 1), self.bias)  # x Eᵀ (+ b)


class LayerNorm(Module):
    """F.layer_norm over the last axis with a learned scale (ones) and shift (zeros)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        check_sizes("LayerNorm", dim=dim)
        if not 0 <= eps < math.inf:
            raise ValueError(f"LayerNorm: eps must be a finite number >= 0, got {eps!r}")
        self.eps = eps
        self.weight = Parameter(np.ones(dim, dtype=get_default_dtype()))
        self.bias = Parameter(np.zeros(dim, dtype=get_default_dtype()))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """F.rms_norm over the last axis with a learned scale (ones): Llama's norm, no mean and no bias.

    Example:
        >>> import tinygrad_attn as ta
        >>> RMSNorm(4)(ta.randn(2, 3, 4)).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        check_sizes("RMSNorm", dim=dim)
        if not 0 <= eps < math.inf:
            raise ValueError(f"RMSNorm: eps must be a finite number >= 0, got {eps!r}")
        self.eps = eps
        self.weight = Parameter(np.ones(dim, dtype=get_default_dtype()))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.weight, self.eps)


class Dropout(Module):
    """F.dropout with probability p while training; the identity in eval mode."""

    def __init__(self, p: float):
        check_probability("Dropout", "p", p)
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)
