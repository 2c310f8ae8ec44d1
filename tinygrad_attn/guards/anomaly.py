"""Anomaly mode: stop at the first op whose output or gradient holds NaN or Inf.

Off by default, and per thread (as PyTorch's): one thread's ``detect_anomaly`` never checks another
thread's ops. ``apply`` and the backward pass each test ``mode.open_blocks`` (the blocks open in
all threads); only when it is not 0 do they call ``check_forward`` (which also
records the user's line on the node) and ``check_gradient``, which first ask whether this thread
is inside a block.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..errors import AnomalyError
from ..labels import input_label, op_location
from ..thread_switch import ThreadSwitch

if TYPE_CHECKING:
    from ..engine import Node
    from ..ops.base import Op
    from ..tensor import Tensor

__all__ = ["check_forward", "check_gradient", "detect_anomaly", "is_anomaly_enabled"]


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tinygrad_attn/


mode = ThreadSwitch(default=False)     # on in a thread inside detect_anomaly


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Raise AnomalyError at the first op whose output or gradient holds NaN or Inf.

    The error names the op, its module scope, the bad input or output, and the file and line of
    user code that created the op. Off by default and per thread (ops run by other threads are
    not checked); when off everywhere it costs one flag test per op.
    """
    with mode.set_to(True):
        yield


def is_anomaly_enabled() -> bool:
    """Whether this thread is inside ``detect_anomaly``."""
    return mode.value()


def check_forward(op: type[Op], xp: Any, inputs: tuple, out: Any, node: Node | None, scope: Any,
                  params: dict[str, Any] | None = None) -> None:
    """In a thread inside ``detect_anomaly``: remember the user's line on the node; raise if `out`
    holds NaN, +inf or a −inf that is not masking (``_masking_neg_inf``), naming the inputs that
    already held NaN or Inf (else this op made them)."""
    if not mode.value():
        return
    site = _user_site()
    if node is not None:
        node.site = site    # type: ignore[assignment]  # (engine.Node declares site as None only)
    if _is_finite(xp, out) or _masking_neg_inf(op.name, xp, inputs, out, params or {}):
        return
    bad = [input_label(i, t) for i, t in enumerate(inputs) if t is not None and not _is_finite(xp, t.data)]
    cause = (f"; inputs already holding NaN or Inf: {', '.join(bad)}" if bad
             else "; its inputs were finite, so this op made them")
    raise AnomalyError(f"{op.name}: forward output {tuple(out.shape)} holds NaN or Inf{cause}"
                       f"{op_location(scope, inputs, site)}")


# Ops that only move elements: a −inf in their output was in an input (a masked score carried on).
_MOVES = frozenset({"reshape", "transpose", "getitem", "split", "concat", "stack", "where", "masked_fill",
                    "expand", "flip", "roll", "repeat", "repeat_interleave", "diagonal", "gather", "pad",
                    "tril", "triu"})


def _masking_neg_inf(name: str, xp: Any, inputs: tuple, out: Any, params: dict[str, Any]) -> bool:
    """True if every non-finite element of `out` is a documented −inf of masking: log_softmax's
    masked positions (a False keep, a −inf float mask or a −inf logit), masked_fill's value −inf,
    or a −inf that an op moving elements carries on from an input. NaN and +inf never are."""
    if name not in _MOVES and name != "log_softmax":
        return False
    if bool(xp.isnan(out).any()) or bool((out == xp.inf).any()):
        return False
    neg_inf = lambda a: a.dtype.kind == "f" and bool((a == -xp.inf).any())
    if name in _MOVES:
        return (name == "masked_fill" and params.get("value") == -float("inf")) or \
            any(t is not None and neg_inf(t.data) for t in inputs)
    x, keep, bias = inputs
    allowed = x.data == -xp.inf
    if keep is not None:
        allowed = allowed | ~keep.data
    if bias is not None:
        allowed = allowed | (bias.data == -xp.inf)
    return not bool(((out == -xp.inf) & ~allowed).any())


def check_gradient(node: Node, index: int, parent: Tensor, grad: Any) -> None:
    """In a thread inside ``detect_anomaly``: raise if the gradient that `node`'s backward sends to
    input `index` is not finite."""
    if mode.value() and not _is_finite(node.ctx.xp, grad):
        raise AnomalyError(f"{node.op.name}: backward gradient {tuple(grad.shape)} for "
                           f"{input_label(index, parent)} holds NaN or Inf"
                           f"{op_location(node.scope, node.parents, node.site)}")


def _is_finite(xp: Any, array: Any) -> bool:
    return not xp.issubdtype(array.dtype, xp.floating) or bool(xp.isfinite(array).all())


def _user_site() -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside this package: the user code behind an op."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)
