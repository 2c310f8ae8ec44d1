"""``F``: the functional API. Each function checks its arguments, normalises masks, then calls
one registered op (or, where the API asks for several results, a short composition of ops).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import engine
from .creation import generator
from .errors import ShapeError
from .ops import dropout as dropout_ops
from .ops import loss as loss_ops
from .ops import norm as norm_ops
from .ops import softmax as softmax_ops
from .tensor import Tensor


def _mask_inputs(mask: Any, like: Tensor, shape: tuple[int, ...],
                 op: str) -> tuple[Tensor | None, Tensor | None]:
    """Split a user mask into the (keep, bias) inputs that masked ops take.

    A boolean mask (True = the position takes part) becomes `keep`; a float mask, added to the
    logits, becomes `bias` in `like`'s dtype. Both are constant tensors on `like`'s device, never
    differentiated, and must broadcast to `shape` without enlarging it.
    """
    if mask is None:
        return None, None
    data = mask.data if isinstance(mask, Tensor) else mask
    mask = Tensor(data, device=like.device)
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: mask of shape {mask.shape} does not broadcast to {tuple(shape)}")
    if mask.dtype == np.bool_:
        return mask, None
    if mask.dtype.kind not in "fiu":
        raise TypeError(f"{op}: mask must be boolean or float, got dtype {mask.dtype}")
    return None, Tensor(mask.data, dtype=like.dtype, device=like.device)


def _axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor with {ndim} dims")
    return axis % ndim


def softmax(x: Tensor, axis: int = -1, mask: Any = None) -> Tensor:
    """Probabilities along `axis`: exp(z − max z) / Σ exp(z − max z), z the masked logits.

    Args:
        x: logits.
        axis: the axis that sums to 1.
        mask: boolean (True = the position takes part) or float (added to `x`), broadcastable
            to `x`; a NumPy or CuPy array or a Tensor; never differentiated.

    Returns:
        A tensor shaped like `x`. Masked positions are 0; a fully masked row is all zeros.

    Example:
        >>> import tinygrad_attn as ta
        >>> p = softmax(ta.Tensor([[1.0, 2.0, 3.0]]), mask=[[True, True, False]])
        >>> p.numpy().round(4)
        array([[0.2689, 0.7311, 0.    ]], dtype=float32)
    """
    keep, bias = _mask_inputs(mask, x, x.shape, "softmax")
    return engine.apply(softmax_ops.Softmax, x, keep, bias, axis=_axis("softmax", axis, x.ndim))


def log_softmax(x: Tensor, axis: int = -1, mask: Any = None) -> Tensor:
    """Log-probabilities along `axis`: z − max z − log Σ exp(z − max z).

    Args:
        x: logits.
        axis: the axis normalised over.
        mask: as in ``softmax``.

    Returns:
        A tensor shaped like `x`; −inf at masked positions, 0 across a fully masked row.

    Example:
        >>> import tinygrad_attn as ta
        >>> log_softmax(ta.Tensor([0.0, 0.0])).numpy().round(4)
        array([-0.6931, -0.6931], dtype=float32)
    """
    keep, bias = _mask_inputs(mask, x, x.shape, "log_softmax")
    return engine.apply(softmax_ops.LogSoftmax, x, keep, bias,
                        axis=_axis("log_softmax", axis, x.ndim))


def cross_entropy(logits: Tensor, targets: Any, ignore_index: int | None = None,
                  reduction: str = "mean") -> Tensor:
    """−log softmax(logits)[target], reduced.

    Args:
        logits: `(..., C)` unnormalised scores.
        targets: integer class ids `(...)` in [0, C), or `ignore_index`.
        ignore_index: a target value whose positions count for nothing.
        reduction: "mean" (over the targets not ignored; 0 if all are), "sum" or "none".

    Returns:
        A scalar, or the per-position losses `(...)` for "none" (0 where ignored).

    Example:
        >>> import tinygrad_attn as ta
        >>> loss = cross_entropy(ta.Tensor([[0.0, 0.0]]), [1])
        >>> round(loss.item(), 4)
        0.6931
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    targets = targets if isinstance(targets, Tensor) else Tensor(targets, device=logits.device)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integers, got dtype {targets.dtype}")
    if logits.ndim < 1 or targets.shape != logits.shape[:-1]:
        raise ShapeError(f"cross_entropy: logits {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]}, got {targets.shape}")
    classes = logits.shape[-1]
    values = targets.numpy()
    bad = (values < 0) | (values >= classes)
    if ignore_index is not None:
        bad &= values != ignore_index
    if bad.any():
        raise ValueError(f"cross_entropy: target {values[bad].flat[0]} is out of range for "
                         f"{classes} classes" + ("" if ignore_index is None
                                                 else f" (ignore_index is {ignore_index})"))
    return engine.apply(loss_ops.CrossEntropy, logits, targets, ignore_index=ignore_index,
                        reduction=reduction)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(x − μ)/√(σ² + eps) ⊙ weight + bias, μ and σ² (population) over the last axis.

    Example:
        >>> import tinygrad_attn as ta
        >>> layer_norm(ta.Tensor([[1.0, 3.0]])).numpy().round(3)
        array([[-1.,  1.]], dtype=float32)
    """
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != x.shape[-1:]:
            raise ShapeError(f"layer_norm: {name} of shape {p.shape} does not match the last "
                             f"axis of x {x.shape}")
    return engine.apply(norm_ops.LayerNorm, x, weight, bias, eps=eps)


def relu(x: Tensor) -> Tensor:
    """max(x, 0) elementwise."""
    return x.relu()


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³)))."""
    return x.gelu()


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Inverted dropout: zero each element with probability p, scale the rest by 1/(1 − p).

    The identity when not training or p = 0. The mask comes from the library's generator, so
    ``ta.manual_seed`` makes it repeatable.

    Example:
        >>> import tinygrad_attn as ta
        >>> dropout(ta.ones(3), 0.5, training=False).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = Tensor(generator().random(x.shape) >= p, device=x.device)
    return engine.apply(dropout_ops.Dropout, x, keep, p=p)
