"""The rest of ``F``: the losses and activations beyond what a transformer uses, with PyTorch's
names and defaults (``nll_loss``, the binary cross-entropies, ``mse_loss``, ``leaky_relu`` … ``mish``,
``pad``, ``one_hot``). Each checks its arguments, then calls one registered op (or a short
composition of ops); ``functional`` re-exports every name here, so ``F.selu`` is this ``selu``.
"""

from __future__ import annotations

from typing import Any

from .apply import apply
from .dtypes import as_float
from .errors import ShapeError
from .functional_arguments import check_float, check_reduction, class_weight
from .guards.shapes import check_broadcasts_to, first_out_of_range
from .ops import activations as act_ops
from .ops import loss as loss_ops
from .tensor import Tensor

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "celu", "elu", "hardsigmoid",
           "hardswish", "hardtanh", "leaky_relu", "logsigmoid", "mish", "mse_loss", "nll_loss", "one_hot",
           "pad", "relu6", "selu", "softplus", "softsign"]


def __dir__() -> list[str]:
    """``dir()`` lists these functions alone, as ``help()`` does (PEP 562)."""
    return sorted(__all__)


def _pair(op: str, x: Tensor, target: Any, reduction: str) -> Tensor:
    """`target` as a float tensor of x's shape and dtype, checked (the elementwise losses)."""
    check_reduction(op, reduction)
    check_float(op, "input", x)
    if not isinstance(target, Tensor) or target.dtype != x.dtype:
        target = Tensor(target, dtype=x.dtype, device=x.device)
    if target.shape != x.shape:
        raise ShapeError(f"{op}: target of shape {target.shape} does not match input of shape {x.shape}")
    return target


def nll_loss(input: Tensor, target: Any, weight: Any = None, *, ignore_index: int | None = -100,
             reduction: str = "mean") -> Tensor:
    """−log_probs[target] per position, reduced: ``cross_entropy`` after a ``log_softmax``.

    Args:
        input: log-probabilities, classes on the last axis (as ``cross_entropy`` here; for
            2-D input `(N, C)` this is PyTorch's layout).
        target: integer class ids in [0, C), or `ignore_index`.
        weight: class weights, C floats: the loss at a position is −weight[target]·log_probs[target],
            and the mean divides by the sum of weight[target] (PyTorch's weighted mean).
        ignore_index: a target value whose positions count for nothing (−100, PyTorch's default).
        reduction: "mean" (over the targets not ignored), "sum" or "none".

    Returns:
        A scalar, or the per-position losses for "none".

    Example:
        >>> import tinygrad_attn as ta
        >>> nll_loss(ta.Tensor([[-0.5, -1.0]]), [1]).item()
        1.0
    """
    log_probs, targets = input, target
    check_reduction("nll_loss", reduction)
    check_float("nll_loss", "log_probs", log_probs)
    weight = class_weight("nll_loss", weight, log_probs)
    targets = targets if isinstance(targets, Tensor) else Tensor(targets, device=log_probs.device)
    if targets.dtype.kind not in "iu" or log_probs.ndim < 1 or targets.shape != log_probs.shape[:-1]:
        raise ShapeError(f"nll_loss: log_probs {log_probs.shape} need integer targets of shape "
                         f"{log_probs.shape[:-1]}, got {targets.dtype} {targets.shape}")
    bad = first_out_of_range(targets.data, log_probs.shape[-1], ignore_index, targets.host_values)
    if bad is not None:
        raise ValueError(f"nll_loss: target {bad} is out of range for {log_probs.shape[-1]} classes")
    weights = () if weight is None else (weight,)
    return apply(loss_ops.NllLoss, log_probs, targets, *weights, ignore_index=ignore_index,
                 reduction=reduction)


def _element_weight(op: str, name: str, weight: Any, x: Tensor) -> Tensor | None:
    """`weight` as a constant tensor of x's dtype on x's device that broadcasts to x's shape (None
    stays None); it is never differentiated (PyTorch's binary cross-entropy weights are not either)."""
    if weight is None:
        return None
    data = weight.data if isinstance(weight, Tensor) else weight
    weight = Tensor(data, dtype=x.dtype, device=x.device)
    check_broadcasts_to(op, name, weight.shape, x.shape)
    return weight


def _present(*inputs: Tensor | None) -> tuple[Tensor | None, ...]:
    """The inputs without the trailing Nones (an optional weight left out when not given)."""
    kept = list(inputs)
    while kept and kept[-1] is None:
        kept.pop()
    return tuple(kept)


def binary_cross_entropy(probs: Tensor, target: Any, weight: Any = None, *,
                         reduction: str = "mean") -> Tensor:
    """−w·(y log p + (1 − y) log(1 − p)) elementwise, each log clamped at −100 (as PyTorch), reduced.

    Args:
        probs: probabilities p in [0, 1], any shape.
        target: y, floats of p's shape (0/1 labels, or soft targets); differentiable.
        weight: w, each element's weight, broadcastable to p's shape (a rescaling, as PyTorch's;
            never differentiated); the mean stays over the elements.
        reduction: "mean", "sum" or "none".

    Example:
        >>> import tinygrad_attn as ta
        >>> round(binary_cross_entropy(ta.Tensor([0.5]), [1.0]).item(), 4)
        0.6931
        >>> round(binary_cross_entropy(ta.Tensor([0.5, 0.5]), [1.0, 0.0], weight=[2.0, 0.0]).item(), 4)
        0.6931
    """
    op = "binary_cross_entropy"
    target = _pair(op, probs, target, reduction)
    weight = _element_weight(op, "weight", weight, probs)
    return apply(loss_ops.BinaryCrossEntropy, *_present(probs, target, weight), reduction=reduction)


def binary_cross_entropy_with_logits(logits: Tensor, target: Any, weight: Any = None, *,
                                     reduction: str = "mean", pos_weight: Any = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(logits), target, weight)`` as one stable op (never log 0),
    with `pos_weight` scaling the positive term: −w·(pw·y log σ(x) + (1 − y) log(1 − σ(x))).

    Args:
        logits: x, any shape.
        target: y, floats of x's shape; differentiable.
        weight: w, each element's weight, broadcastable to x's shape; never differentiated.
        reduction: "mean" (over the elements), "sum" or "none".
        pos_weight: pw, the weight of the positive examples, broadcastable to x's shape (one per
            class on the last axis: pw > 1 raises recall); never differentiated.

    Example:
        >>> import tinygrad_attn as ta
        >>> round(binary_cross_entropy_with_logits(ta.Tensor([0.0]), [1.0]).item(), 4)
        0.6931
        >>> round(binary_cross_entropy_with_logits(ta.Tensor([0.0]), [1.0], pos_weight=[3.0]).item(), 4)
        2.0794
    """
    op = "binary_cross_entropy_with_logits"
    target = _pair(op, logits, target, reduction)
    weight = _element_weight(op, "weight", weight, logits)
    pos_weight = _element_weight(op, "pos_weight", pos_weight, logits)
    return apply(loss_ops.BinaryCrossEntropyWithLogits, *_present(logits, target, weight, pos_weight),
                 reduction=reduction)


def mse_loss(input: Tensor, target: Any, reduction: str = "mean", weight: Any = None) -> Tensor:  # noqa: A002
    """(input − target)² elementwise, reduced (both inputs differentiable).

    Args:
        input, target: tensors of one shape.
        reduction: "mean", "sum" or "none".
        weight: w, one weight per element (input's shape), as PyTorch's: the losses become
            w·(input − target)² and the mean divides by Σ w. Differentiable too.

    Example:
        >>> import tinygrad_attn as ta
        >>> mse_loss(ta.Tensor([1.0, 3.0]), ta.Tensor([0.0, 1.0])).item()
        2.5
        >>> mse_loss(ta.Tensor([1.0, 3.0]), ta.Tensor([0.0, 1.0]), weight=ta.Tensor([3.0, 1.0])).item()
        1.75
    """
    target = _pair("mse_loss", input, target, reduction)
    if weight is None:
        return apply(loss_ops.MseLoss, input, target, reduction=reduction)
    weight = weight if isinstance(weight, Tensor) else Tensor(weight, dtype=input.dtype, device=input.device)
    if weight.shape != input.shape:
        raise ShapeError(f"mse_loss: weight of shape {weight.shape} does not match input of shape "
                         f"{input.shape}")
    losses = apply(loss_ops.MseLoss, input, target, reduction="none") * weight
    if reduction == "none":
        return losses
    return losses.sum() / weight.sum() if reduction == "mean" else losses.sum()


def pad(x: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """``x.pad(pad, mode, value)``: (before, after) pairs from the last axis backwards; "constant",
    "reflect", "replicate" or "circular"; a negative width crops. `value` None (PyTorch's
    default) pads with 0."""
    return x.pad(pad, mode, 0.0 if value is None else value)


def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    """``x.one_hot(num_classes)``: int64 rows with a 1 at each class id (no gradient)."""
    return x.one_hot(num_classes)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x for x > 0, negative_slope · x otherwise."""
    return apply(act_ops.LeakyRelu, as_float(x), negative_slope=negative_slope)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """x for x > 0, alpha · (eˣ − 1) otherwise."""
    return apply(act_ops.Elu, as_float(x), alpha=alpha, scale=1.0, input_scale=1.0)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x: Tensor) -> Tensor:
    """scale · elu(x, alpha) with PyTorch's constants (scale ≈ 1.0507, alpha ≈ 1.6733): the ``elu`` op."""
    return apply(act_ops.Elu, as_float(x), alpha=_SELU_ALPHA, scale=_SELU_SCALE, input_scale=1.0)


def celu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """max(0, x) + min(0, alpha · (e^(x/alpha) − 1)): the ``elu`` op with input scale 1/alpha."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return apply(act_ops.Elu, as_float(x), alpha=alpha, scale=1.0, input_scale=1 / alpha)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + e^(beta·x)) / beta, and x itself where beta·x > threshold."""
    return apply(act_ops.Softplus, as_float(x), beta=beta, threshold=threshold)


def softsign(x: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return apply(act_ops.Softsign, as_float(x))


def logsigmoid(x: Tensor) -> Tensor:
    """log σ(x), computed without overflow."""
    return apply(act_ops.LogSigmoid, as_float(x))


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clipped to [min_val, max_val]; the gradient is 0 at and beyond the bounds."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} is above max_val {max_val}")
    return apply(act_ops.Hardtanh, as_float(x), min_val=min_val, max_val=max_val)


def relu6(x: Tensor) -> Tensor:
    """min(max(x, 0), 6): ``hardtanh(x, 0, 6)``, as PyTorch defines it."""
    return hardtanh(x, 0.0, 6.0)


def hardsigmoid(x: Tensor) -> Tensor:
    """clip(x/6 + ½, 0, 1)."""
    return apply(act_ops.Hardsigmoid, as_float(x))


def hardswish(x: Tensor) -> Tensor:
    """x · hardsigmoid(x)."""
    return apply(act_ops.Hardswish, as_float(x))


def mish(x: Tensor) -> Tensor:
    """x · tanh(softplus(x))."""
    return apply(act_ops.Mish, as_float(x))
