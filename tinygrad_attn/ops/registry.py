"""``REGISTRY`` and ``@register``: every differentiable op registers here once, by its name."""

from __future__ import annotations

from .base import Op

__all__ = ["REGISTRY", "register"]

REGISTRY: dict[str, type[Op]] = {}


def register(op: type[Op]) -> type[Op]:
    """Class decorator: add `op` to REGISTRY after checking its formula names its forward's inputs
    and it carries at least one gradcheck case. A registered op never writes into the gradient it
    is handed (tests/ops/test_op_contract.py checks it), so the engine hands it over without a copy."""
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    inputs = op.input_names()
    if tuple(op.formula) != inputs:
        raise ValueError(f"op {op.name!r}: formula must have one entry per forward input {inputs}, "
                         f"in order; it has {tuple(op.formula)}")
    if not op.formula_lines() or not op.cases:
        raise ValueError(f"op {op.name!r} needs a formula for at least one input and a gradcheck case")
    op.grad_read_only = True
    op.textbook = op
    REGISTRY[op.name] = op
    return op
