"""A module run as one op: its own graph kept inside, its backward one step of the outer pass.

Seeing backprop through a 30-layer model op by op would mean thousands of steps; ``fold(block, x)``
makes a block one node of the graph instead. Its forward calls the module on a fresh leaf holding
x, so the module's ops build a graph of their own; its backward runs that graph's backward pass
from the gradient arriving, which adds the module's parameters' gradients into their ``.grad``
(exactly what the unfolded pass adds) and returns dx. The stepper, the drawing and the explorer
show it as one step, named after the module.

Example:
    >>> import numpy as np
    >>> import tinygrad_attn as ta
    >>> from tinygrad_attn import nn
    >>> block = nn.TransformerBlock(8, 2, 16)
    >>> x = ta.randn(1, 3, 8, requires_grad=True)
    >>> y = fold(block, x, is_causal=True)
    >>> y.op, (y * y).sum().backward() is None, block.ln1.weight.grad.shape
    ('folded', True, (8,))
"""

from __future__ import annotations

from typing import Any

from ..apply import apply
from ..engine import run_backward
from ..ops.base import Op
from ..tensor import Tensor
from .module import Module

__all__ = ["Folded", "fold"]


class Folded(Op):
    """y = module(x), backward by the module's own graph (its steps not shown one by one)."""

    name = "folded"
    formula = {"x": "dx = the module's own backward pass from dy (folded: its ops run inside this "
                    "step, and add its parameters' gradients into their .grad)"}

    @staticmethod
    def forward(ctx, x, *, module, options):
        inner = Tensor(x, requires_grad=ctx.needs_grad[0])
        out = module(inner, **options)
        ctx.inner, ctx.out = inner, out
        return out.data

    @staticmethod
    def backward(ctx, grad):
        """dx: the inner graph's backward from dy; the module's parameters are its leaves."""
        ctx.inner.grad = None               # a second pass must not add the first's dx
        if ctx.out.requires_grad:
            run_backward(ctx.out, grad)
        return (ctx.inner.grad if ctx.needs_grad[0] else None,)


def fold(module: Module, x: Tensor, **options: Any) -> Tensor:
    """`module(x, **options)` as one op (see the module's docstring), named "<module path> output"."""
    with module.scope():
        out = apply(Folded, x, module=module, options=options)
    out.name = f"{module.path or type(module).__name__} output"
    return out
