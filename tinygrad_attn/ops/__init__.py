"""The op registry: every differentiable op registers here once, by its snake_case name.

Importing this package imports every op module, so ``REGISTRY`` is complete whoever imports it
first. Adding an op is one class with ``@register`` in one of these modules (a new module adds its
name to the import line at the bottom).
"""

from __future__ import annotations

from .base import Op

REGISTRY: dict[str, type[Op]] = {}


def register(op: type[Op]) -> type[Op]:
    """Class decorator: add `op` to REGISTRY after checking its formula names its forward's inputs
    and it carries at least one gradcheck case."""
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    inputs = op.input_names()
    if tuple(op.formula) != inputs:
        raise ValueError(f"op {op.name!r}: formula must have one entry per forward input {inputs}, "
                         f"in order; it has {tuple(op.formula)}")
    if not op.formula_lines() or not op.cases:
        raise ValueError(f"op {op.name!r} needs a formula for at least one input and a gradcheck case")
    REGISTRY[op.name] = op
    return op


from . import attention, dropout, elementwise, flash, loss, matmul, norm, reduce, shape, softmax  # noqa: E402,F401,I001
