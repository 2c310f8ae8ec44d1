"""``F``: the functional API. Each function checks its arguments, normalises masks, then calls
one registered op (or, where the API asks for several results, a short composition of ops).

Here are the functions a transformer uses (softmax, cross-entropy, linear, the norms, RoPE, the
activations of its MLP, dropout, attention); the losses and activations PyTorch has beyond them
live in ``functional_extras`` and are ``F``'s too (``F.selu``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import functional_extras
from .apply import apply
from .backend import xp_for
from .creation import generator_for
from .errors import ShapeError
from .functional_arguments import check_float, check_reduction, class_weight
from .functional_extras import *  # noqa: F403 - F's extras are F's: every name of functional_extras.__all__
from .guards.axes import check_zero_d_dim, normalize_axis, numpy_spellings
from .guards.shapes import attention_shapes, check_broadcasts_to, first_out_of_range
from .labels import named
from .ops import attention as attention_ops
from .ops import flash as flash_ops
from .ops import loss as loss_ops
from .ops import matmul as matmul_ops
from .ops import norm as norm_ops
from .ops import rope as rope_ops
from .ops import selection as selection_ops
from .ops import softmax as softmax_ops
from .ops.masking import causal_keep, combine_keep
from .tensor import Tensor

__all__ = ["cross_entropy", "dropout", "flash_attention", "gelu", "layer_norm", "linear", "log_softmax",
           "relu", "rms_norm", "rope", "scaled_dot_product_attention", "silu", "softmax",
           *functional_extras.__all__]


def __dir__() -> list[str]:
    """``dir(F)`` lists the functional API alone, as ``help(F)`` does (PEP 562)."""
    return sorted(__all__)


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
    check_broadcasts_to(op, "mask", mask.shape, shape)
    if mask.dtype == np.bool_:
        return mask, None
    if mask.dtype.kind != "f":
        # An integer 0/1 mask would be added to the logits, not select them: refuse the guess.
        raise TypeError(f"{op}: mask must be boolean (True = takes part) or float (added to the "
                        f"logits), got dtype {mask.dtype}")
    return None, Tensor(mask.data, dtype=like.dtype, device=like.device)


@numpy_spellings
def softmax(x: Tensor, dim: int = -1, mask: Any = None) -> Tensor:
    """Probabilities along `dim`: exp(z − max z) / Σ exp(z − max z), z the masked logits.

    Args:
        x: logits, any float dtype.
        dim: the axis that sums to 1 (``axis=`` also works).
        mask: boolean (True = the position takes part) or float (added to `x`), broadcastable
            to `x`; a NumPy or CuPy array or a Tensor; never differentiated.

    Returns:
        A tensor shaped like `x`. Masked positions are exactly 0; a fully masked row is all zeros
        and gets a zero gradient (never NaN).

    Shapes:
        x `(...)`, mask broadcastable to `x.shape`, result `x.shape`.

    Example:
        >>> import tinygrad_attn as ta
        >>> p = softmax(ta.Tensor([[1.0, 2.0, 3.0]]), mask=[[True, True, False]])
        >>> p.numpy().round(4)
        array([[0.2689, 0.7311, 0.    ]], dtype=float32)
    """
    check_float("softmax", "x", x)
    if x.ndim == 0:                         # dim 0 or −1, as PyTorch: one position, probability 1
        check_zero_d_dim("softmax", dim)
        return softmax(x.reshape(1), 0, mask).reshape(())
    keep, bias = _mask_inputs(mask, x, x.shape, "softmax")
    return apply(softmax_ops.Softmax, x, keep, bias, axis=normalize_axis("softmax", dim, x.ndim))


@numpy_spellings
def log_softmax(x: Tensor, dim: int = -1, mask: Any = None) -> Tensor:
    """Log-probabilities along `dim`: z − max z − log Σ exp(z − max z).

    Args:
        x: logits, any float dtype.
        dim: the axis normalised over (``axis=`` also works).
        mask: as in ``softmax``.

    Returns:
        A tensor shaped like `x`; −inf at masked positions, 0 across a fully masked row (by
        definition, with a zero gradient: there is no distribution to take the log of).

    Shapes:
        x `(...)`, mask broadcastable to `x.shape`, result `x.shape`.

    Example:
        >>> import tinygrad_attn as ta
        >>> log_softmax(ta.Tensor([0.0, 0.0])).numpy().round(4)
        array([-0.6931, -0.6931], dtype=float32)
    """
    check_float("log_softmax", "x", x)
    if x.ndim == 0:
        check_zero_d_dim("log_softmax", dim)
        return log_softmax(x.reshape(1), 0, mask).reshape(())
    keep, bias = _mask_inputs(mask, x, x.shape, "log_softmax")
    return apply(softmax_ops.LogSoftmax, x, keep, bias,
                        axis=normalize_axis("log_softmax", dim, x.ndim))


def cross_entropy(input: Tensor, target: Any, weight: Any = None, *, ignore_index: int | None = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """−log softmax(logits)[target], reduced.

    Args:
        input: the logits, unnormalised scores, classes on the last axis.
        target: integer class ids in [0, C), or `ignore_index`; an array, list or Tensor. Or
            class probabilities: floats shaped like `logits` (the loss is then −Σ_c q_c log p_c,
            differentiable in the targets too, and `ignore_index` does not apply).
        weight: class weights, C floats (PyTorch's): each position's loss is multiplied by
            weight[target] and the mean divides by the sum of those weights. Integer targets only.
        ignore_index: a target value whose positions count for nothing (loss and gradient 0): −100
            by default, as PyTorch (and ``nll_loss``); None makes every target count.
        reduction: "mean" (over the targets not ignored; if every target is ignored the mean is
            defined as 0, with a zero gradient), "sum" or "none".
        label_smoothing: ε in [0, 1]: the target becomes (1 − ε)·one_hot + ε/C.

    Returns:
        A scalar, or the per-position losses for "none" (0 where ignored).

    Raises:
        ShapeError: `targets.shape` is not `logits.shape[:-1]`.
        TypeError: targets are not integers, or logits are not floats.
        ValueError: a target outside [0, C) that is not `ignore_index` (the message names it),
            or an unknown reduction.

    Shapes:
        logits `(..., C)`, targets `(...)`, result `()` or `(...)` for "none".

    Example:
        >>> import tinygrad_attn as ta
        >>> loss = cross_entropy(ta.Tensor([[0.0, 0.0]]), [1])
        >>> round(loss.item(), 4)
        0.6931
    """
    logits, targets = input, target
    check_reduction("cross_entropy", reduction)
    check_float("cross_entropy", "logits", logits)
    weight = class_weight("cross_entropy", weight, logits)
    if weight is not None and label_smoothing:
        raise ValueError("cross_entropy: weight with label_smoothing is not supported; give one of them")
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    targets = targets if isinstance(targets, Tensor) else Tensor(targets, device=logits.device)
    target_shape, logits_shape = targets.data.shape, logits.data.shape   # once: read at every step
    if targets.data.dtype.kind == "f" and target_shape == logits_shape:
        if weight is not None:
            raise ValueError("cross_entropy: weight applies to integer targets, not to class probabilities")
        return apply(loss_ops.CrossEntropyProbs, logits, targets, label_smoothing=label_smoothing,
                     reduction=reduction)
    if targets.data.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integers, got dtype {targets.dtype} of shape "
                        f"{targets.shape} (float targets are class probabilities of the logits' shape "
                        f"{logits.shape})")
    if not logits_shape or target_shape != logits_shape[:-1]:
        raise ShapeError(f"cross_entropy: logits {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]}, got {targets.shape}")
    classes = logits_shape[-1]
    bad = first_out_of_range(targets.data, classes, ignore_index, targets.host_values)
    if bad is not None:
        raise ValueError(f"cross_entropy: target {bad} is out of range for "
                         f"{classes} classes" + ("" if ignore_index is None
                                                 else f" (ignore_index is {ignore_index})"))
    weights = () if weight is None else (weight,)      # left out when not given: two inputs, as before
    return apply(loss_ops.CrossEntropy, logits, targets, *weights, ignore_index=ignore_index,
                 reduction=reduction, label_smoothing=label_smoothing)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight + bias over the last axis of x, as one op (what ``nn.Linear`` computes).

    Args:
        x: the input; every vector along its last axis is transformed.
        weight: the matrix, (in_features, out_features) as in Q = X W_Q.
        bias: added to every output row, or None.

    Returns:
        A tensor shaped like `x` with its last axis out_features long.

    Shapes:
        x `(..., in)`, weight `(in, out)`, bias `(out,)`, result `(..., out)`.

    Example:
        >>> import tinygrad_attn as ta
        >>> linear(ta.ones(2, 3), ta.ones(3, 4), ta.Tensor([0.0, 1.0, 2.0, 3.0])).numpy()
        array([[3., 4., 5., 6.],
               [3., 4., 5., 6.]], dtype=float32)
    """
    # On the arrays' own shapes and dtypes: every layer of every step passes here.
    x_shape, w_shape = x.data.shape, weight.data.shape
    if x.data.dtype.kind != "f" or weight.data.dtype.kind != "f":
        for name, t in (("x", x), ("weight", weight)):
            check_float("linear", name, t)
    if len(w_shape) != 2 or not x_shape or x_shape[-1] != w_shape[0]:
        raise ShapeError(f"linear: x of shape {x.shape} does not fit weight of shape {weight.shape} "
                         "(expected x (..., in) and weight (in, out))")
    if bias is not None and bias.data.shape != w_shape[1:]:
        raise ShapeError(f"linear: bias of shape {bias.shape} does not match weight's out_features "
                         f"{weight.shape[1]} (expected ({weight.shape[1]},))")
    return apply(matmul_ops.Linear, x, weight, bias)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """(x − μ)/√(σ² + eps) ⊙ weight + bias, μ and σ² (population) over the last axis.

    Args:
        x: the input; each vector along the last axis is normalised on its own.
        weight: per-feature scale, or None for 1.
        bias: per-feature shift, or None for 0.
        eps: added to the variance, so a constant vector gives 0 instead of 0/0.

    Returns:
        A tensor shaped like `x`.

    Shapes:
        x `(..., D)`, weight and bias `(D,)`, result `(..., D)`.

    Example:
        >>> import tinygrad_attn as ta
        >>> layer_norm(ta.Tensor([[1.0, 3.0]])).numpy().round(3)
        array([[-1.,  1.]], dtype=float32)
    """
    check_float("layer_norm", "x", x)
    if x.ndim == 0:
        raise ShapeError("layer_norm: x of shape () has no axis to normalise over; it needs at least 1 dim")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != x.shape[-1:]:
            raise ShapeError(f"layer_norm: {name} of shape {p.shape} does not match the last "
                             f"axis of x {x.shape}")
    return apply(norm_ops.LayerNorm, x, weight, bias, eps=eps)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x / √(mean(x²) + eps) ⊙ weight over the last axis (RMSNorm: no mean subtracted, no bias).

    Args:
        x: the input; each vector along the last axis is normalised on its own.
        weight: per-feature scale, or None for 1.
        eps: added to the mean square, so a zero vector gives 0 instead of 0/0.

    Returns:
        A tensor shaped like `x`; the same values as ``torch.nn.functional.rms_norm`` with this eps.

    Shapes:
        x `(..., D)`, weight `(D,)`, result `(..., D)`.

    Example:
        >>> import tinygrad_attn as ta
        >>> rms_norm(ta.Tensor([[3.0, 4.0]]), eps=0.0).numpy().round(4)
        array([[0.8485, 1.1314]], dtype=float32)
    """
    check_float("rms_norm", "x", x)
    if x.ndim == 0:
        raise ShapeError("rms_norm: x of shape () has no axis to normalise over; it needs at least 1 dim")
    if weight is not None and weight.shape != x.shape[-1:]:
        raise ShapeError(f"rms_norm: weight of shape {weight.shape} does not match the last axis of x "
                         f"{x.shape}")
    if not 0 <= eps < math.inf:
        raise ValueError(f"rms_norm: eps must be a finite number >= 0, got {eps!r}")
    return apply(norm_ops.RMSNorm, x, weight, eps=eps)


def rope(x: Tensor, positions: Any = None, base: float = 10000.0) -> Tensor:
    """Rotary position embedding: each pair of features (i, i + D/2) of the vector at position p is
    rotated by the angle p · base^(−2i/D).

    This is the half-split convention, the "rotate_half" form of Hugging Face's Llama (not the
    interleaved pairs (2i, 2i + 1) of the RoFormer paper): y = x ⊙ cos θ + rotate_half(x) ⊙ sin θ
    with rotate_half(x) = [−x₂, x₁]. The dot product of a query rotated at position m with a key
    rotated at position n depends on m − n only.

    Args:
        x: `(..., T, D)` with D even; queries or keys, heads on a leading axis.
        positions: the positions of the T rows, an integer array (list, NumPy/CuPy array or
            Tensor) of length T; default `arange(T)`. Give the absolute positions when the rows
            continue a sequence (a KV cache's new tokens).
        base: the angles' base; pair i turns base^(−2i/D) radians per position.

    Returns:
        A tensor shaped like `x`; its backward rotates the gradient back, dx = R(−θ) dy.

    Raises:
        ShapeError: x has fewer than 2 axes, D is odd, or positions is not of shape (T,).
        TypeError: positions are not integers.

    Shapes:
        x `(..., T, D)`, positions `(T,)`, result `(..., T, D)`.

    Example:
        >>> import tinygrad_attn as ta
        >>> rope(ta.Tensor([[1.0, 0.0], [1.0, 0.0]])).numpy().round(4)     # D = 2: one pair, θ = p
        array([[1.    , 0.    ],
               [0.5403, 0.8415]], dtype=float32)
    """
    check_float("rope", "x", x)
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ShapeError(f"rope: x must be (..., T, D) with D even (features are rotated in pairs "
                         f"(i, i + D/2)), got shape {x.shape}")
    if positions is None:
        positions = xp_for(x.device).arange(x.shape[-2])
    positions = Tensor(positions.data if isinstance(positions, Tensor) else positions, device=x.device)
    if positions.dtype.kind not in "iu":
        raise TypeError(f"rope: positions must be integers, got dtype {positions.dtype}")
    if positions.shape != x.shape[-2:-1]:
        raise ShapeError(f"rope: positions must have shape ({x.shape[-2]},), one per row of x {x.shape}, "
                         f"got {positions.shape}")
    if not base > 0 or not math.isfinite(base):
        raise ValueError(f"rope: base must be a finite number > 0, got {base!r}")
    return apply(rope_ops.Rope, x, positions, base=base)


def silu(x: Tensor) -> Tensor:
    """SiLU (swish), x · σ(x) elementwise, shaped like `x` (``Tensor.silu``): SwiGLU's gate.

    Example:
        >>> import tinygrad_attn as ta
        >>> silu(ta.Tensor([-1.0, 0.0, 1.0])).numpy().round(4)
        array([-0.2689,  0.    ,  0.7311], dtype=float32)
    """
    return x.silu()


def relu(x: Tensor) -> Tensor:
    """max(x, 0) elementwise, shaped like `x` (``Tensor.relu``; its gradient at 0 is taken as 0).

    >>> import tinygrad_attn as ta
    >>> relu(ta.Tensor([-1.0, 0.0, 2.0])).numpy()
    array([0., 0., 2.], dtype=float32)
    """
    return x.relu()


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU x·Φ(x), Φ(x) = ½(1 + erf(x/√2)); approximate="tanh": Φ ≈ ½(1 + tanh(√(2/π)(x + 0.044715x³))).

    >>> import tinygrad_attn as ta
    >>> gelu(ta.Tensor([-1.0, 0.0, 1.0])).numpy().round(4)
    array([-0.1587,  0.    ,  0.8413], dtype=float32)
    >>> gelu(ta.Tensor([-1.0, 0.0, 1.0]), approximate="tanh").numpy().round(4)
    array([-0.1588,  0.    ,  0.8412], dtype=float32)
    """
    return input.gelu(approximate)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout: zero each element with probability p, scale the rest by 1/(1 − p).

    The identity when not training or p = 0. The mask is drawn on `x`'s device by its own random
    generator (NumPy's on the CPU, CuPy's on the GPU), seeded through ``ta.manual_seed``, so it
    is repeatable and never crosses between host and device.
    The op itself (``dropout``) takes the keep-mask as an input, so it can be gradient-checked
    with a fixed mask.

    Args:
        x: any float tensor.
        p: the probability of zeroing an element, in [0, 1) (0.5 by default, as PyTorch).
        training: False makes this the identity (evaluation).

    Returns:
        A tensor shaped like `x` (`x` itself when it is the identity).

    Raises:
        ValueError: p outside [0, 1) (the message names p).

    Shapes:
        x `(...)`, result `x.shape`.

    Example:
        >>> import tinygrad_attn as ta
        >>> dropout(ta.ones(3), 0.5, training=False).numpy()
        array([1., 1., 1.], dtype=float32)
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = Tensor(generator_for(x.device).random(x.shape) >= p, device=x.device)
    return apply(selection_ops.Dropout, x, keep, p=p)


def _attention(op: type, name: str, q: Tensor, k: Tensor, v: Tensor, mask: Any, is_causal: bool,
               scale: float | None, return_weights: bool, dropout_p: float, fused: bool = True,
               enable_gqa: bool = False, window: int | None = None, **params: Any) -> Any:
    """Shared argument checks and mask handling of the two attention kernels."""
    for arg, t in (("q", q), ("k", k), ("v", v)):
        check_float(name, arg, t)
    if window is not None and (isinstance(window, bool) or not isinstance(window, (int, np.integer))
                               or window < 1 or not is_causal):
        raise ValueError(f"{name}: window must be an integer >= 1 and needs is_causal=True (query i sees "
                         f"keys i − window + 1 … i), got window={window!r}, is_causal={is_causal}")
    if enable_gqa:
        return _grouped_query_attention(op, name, q, k, v, mask, is_causal, scale, return_weights, dropout_p,
                                        fused, window=window, **params)
    batch, n_q, n_k = attention_shapes(name, q.shape, k.shape, v.shape)
    # d_k = 0: every score is an empty sum, 0, whatever the scale (1 instead of 1/√0).
    scale = (1 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0) if scale is None else scale
    if not 0 <= dropout_p < 1:
        raise ValueError(f"{name}: dropout_p must be in [0, 1), got {dropout_p}")
    keep, bias = (_at_least_2d(m) for m in _mask_inputs(mask, q, batch + (n_q, n_k), name))
    if fused and not return_weights and not dropout_p:
        return apply(op, q, k, v, keep, bias, scale=scale, is_causal=is_causal, window=window, **params)
    # Unfused, or the weights are asked for or dropped out (so the (n_q, n_k) matrix is held
    # whatever the kernel): build attention from registered ops, each its own backward step.
    if is_causal:
        causal = causal_keep(xp_for(q.device), slice(0, n_q), slice(0, n_k), window)
        keep = named(Tensor(combine_keep(None if keep is None else keep.data, causal),
                             device=q.device), "mask")
    k_t = named(k.swapaxes(-1, -2), "Kᵀ")                                # (..., Dk, Tk)
    scores = named(named(q @ k_t, "Q Kᵀ") * scale, "S")               # (..., Tq, Tk)
    weights = named(apply(softmax_ops.Softmax, scores, keep, bias, axis=scores.ndim - 1), "P")
    out = dropout(weights, dropout_p) @ v                               # (..., Tq, Dv)
    return (out, weights) if return_weights else out


def _at_least_2d(mask: Tensor | None) -> Tensor | None:
    """A 0-d or 1-d mask with leading axes of 1, so that the kernels can cut it into (query, key)
    tiles (it broadcasts as before)."""
    if mask is None or mask.ndim >= 2:
        return mask
    return Tensor(mask.data.reshape((1,) * (2 - mask.ndim) + mask.shape), device=mask.device)


def _grouped_query_attention(op: type, name: str, q: Tensor, k: Tensor, v: Tensor, mask: Any,
                             is_causal: bool, scale: float | None, return_weights: bool, dropout_p: float,
                             fused: bool, **params: Any) -> Any:
    """Grouped-query attention without repeating K and V: q (..., Hq, T, D) is viewed as
    (..., Hkv, G, T, D) and k, v as (..., Hkv, 1, S, D), so kv head j broadcasts over its G = Hq/Hkv
    query heads j·G … j·G + G − 1 (PyTorch's h // G rule). Backward sums dK and dV over each
    group: the engine sums a broadcast input's gradient back to its shape (a shared tensor sums
    the gradients of its uses)."""
    if min(q.ndim, k.ndim, v.ndim) < 3 or k.shape[-3] != v.shape[-3] or k.shape[-3] == 0 \
            or q.shape[-3] % k.shape[-3]:
        raise ShapeError(f"{name}: enable_gqa needs q (..., Hq, T, D) and k, v (..., Hkv, S, D) with the "
                         f"same Hkv ≥ 1 and Hq divisible by Hkv, got q {q.shape}, k {k.shape}, v {v.shape}")
    h_q, h_kv = q.shape[-3], k.shape[-3]
    group = h_q // h_kv
    q_grouped = named(q.reshape(*q.shape[:-3], h_kv, group, *q.shape[-2:]), "Q by kv head")
    k_grouped = named(k.reshape(*k.shape[:-3], h_kv, 1, *k.shape[-2:]), "K (one per group)")
    v_grouped = named(v.reshape(*v.shape[:-3], h_kv, 1, *v.shape[-2:]), "V (one per group)")
    result = _attention(op, name, q_grouped, k_grouped, v_grouped, _grouped_mask(name, mask, q, h_kv),
                        is_causal, scale, return_weights, dropout_p, fused, **params)

    def heads(t: Tensor) -> Tensor:                                     # (…, Hkv, G, T, ·) → (…, Hq, T, ·)
        return t.reshape(*t.shape[:-4], h_q, *t.shape[-2:])

    return (heads(result[0]), heads(result[1])) if return_weights else heads(result)


def _grouped_mask(name: str, mask: Any, q: Tensor, h_kv: int) -> Any:
    """A mask for (..., Hq, Tq, Tk) reshaped for the grouped view (..., Hkv, G, Tq, Tk)."""
    if mask is None:
        return None
    data = Tensor(mask.data if isinstance(mask, Tensor) else mask, device=q.device).data
    if data.ndim < 3:
        return data                                                     # (Tq, Tk) fits every head
    heads = data.shape[-3]
    if heads == 1:
        return data[..., None, :, :]
    if heads != q.shape[-3]:
        raise ShapeError(f"{name}: mask of shape {data.shape} has {heads} heads on axis -3; need 1 or "
                         f"the {q.shape[-3]} query heads")
    return data.reshape(data.shape[:-3] + (h_kv, heads // h_kv) + data.shape[-2:])


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Any = None,
                                 is_causal: bool = False, scale: float | None = None,
                                 return_weights: bool = False, fused: bool = True,
                                 dropout_p: float = 0.0, enable_gqa: bool = False,
                                 window: int | None = None) -> Any:
    """softmax(scale · Q Kᵀ, mask) V as one op with a hand-derived backward.

    Args:
        q: queries `(..., n_q, d_k)`; k: keys `(..., n_k, d_k)`; v: values `(..., n_k, d_v)`;
            batch axes broadcast.
        mask: boolean (True = the key takes part) or float (added to the scores), broadcastable
            to `(..., n_q, n_k)`; never differentiated.
        is_causal: query i sees keys j ≤ i (aligned top-left when n_q ≠ n_k, as in PyTorch).
        scale: multiplies Q Kᵀ; defaults to 1/√d_k.
        return_weights: also return the attention weights `(..., n_q, n_k)`; they are then
            computed from registered ops (matmul, softmax), so both results are differentiable.
        fused: True (the default) runs attention as one op with a hand-derived backward; False
            builds it from registered primitives, Kᵀ (swapaxes), Q Kᵀ (matmul), S (scale), P (the
            masked softmax op) and P V (matmul), so each is its own backward step. Both give the
            same outputs and gradients (up to rounding).
        dropout_p: drop each weight with this probability (``dropout``) before multiplying V,
            as PyTorch's argument of that name: pass it while training only. Above 0 the
            weights are built from registered ops, as for `return_weights`.
        enable_gqa: grouped-query attention, as in PyTorch: q `(..., Hq, n_q, d_k)`, k and v
            `(..., Hkv, n_k, ·)` with Hq divisible by Hkv; query head h reads kv head
            h // (Hq / Hkv). K and V are broadcast, never repeated in memory, and dK, dV sum the
            gradients of the query heads sharing them.
        window: with `is_causal`, query i sees keys i − window + 1 … i only (a sliding window);
            None: every key j ≤ i.

    Returns:
        The output `(..., n_q, d_v)`, or `(output, weights)` (the weights before dropout).
        Masked weights are exactly 0, and a query whose every key is masked gets a zero output.

    Raises:
        ShapeError: d_k of q and k differ, k and v have different n_k, batch axes or the mask
            do not broadcast (the message names the op and the shapes); with `enable_gqa`, Hq
            not divisible by Hkv.
        ValueError: `window` < 1, or a window without `is_causal`.

    Example:
        >>> import tinygrad_attn as ta
        >>> q = k = ta.Tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v = ta.Tensor([[1.0], [2.0]])
        >>> scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
        array([[1.       ],
               [1.6697615]], dtype=float32)
    """
    return _attention(attention_ops.ScaledDotProductAttention, "scaled_dot_product_attention",
                      q, k, v, mask, is_causal, scale, return_weights, dropout_p, fused, enable_gqa, window)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, mask: Any = None, is_causal: bool = False,
                    scale: float | None = None, return_weights: bool = False,
                    block_size: int = 256, enable_gqa: bool = False, window: int | None = None) -> Any:
    """The same results as ``scaled_dot_product_attention``, in key blocks of `block_size`.

    Forward keeps a running row maximum and sum (online softmax) and saves only the output and
    the row log-sum-exp; backward recomputes each block's probabilities as exp(S − L). Neither
    pass holds the `(n_q, n_k)` matrix, only tiles of at most `(512, block_size)`, unless `return_weights`
    asks for it (the weights are then built as in ``scaled_dot_product_attention``). With
    `is_causal`, a key block is paired only with the queries that can see some of it.

    Args:
        q, k, v, mask, is_causal, scale, return_weights, enable_gqa, window: as in
            ``scaled_dot_product_attention``; with a window, the key blocks wholly outside every
            query's window are never visited, so the time grows as n · window, not n².
        block_size: keys per block. 256 keeps the tiles big enough for BLAS: at n = 4096 the
            peak memory of forward + backward is about 1/20 of the plain kernel's, and the time
            no worse (``python -m benchmarks.flash_vs_plain``).

    Returns:
        The output `(..., n_q, d_v)`, or `(output, weights)`; equal to the plain kernel's up to
        rounding (1e-10 in float64, outputs and gradients).

    Raises:
        ShapeError: as in ``scaled_dot_product_attention``.
        ValueError: `block_size` < 1.

    Example:
        >>> import tinygrad_attn as ta
        >>> q = k = ta.Tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> v = ta.Tensor([[1.0], [2.0]])
        >>> flash_attention(q, k, v, is_causal=True, block_size=1).numpy()
        array([[1.       ],
               [1.6697615]], dtype=float32)
    """
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)):
        raise TypeError(f"flash_attention: block_size must be an int (keys per block), got {block_size!r}")
    if block_size < 1:
        raise ValueError(f"flash_attention: block_size must be at least 1, got {block_size}")
    return _attention(flash_ops.FlashAttention, "flash_attention", q, k, v, mask, is_causal, scale,
                      return_weights, 0.0, enable_gqa=enable_gqa, window=window, block_size=block_size)
