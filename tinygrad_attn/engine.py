"""Reverse-mode autodiff: recording op nodes, the iterative toposort and the backward pass.

``apply`` runs an op's forward on raw arrays and, when grad mode is on and an input requires
grad, records a ``Node`` on the result. ``backward_steps`` is the one backward pass: a generator
that runs each node's backward in reverse topological order and yields what it did, so that
``Tensor.backward`` (which drains it) and the stepper (which shows it) cannot drift apart.

The graph is kept after backward: a second ``backward`` through it works and accumulates into
the leaves again, and each node keeps the gradient of its output from the latest pass (``grad``)
so that a drawing can show it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from . import inplace
from . import tensor as _tensor
from .backend import xp_for
from .errors import AnomalyError, DeviceError, ShapeError
from .ops.base import Context, Op, quiet_float_errors

if TYPE_CHECKING:
    from .tensor import Tensor

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class _State:
    grad_enabled = True
    anomaly = False
    scopes: list[Any] = []


class Node:
    """How a tensor was made: the op, its context (residuals), its parents in argument order."""

    __slots__ = ("op", "ctx", "parents", "scope", "site", "grad", "watched")

    def __init__(self, op: type[Op], ctx: Context, parents: tuple, scope: Any,
                 site: tuple[str, int] | None):
        self.op, self.ctx, self.parents = op, ctx, parents
        self.scope = scope      # the innermost module running when it was made (has `.path`)
        self.site = site        # (file, line) of user code, recorded only under detect_anomaly
        self.grad = None        # gradient of this node's output from the latest backward
        self.watched = ()       # saved inputs/output with their fingerprints (see inplace.py)


class BackwardEvent(NamedTuple):
    """One node's share of a backward pass: the output tensor, its gradient, what it sent on,
    and the op's insides (a dict of named matrices) when the pass was traced, else None."""

    tensor: Tensor
    grad: Any
    sent: tuple[Any, ...]
    trace: dict[str, Any] | None


@contextmanager
def no_grad() -> Iterator[None]:
    """Record no graph inside the block (inference, optimizer updates)."""
    previous, _State.grad_enabled = _State.grad_enabled, False
    try:
        yield
    finally:
        _State.grad_enabled = previous


def is_grad_enabled() -> bool:
    return _State.grad_enabled


def current_scopes() -> tuple[Any, ...]:
    """The modules running now, outermost first."""
    return tuple(_State.scopes)


@contextmanager
def module_scope(module: Any) -> Iterator[None]:
    """Nodes recorded inside the block remember `module` (whose ``path`` is its dotted name)."""
    _State.scopes.append(module)
    try:
        yield
    finally:
        _State.scopes.pop()


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Raise AnomalyError at the first op whose output or gradient holds NaN or Inf.

    The error names the op, its module scope, the bad input or output, and the file and line of
    user code that created the op. Off by default; when off it costs one flag test per op.
    """
    previous, _State.anomaly = _State.anomaly, True
    try:
        yield
    finally:
        _State.anomaly = previous


def apply(op: type[Op], *inputs: Tensor | None, **params: Any) -> Tensor:
    """Run `op` on the inputs' arrays and wrap the result, recording a Node if grad is needed."""
    Tensor = _tensor.Tensor
    present = [t for t in inputs if t is not None]
    device = present[0].device
    for t in present:
        if t.device != device:
            raise DeviceError(f"{op.name}: inputs are on different devices "
                              f"({', '.join(x.device for x in present)}); move them with .to()")
    needs_grad = tuple(t is not None and t.requires_grad for t in inputs)
    record = _State.grad_enabled and any(needs_grad)
    ctx = Context(xp_for(device), needs_grad, params)
    with quiet_float_errors():      # inf/NaN without RuntimeWarnings, as PyTorch; anomaly mode reports them
        out = op.forward(ctx, *[None if t is None else t.data for t in inputs], **params)
    node = Node(op, ctx, inputs, _current_scope(), None) if record else None
    if node is not None and ctx._saved:
        node.watched = inplace.watch(ctx._saved, inputs, out)
    if _State.anomaly:          # the only cost of anomaly mode when it is off: this one test
        _check_forward(op, ctx.xp, inputs, out, node)
    return Tensor._from_op(out, device, op.name, node)


def toposort(root: Tensor) -> list[Tensor]:
    """Tensors that `root` depends on (and that require grad), producers before consumers.

    Depth-first with an explicit stack of (tensor, expanded) pairs, parents in argument order,
    so there is no recursion limit and the order is the same on every run.
    """
    order: list[Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in visited:
            continue
        visited.add(id(t))
        stack.append((t, True))
        if t.node is not None:
            for parent in reversed(t.node.parents):
                if parent is not None and parent.requires_grad and id(parent) not in visited:
                    stack.append((parent, False))
    return order


def backward_order(root: Tensor) -> list[Tensor]:
    """The tensors made by ops whose backward runs, in the order it runs: the stepper's step i
    (and the drawing's step number i) is the i-th."""
    return [t for t in reversed(toposort(root)) if t.node is not None]


def backward_steps(root: Tensor, grad: Any, trace: bool = False) -> Iterator[BackwardEvent]:
    """The backward pass, one op node at a time, from `root` with gradient `grad`.

    Each node's backward gets the total gradient of its output, its results are summed back to
    each parent's shape (``unbroadcast``) and accumulated; a leaf's ``.grad`` is written once all
    of its consumers have run. With `trace` (the stepper, the explorer) each op's backward also
    records its insides (``Op.insides``) in the event; ``backward()`` never asks for them.
    """
    grads: dict[int, Any] = {id(root): grad}
    shared = {id(grad)}     # arrays someone else holds: the seed, each node's kept gradient
    verified: set[int] = set()  # saved arrays found unchanged in this pass
    for t in reversed(toposort(root)):
        g = grads.pop(id(t), None)
        if g is None:
            continue
        node = t.node
        if node is None:
            with quiet_float_errors():
                t.grad = _owned(g, shared) if t.grad is None else t.grad + g
            continue
        _check_unchanged(node, t, verified)
        node.grad = g
        shared.add(id(g))
        node.ctx.trace = {} if trace and node.op.insides else None
        with quiet_float_errors():      # inf/NaN without RuntimeWarnings, also while summing
            sent = _run_backward(node, g)
            for parent, s in zip(node.parents, sent):
                if s is not None:
                    key = id(parent)
                    grads[key] = s if key not in grads else grads[key] + s
        yield BackwardEvent(t, g, sent, node.ctx.trace)


def _run_backward(node: Node, grad: Any) -> tuple[Any, ...]:
    """The node's backward: one gradient per input, each summed back to its input's shape."""
    raw = node.op.backward(node.ctx, grad)
    sent = tuple(raw) if isinstance(raw, (tuple, list)) else (raw,)
    if len(sent) != len(node.parents):
        raise RuntimeError(f"{node.op.name}: backward returned {len(sent)} gradients "
                           f"for {len(node.parents)} inputs")
    return tuple(_reduce_to_parent(node, i, p, s) for i, (p, s) in enumerate(zip(node.parents, sent)))


def _owned(grad: Any, shared: set[int]) -> Any:
    """`grad` as an array a leaf may own and change in place: copied when it is a view (a
    broadcast one is read-only), or is held elsewhere (the seed, a node's gradient, another leaf)."""
    if grad.base is not None or id(grad) in shared or not getattr(grad.flags, "writeable", True):
        return grad.copy()
    shared.add(id(grad))
    return grad


def _check_unchanged(node: Node, t: Tensor, verified: set[int]) -> None:
    """Refuse to run a node's backward if an array it saved was edited in place since forward."""
    found = inplace.changed(node.watched, verified)
    if found is None:
        return
    index, array = found
    which = f"its output ({tensor_label(t)})" if index is None else _input_label(index, node.parents[index])
    raise RuntimeError(
        f"{node.op.name}: {which} of shape {tuple(array.shape)} was changed in place after the "
        "forward pass saved it for backward, so the gradient would be wrong; change values under "
        "ta.no_grad() before building the graph, or run the forward pass again after changing them"
        f"{_where(node.scope, node.parents, node.site)}")


def _reduce_to_parent(node: Node, index: int, parent: Tensor | None, grad: Any) -> Any:
    if parent is None or not parent.requires_grad or grad is None:
        return None
    grad = unbroadcast(grad, parent.shape, node.op.name)
    if grad.dtype != parent.dtype:
        grad = grad.astype(parent.dtype)
    if _State.anomaly and not _is_finite(node.ctx.xp, grad):
        raise AnomalyError(f"{node.op.name}: backward gradient {tuple(grad.shape)} for "
                           f"{_input_label(index, parent)} holds NaN or Inf"
                           f"{_where(node.scope, node.parents, node.site)}")
    return grad


def unbroadcast(grad: Any, shape: tuple[int, ...], op_name: str = "backward") -> Any:
    """Sum `grad` over the axes that broadcasting added or stretched, giving it `shape`."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    fits = extra >= 0 and all(n in (1, m) for n, m in zip(shape, grad.shape[extra:]))
    if not fits:
        raise ShapeError(f"{op_name}: gradient of shape {tuple(grad.shape)} cannot be reduced "
                         f"to its input's shape {tuple(shape)}")
    stretched = tuple(extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)
    grad = grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True)
    return grad.reshape(shape)


def _is_finite(xp: Any, array: Any) -> bool:
    return not xp.issubdtype(array.dtype, xp.floating) or bool(xp.isfinite(array).all())


def _user_site() -> tuple[str, int] | None:
    """(file, line) of the innermost frame outside this package: the user code behind an op."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def scope_name(scope: Any) -> str | None:
    """A node's module for messages: its dotted path, or its class name for the root module."""
    return None if scope is None else getattr(scope, "path", None) or type(scope).__name__


def _current_scope() -> Any:
    return _State.scopes[-1] if _State.scopes else None


def _check_forward(op: type[Op], xp: Any, inputs: tuple, out: Any, node: Node | None) -> None:
    """Under detect_anomaly: remember the user's line on the node; raise if `out` is not finite,
    naming the inputs that already held NaN or Inf (else this op made them)."""
    site = _user_site()
    if node is not None:
        node.site = site
    if _is_finite(xp, out):
        return
    bad = [_input_label(i, t) for i, t in enumerate(inputs)
           if t is not None and not _is_finite(xp, t.data)]
    cause = (f"; inputs already holding NaN or Inf: {', '.join(bad)}" if bad
             else "; its inputs were finite, so this op made them")
    raise AnomalyError(f"{op.name}: forward output {tuple(out.shape)} holds NaN or Inf{cause}"
                       f"{_where(_current_scope(), inputs, site)}")


def tensor_label(t: Tensor) -> str:
    """How messages, steps and drawings name a tensor: its parameter name, else the op that made
    it ('output of matmul'), else 'leaf' (requires grad) or 'const'."""
    return t.name or (f"output of {t.op}" if t.op else "leaf" if t.requires_grad else "const")


def _input_label(index: int, t: Tensor) -> str:
    """'input 1 (blocks.0.attn.q_proj.weight)', 'input 0 (output of matmul)', 'input 0 (leaf)'."""
    return f"input {index} ({tensor_label(t)})"


def _where(scope: Any, inputs: tuple, site: tuple[str, int] | None) -> str:
    """Where an op sits, for anomaly messages: its module, its named inputs, its user line."""
    parts = []
    if scope is not None:
        path, kind = getattr(scope, "path", None), type(scope).__name__
        parts.append(f"in module {path} ({kind})" if path else f"in module {kind}")
    names = [t.name for t in inputs if t is not None and t.name]
    if names:
        parts.append(f"named inputs {', '.join(names)}")
    if site is not None:
        parts.append(f"created at {site[0]}:{site[1]}")
    return f" ({', '.join(parts)})" if parts else ""
