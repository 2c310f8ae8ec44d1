"""apply: the one function every differentiable operation goes through.

A Tensor method, an ``F`` function or a new op calls ``apply(OpClass, *tensors, **params)``. It
reads the inputs' arrays, runs the op's forward on them, records a graph node (``engine.record``)
when some input requires grad, and wraps the result in a tensor of the inputs' class. The result's
class is read from the inputs (it is always ``Tensor``) so that this module, which ``tensor.py``
builds on, needs no import of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import engine
from .backend import array_module
from .errors import DeviceError
from .float_errors import restore_float_errors, silence_float_errors
from .guards import anomaly
from .kernels.registry import ACTIVE
from .ops.base import Context, Op
from .scopes import current_scope

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["apply"]

_HALF = np.dtype(np.float16)    # NumPy's dtypes are singletons: `is` is a pointer test


def apply(op: type[Op], *inputs: Tensor | None, **params: Any) -> Tensor:
    """Run `op` on the inputs' arrays and wrap the result, recording a Node if grad is needed.

    Every differentiable operation ends here: the Tensor methods, ``functional``, and a new op.
    It runs for every op, so it reads the inputs in one loop: their arrays, whether each needs a
    gradient, and that they share one device (arrays of one type do: one type test per input).
    The op runs as its kernel on that device (``kernels/``) unless it runs in textbook form
    (``ta.textbook()``), and the graph records the class that ran. An op that sums
    (``Op.half_in_single``) gets float16 inputs as float32 and its float32 result goes back to
    float16, unless the call asks for a `dtype`.
    """
    arrays: list[Any] = []
    needs_grad: list[bool] = []
    first = owner = None
    for t in inputs:
        if t is None:
            arrays.append(None)
            needs_grad.append(False)
            continue
        data = t.data
        if first is None:
            first, owner = data, t
        elif type(data) is not type(first):
            _check_one_device(op, inputs)
        arrays.append(data)
        needs_grad.append(t.requires_grad)
    xp = array_module(first)
    kernels = ACTIVE.get(op)        # its kernel on each device, unless the op runs in textbook form
    if kernels is not None:
        op = kernels[xp is not np]
    ctx = Context(xp, tuple(needs_grad), params)
    half = op.half_in_single and params.get("dtype") is None and _has_half(arrays)
    if half:
        arrays = [a.astype(np.float32) if a is not None and a.dtype == np.float16 else a for a in arrays]
    token = silence_float_errors()  # inf/NaN without RuntimeWarnings, as PyTorch; anomaly mode reports them
    try:
        out = op.forward(ctx, *arrays, **params)
        if half and out.dtype == np.float32:
            out = out.astype(np.float16)    # a sum past 65504 is inf, quietly, as PyTorch
    finally:
        restore_float_errors(token)
    node = engine.record(op, ctx, inputs, out) if True in needs_grad else None
    if anomaly.mode.open_blocks:    # the only cost of anomaly mode when it is off: this one test
        anomaly.check_forward(op, xp, inputs, out, node, current_scope(), params)
    return type(owner)._from_op(out, op.name, node)  # type: ignore[union-attr]  # Tensor's, without an import



def _has_half(arrays: list[Any]) -> bool:
    for a in arrays:                # a loop, not any(generator): this runs for every summing op
        if a is not None and a.dtype is _HALF:
            return True
    return False


def _check_one_device(op: type[Op], inputs: tuple[Tensor | None, ...]) -> None:
    """DeviceError naming the op and the devices when the inputs' arrays are on two devices."""
    devices = [t.device for t in inputs if t is not None]
    if len(set(devices)) > 1:
        raise DeviceError(f"{op.name}: inputs are on different devices ({', '.join(devices)}); "
                          "move them with .to()")
