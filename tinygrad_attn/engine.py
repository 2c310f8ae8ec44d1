"""Reverse-mode autodiff: the graph's nodes, the iterative toposort and the backward pass.

An op's entry point, ``apply``, runs the op's forward on raw arrays and, when grad mode is
on and an input requires grad, asks ``record`` for a ``Node`` to hang on the result.
One backward pass, ``_Pass``, visits the nodes in reverse topological order and runs each node's
backward (``_Pass.visit``). ``backward_steps`` is a generator that yields what each visit did (the
stepper shows it); ``run_backward`` (``Tensor.backward``) runs the same visits at once, with
NumPy's float-error state set once for the whole pass instead of once per node. Both go through
``visit``, so they cannot drift apart.

The graph is kept after backward: a second ``backward`` through it works and accumulates into
the leaves again, and each node keeps the gradient of its output from the latest pass (``grad``)
so that a drawing can show it.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from .backend import array_module
from .errors import ShapeError
from .float_errors import quiet_float_errors, restore_float_errors, silence_float_errors
from .guards import anomaly, inplace
from .kernels.reductions import colsum
from .ops.base import Context, Op
from .scopes import current_scope
from .thread_switch import ThreadSwitch

if TYPE_CHECKING:
    from .tensor import Tensor


__all__ = ["BackwardEvent", "Node", "backward_order", "backward_steps", "is_grad_enabled", "no_grad",
           "record", "run_backward", "toposort", "unbroadcast"]


# Grad mode, one per thread as in PyTorch: a thread starts with it on.
_grad_mode = ThreadSwitch(default=True)

# Held while a leaf's ``.grad`` is read, added to and written back, so that backward passes run
# by several threads on shared parameters add every contribution (without it, two threads can
# read the same old total and one thread's sum overwrites the other's).
_leaf_grad_lock = threading.Lock()
_made = itertools.count()       # Node.made: next() on a count is atomic, so threads never share one


class Node:
    """How a tensor was made: the op, its context (residuals), its parents in argument order, and
    `made`, a count that orders nodes as they were made (the forward pass's order, which the
    graph's topological order does not always keep: ``viz.forward`` shows it)."""

    __slots__ = ("op", "ctx", "parents", "scope", "site", "grad", "watched", "made")

    def __init__(self, op: type[Op], ctx: Context, parents: tuple, scope: Any):
        self.op, self.ctx, self.parents = op, ctx, parents
        self.made = next(_made)
        self.scope = scope      # the innermost module running when it was made (has `.path`)
        self.site = None        # (file, line) of user code, recorded only under detect_anomaly
        self.grad = None        # gradient of this node's output from the latest backward
        # saved arrays a user can write into, with their fingerprints or versions (see inplace.py)
        self.watched: tuple[tuple[int | None, Any, Any], ...] = ()


class BackwardEvent(NamedTuple):
    """One node's share of a backward pass: the output tensor, its gradient, what it sent on,
    and the op's insides (a dict of named matrices) when the pass was traced, else None."""

    tensor: Tensor
    grad: Any
    sent: tuple[Any, ...]
    trace: dict[str, Any] | None


@contextmanager
def no_grad() -> Iterator[None]:
    """Record no graph inside the block (inference, optimizer updates), in this thread only."""
    with _grad_mode.set_to(False):
        yield


def is_grad_enabled() -> bool:
    """Whether this thread records graphs (False inside ``no_grad``)."""
    return _grad_mode.value()


def record(op: type[Op], ctx: Context, inputs: tuple, out: Any) -> Node | None:
    """The node for an op's result, or None under ``no_grad``; ``apply`` asks only when an input
    requires grad.

    A large output's own memory is sealed (read-only), and the saved arrays that a user can still
    write into (a leaf's data, any small array) are fingerprinted now, so that backward can refuse
    to run on values edited in place since (``inplace.py``).
    """
    if _grad_mode.open_blocks and not _grad_mode.value():
        return None
    node = Node(op, ctx, inputs, current_scope())
    inplace.seal(out, inputs)
    saved = ctx.saved
    if saved:
        node.watched = inplace.watch(saved, inputs, out)
    return node


def toposort(root: Tensor) -> list[Tensor]:
    """Tensors that `root` depends on (and that require grad), producers before consumers.

    Depth-first with an explicit stack of (tensor, expanded) pairs, parents in argument order,
    so there is no recursion limit and the order is the same on every run.
    """
    order: list[Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    push, pop = stack.append, stack.pop
    while stack:
        t, expanded = pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in visited:
            continue
        visited.add(id(t))
        push((t, True))
        node = t.node
        if node is not None:
            for parent in reversed(node.parents):
                if parent is not None and parent.requires_grad and id(parent) not in visited:
                    push((parent, False))
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
    backward_pass = _Pass(root, grad)
    for t in backward_pass.order:
        with quiet_float_errors():      # inf/NaN without RuntimeWarnings, also while summing
            sent = backward_pass.visit(t, trace)
        if sent is not None:
            node = cast(Node, t.node)     # a tensor that sent gradients was made by an op
            yield BackwardEvent(t, node.grad, sent, backward_pass.traces.pop(id(t), None))


def run_backward(root: Tensor, grad: Any) -> None:
    """The same pass as ``backward_steps`` drained at once (``Tensor.backward``): the nodes are
    visited by the same ``_Pass.visit``, with the float-error state set once for the whole pass."""
    backward_pass = _Pass(root, grad)
    token = silence_float_errors()      # what quiet_float_errors() does, a sixth of its cost
    try:
        for t in backward_pass.order:
            backward_pass.visit(t, False)
    finally:
        restore_float_errors(token)


class _Pass:
    """One backward pass: the tensors in the order it visits them and the gradients in flight."""

    def __init__(self, root: Tensor, grad: Any):
        self.order = list(reversed(toposort(root)))
        self.grads: dict[int, Any] = {id(root): grad}
        self.shared = {id(grad)}    # arrays someone else holds: the seed, each node's kept gradient
        self.verified: set[int] = set()     # saved arrays found unchanged in this pass
        self.traces: dict[int, dict[str, Any] | None] = {}  # a traced node's insides, by its tensor's id

    def visit(self, t: Tensor, trace: bool) -> tuple[Any, ...] | None:
        """Run `t`'s node backward and pass its results on to the parents, returning what it sent;
        for a leaf, accumulate into ``.grad`` and return None (also when no gradient reached `t`).

        The op's backward returns one gradient per input; each is summed back to its input's
        shape and dtype (a call only when they differ) and added to the input's running total.
        The op contract has no exception: a tuple with one entry per input (a 1-tuple for one
        input), so a bare array or a wrong count is the op's bug, named here.
        """
        grads = self.grads
        g = grads.pop(id(t), None)
        if g is None:
            return None
        node = t.node
        if node is None:
            _leaf_grad_lock.acquire()       # not `with`: half the cost, once per leaf per pass
            try:
                t.grad = _owned(g, self.shared) if t.grad is None else t.grad + g
            finally:
                _leaf_grad_lock.release()
            return None
        if node.watched:
            inplace.check_unchanged(node, t, self.verified)
        node.grad = g
        self.shared.add(id(g))
        op, ctx = node.op, node.ctx
        if trace:
            # What a learner sees is the textbook backward (a kernel saved the same residuals),
            # with its insides written into a context of this pass's own, so that two threads
            # stepping one graph never share one.
            op, ctx = op.textbook or op, copy.copy(ctx)
            ctx.trace = {} if op.insides else None
            self.traces[id(t)] = ctx.trace
        # An op of your own may overwrite `grad`: it gets a copy (node.grad stays what arrived);
        # a registered op never does, and gets the array itself.
        sent = op.backward(ctx, g if op.grad_read_only else g.copy())
        parents = node.parents
        if type(sent) is not tuple or len(sent) != len(parents):
            _refuse_result(node, sent)
        checked = anomaly.mode.open_blocks
        passed = []
        for index, parent in enumerate(parents):
            s = sent[index]
            if s is None or parent is None or not parent.requires_grad:
                s = None
            else:
                data = parent.data
                if checked or s.shape != data.shape or s.dtype != data.dtype:
                    s = _reduce_to_parent(node, index, parent, s)
                key = id(parent)
                before = grads.get(key)
                grads[key] = s if before is None else before + s
            passed.append(s)
        return tuple(passed)


def _refuse_result(node: Node, sent: Any) -> None:
    got = f"a tuple of {len(sent)}" if isinstance(sent, tuple) else type(sent).__name__
    raise TypeError(f"{node.op.name}.backward returned {got}, expected a tuple of "
                    f"{len(node.parents)} gradients (one per input, None where none is needed)")


def _reduce_to_parent(node: Node, index: int, parent: Tensor, grad: Any) -> Any:
    """`grad` summed to `parent`'s shape and cast to its dtype (checked under detect_anomaly)."""
    data = parent.data
    if grad.shape != data.shape:
        grad = unbroadcast(grad, data.shape, node.op.name)
    if grad.dtype != data.dtype:
        grad = grad.astype(data.dtype)
    if anomaly.mode.open_blocks:        # some thread has anomaly mode on (check_gradient: this one?)
        anomaly.check_gradient(node, index, parent, grad)
    return grad


def _owned(grad: Any, shared: set[int]) -> Any:
    """`grad` as an array a leaf may own and change in place: copied when it is a view (a
    broadcast one is read-only), or is held elsewhere (the seed, a node's gradient, another leaf).
    Not copying the rest saves a copy of each large gradient (``python -m benchmarks.check_costs
    mlp784 --tricks``)."""
    if grad.base is not None or id(grad) in shared or not getattr(grad.flags, "writeable", True):
        return grad.copy()
    shared.add(id(grad))
    return grad


_HALF = np.dtype(np.float16)    # NumPy's dtypes are singletons: `is` is a pointer test, == builds a dtype


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
    if grad.dtype is _HALF:     # accumulated in float32, as PyTorch (in float16, 2048 + 1 is 2048)
        wide = grad.astype(np.float32).sum(axis=tuple(range(extra)) + stretched, keepdims=True)
        return wide.reshape(shape).astype(np.float16)
    if not stretched and grad.size and grad.flags.c_contiguous:     # only leading axes added (a bias)
        return colsum(array_module(grad), grad.reshape(-1, math.prod(shape))).reshape(shape)
    grad = grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True)
    return grad.reshape(shape)
