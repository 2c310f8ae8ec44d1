"""Backprop one node at a time: ``backprop_steps`` and the ``Step`` record a learner reads.

``backprop_steps`` wraps ``engine.backward_steps``, the very generator that ``Tensor.backward``
drains, so the steps are the real backward pass: once all steps are drained, the leaves'
``.grad`` hold exactly what ``backward()`` would have written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import engine
from .backend import to_numpy
from .nn.module import Parameter
from .tensor import Tensor


def abbreviate(array: Any, items: int = 3) -> str:
    """A short text for an array: the values when small, else shape, norm and a few values."""
    if array is None:
        return "—"
    values = to_numpy(array)
    if values.size <= 2 * items:
        return np.array2string(values, precision=4, suppress_small=True, separator=", ").replace("\n", "")
    flat = ", ".join(f"{v:.4g}" for v in values.reshape(-1)[:items])
    return f"‖·‖={float(np.linalg.norm(values)):.4g} [{flat}, …]"


@dataclass(frozen=True)
class Step:
    """One node of the backward pass: what arrived, the formula used, what was sent on.

    Attributes:
        index: position in the backward pass (0 is the op that made the loss).
        op, formula: the op's name and its backward formula lines (``Op.formula``).
        module: dotted path of the module the op ran in (None outside modules).
        output_shape, input_shapes: shapes (None for an absent optional input).
        input_names: per input, its parameter name, ``<op>`` of the op that made it, or
            ``leaf`` / ``constant``.
        parameters: names of the inputs that are module parameters.
        saved: names of the residuals forward saved (``ctx.saved`` keys).
        grad: the gradient arriving at the output; sent: the gradient sent to each input
            (None where none is needed), already summed back to the input's shape.
        tensor: the output tensor itself.
    """

    index: int
    op: str
    formula: tuple[str, ...]
    module: str | None
    output_shape: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    input_names: tuple[str, ...]
    parameters: tuple[str, ...]
    saved: tuple[str, ...]
    grad: Any
    sent: tuple[Any, ...]
    tensor: Tensor

    def __str__(self) -> str:
        where = f"  (in {self.module})" if self.module else ""
        lines = [f"step {self.index}: {self.op}{where}",
                 f"  output {self.output_shape}, grad arriving {abbreviate(self.grad)}"]
        lines += [f"  formula  {f}" for f in self.formula]
        if self.saved:
            lines.append(f"  saved    {', '.join(self.saved)}")
        for i, (name, shape, g) in enumerate(zip(self.input_names, self.input_shapes, self.sent)):
            if shape is not None:
                lines.append(f"  → input {i} {name} {shape}: {abbreviate(g)}")
        return "\n".join(lines)


def backprop_steps(loss: Tensor, grad: Any = None) -> Iterator[Step]:
    """Run the backward pass from `loss` one op node at a time, yielding a ``Step`` for each.

    `grad` is as in ``Tensor.backward`` (omitted for a single-element loss). Leaf gradients are
    accumulated as the pass goes, exactly as ``backward()`` does.

    Example:
        >>> import tinygrad_attn as ta
        >>> x = ta.Tensor([1.0, 2.0], requires_grad=True)
        >>> [s.op for s in backprop_steps((x * x).sum())]
        ['sum', 'mul']
        >>> x.grad
        array([2., 4.], dtype=float32)
    """
    for index, event in enumerate(engine.backward_steps(loss, loss._seed_grad(grad, "backprop_steps"))):
        node = event.tensor._node
        yield Step(
            index=index, op=node.op.name, formula=node.op.formula,
            module=engine.scope_name(node.scope),
            output_shape=event.tensor.shape,
            input_shapes=tuple(None if p is None else p.shape for p in node.parents),
            input_names=tuple("None" if p is None else engine.tensor_label(p) for p in node.parents),
            parameters=tuple(p.name or "(unnamed)" for p in node.parents
                             if isinstance(p, Parameter)),
            saved=tuple(node.ctx.saved), grad=event.grad, sent=event.sent, tensor=event.tensor)
