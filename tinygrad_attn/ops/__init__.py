"""The op registry: every differentiable op registers here once, by its snake_case name."""

from __future__ import annotations

from .base import Op

REGISTRY: dict[str, type[Op]] = {}


def register(op: type[Op]) -> type[Op]:
    """Class decorator: add `op` to REGISTRY after checking it carries a formula and cases."""
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    if not op.formula or not op.cases:
        raise ValueError(f"op {op.name!r} needs a formula and at least one gradcheck case")
    REGISTRY[op.name] = op
    return op
