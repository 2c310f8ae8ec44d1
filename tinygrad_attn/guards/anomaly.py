"""Anomaly mode: stop at the first op whose output or gradient holds NaN or Inf.

Off by default. ``apply`` and the backward pass each test the one flag ``active``; only when it is
on do they call ``check_forward`` (which also records the user's line on the node) and
``check_gradient``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import AnomalyError
from .labels import input_label, op_location

if TYPE_CHECKING:
    from ..engine import Node
    from ..ops.base import Op
    from ..tensor import Tensor

__all__ = ["active", "check_forward", "check_gradient", "detect_anomaly"]


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tinygrad_attn/

active = False      # set only by detect_anomaly


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Raise AnomalyError at the first op whose output or gradient holds NaN or Inf.

    The error names the op, its module scope, the bad input or output, and the file and line of
    user code that created the op. Off by default; when off it costs one flag test per op.
    """
    global active
    previous, active = active, True
    try:
        yield
    finally:
        active = previous


def check_forward(op: type[Op], xp: Any, inputs: tuple, out: Any, node: Node | None, scope: Any) -> None:
    """Remember the user's line on the node; raise if `out` is not finite, naming the inputs that
    already held NaN or Inf (else this op made them)."""
    site = _user_site()
    if node is not None:
        node.site = site
    if _is_finite(xp, out):
        return
    bad = [input_label(i, t) for i, t in enumerate(inputs) if t is not None and not _is_finite(xp, t.data)]
    cause = (f"; inputs already holding NaN or Inf: {', '.join(bad)}" if bad
             else "; its inputs were finite, so this op made them")
    raise AnomalyError(f"{op.name}: forward output {tuple(out.shape)} holds NaN or Inf{cause}"
                       f"{op_location(scope, inputs, site)}")


def check_gradient(node: Node, index: int, parent: Tensor, grad: Any) -> None:
    """Raise if the gradient that `node`'s backward sends to input `index` is not finite."""
    if not _is_finite(node.ctx.xp, grad):
        raise AnomalyError(f"{node.op.name}: backward gradient {tuple(grad.shape)} for "
                           f"{input_label(index, parent)} holds NaN or Inf"
                           f"{op_location(node.scope, node.parents, node.site)}")


def _is_finite(xp: Any, array: Any) -> bool:
    return not xp.issubdtype(array.dtype, xp.floating) or bool(xp.isfinite(array).all())


def _user_site() -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside this package: the user code behind an op."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)
