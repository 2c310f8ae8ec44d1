"""Backprop one node at a time: ``backprop_steps`` and the ``Step`` record a learner reads.

``backprop_steps`` wraps ``engine.backward_steps``, which visits the nodes with the very function
``Tensor.backward`` uses (``_Pass.visit``), so the steps are the real backward pass: once all
steps are drained, the leaves' ``.grad`` hold exactly what ``backward()`` would have written. It
runs the pass traced, so an op with insides (attention) also hands over its intermediate matrices
(S, P, dP, dS, dQ, dK, dV), and it adds notes where a gradient is exactly zero for a known reason
or is a sum of parts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import engine
from ..labels import scope_name, tensor_label
from ..tensor import Tensor, seed_gradient
from .layout import axis_names
from .matrices import format_array, format_number
from .notes import Notes, is_parameter

__all__ = ["Inside", "Step", "backprop_steps", "label", "op_params", "param_text"]


@dataclass(frozen=True)
class Inside:
    """One matrix an op computed inside its backward (attention's S, P, dP, dS, dQ, dK, dV).

    Attributes:
        symbol: its name in the math (``dS``). equation: how it was computed.
        array: the values, per batch and head: (..., rows, columns).
    """

    symbol: str
    equation: str
    array: Any

    @property
    def kind(self) -> str:
        """'gradient' for the d-matrices (dL/d·), 'value' for the others."""
        return "gradient" if self.symbol.startswith("d") else "value"


@dataclass(frozen=True)
class Step:
    """One node of the backward pass: what arrived, the formula used, what was sent on.

    Attributes:
        index: position in the backward pass (0 is the op that made the loss).
        op: the op's name. formula: per input, its backward formula (``Op.formula``), or None for
            an input that takes no gradient (a mask, targets).
        name: how the output is called: its ``Tensor.name`` (S, P, logits), else
            'output of OP (step N)'.
        module: the dotted path of the module the op ran in, from the root the user called (the
            root's class name for the root itself; None outside modules).
        output_shape, input_shapes: shapes (None for an absent optional input).
        input_names: per input, its name as ``name`` above, a parameter's dotted name, ``leaf``
            or ``const`` for an unnamed leaf, or 'None' for an absent optional input.
        parameters: the names of the inputs that are named leaves taking a gradient: a module's
            parameters, or tensors the user named.
        saved: names of the residuals forward saved (``ctx.saved`` keys; absent ones left out),
            printed as the op labels them (``Op.residuals``). saved_values: their arrays, in order.
        params: the op's keyword parameters (attention's scale, a sum's axis), by name.
        grad: the gradient of the loss with respect to the output, arriving at this step.
        sent: the gradient sent to each input (None where none is needed), already summed back
            to the input's shape.
        insides: the matrices the op's backward computed on the way, in order (attention only).
        notes: why a gradient is exactly zero, or that the arriving gradient is a sum.
        parts: (source step, gradient) of each part when several ops used the output.
        tokens: labels of the sequence positions, for rows and columns (None: numbered).
        tensor: the output tensor itself.
        vocab: the words of the vocabulary, for the columns of logits (None: numbered).
        head: the one head whose matrices are printed (None: every head).
        whole: print each matrix of at most this many rows and columns whole (math.inf: every
            matrix; None: arrays of more than 64 numbers print their corners), as
            ``matrices.format_array``.
    """

    index: int
    op: str
    name: str
    formula: tuple[str | None, ...]
    module: str | None
    output_shape: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    input_names: tuple[str, ...]
    parameters: tuple[str, ...]
    saved: tuple[str, ...]
    saved_values: tuple[Any, ...]
    params: tuple[tuple[str, Any], ...]
    grad: Any
    sent: tuple[Any, ...]
    insides: tuple[Inside, ...]
    notes: tuple[str, ...]
    parts: tuple[tuple[str, Any], ...]
    tokens: tuple[str, ...] | None
    tensor: Tensor
    vocab: tuple[str, ...] | None = None
    head: int | None = None
    whole: float | None = None

    @property
    def node(self) -> engine.Node:
        """The node of the op this step went back through (an op made the step's tensor)."""
        assert self.tensor.node is not None
        return self.tensor.node

    def __str__(self) -> str:
        where = f"  (in {self.module})" if self.module else ""
        lines = [f"step {self.index}: {self.op} → {self.name} {self.output_shape}{where}"]
        if self.params:
            lines.append("  with " + ", ".join(param_text(name, value, self.input_shapes)
                                               for name, value in self.params))
        shown = {id(inside.array): inside.symbol for inside in self.insides}
        out_axes, in_axes = self.layouts()
        if self.saved:
            labels = self.node.op.residuals
            lines.append(f"  saved by forward: {', '.join(labels[name] for name in self.saved)}")
            for name, value in zip(self.saved, self.saved_values):
                if id(value) in shown:
                    continue                    # printed below, where backward uses it
                lines.append(f"  saved: {self.saved_label(name, value)}   [value{_mask_meaning(value)}]")
                lines += self.array_lines(value, name, self.saved_axes(value))
        lines.append(f"  gradient arriving, dL/d({self.name}):")
        lines += self.array_lines(self.grad, self.name, out_axes)
        for source, part in self.parts:
            lines.append(f"    part from {source}:")
            lines += self.array_lines(part, self.name, out_axes, indent="        ")
        for inside in self.insides:
            what = f"value of {inside.symbol}" if inside.kind == "value" else \
                f"gradient dL/d{inside.symbol[1:]}"
            lines.append(f"  inside: {inside.equation}   [{what}]")
            lines += self.array_lines(inside.array, inside.symbol)
        inputs = zip(self.input_names, self.input_shapes, self.sent, self.formula, in_axes)
        for i, (name, shape, g, formula, axes) in enumerate(inputs):
            if shape is None:
                continue
            if formula is None:
                lines.append(f"  → input {i} {name} {shape}: no gradient (not differentiable)")
            elif g is None:
                lines.append(f"  → input {i} {name} {shape}: no gradient (not asked for: nothing "
                             "it was computed from requires grad)")
            elif id(g) in shown:
                lines.append(f"  → input {i} {name} {shape}: gradient sent, dL/d({name}) = "
                             f"{shown[id(g)]} above")
                lines.append(f"      formula  {formula}")
            else:
                lines.append(f"  → input {i} {name} {shape}: gradient sent, dL/d({name}):")
                lines.append(f"      formula  {formula}")
                lines += self.array_lines(g, name, axes)
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def array_lines(self, array: Any, name: str, axes: tuple[str, ...] | None = None,
                    indent: str = "      ") -> list[str]:
        """`array` as ``format_array`` prints it with this step's tokens, vocabulary, head and
        `whole`."""
        return format_array(array, name, self.tokens, indent, self.vocab, axes, self.head, self.whole)

    def layouts(self) -> tuple[tuple[str, ...] | None, tuple[tuple[str, ...] | None, ...]]:
        """The axis names (``layout.axis_names``) of the output and of each input: what the
        leading axes of a 4-D gradient are, (batch, head) or (batch, token)."""
        return axis_names(self.tensor), tuple(axis_names(p) for p in self.node.parents)

    def saved_label(self, name: str, value: Any) -> str:
        """How the op labels a saved array, and which input it is when that input has a name of
        its own: 'x (the input) = hidden', 'W (the weight matrix) = fc2.weight'."""
        label = self.node.op.residuals[name]
        for parent, input_name in zip(self.node.parents, self.input_names):
            if parent is not None and parent.data is value and input_name not in ("leaf", "const") \
                    and not label.startswith(input_name):
                return f"{label} = {input_name}"
        return label

    def saved_axes(self, value: Any) -> tuple[str, ...] | None:
        """The axis names of a saved array: its input's or the output's when it is their data."""
        for t in (*self.node.parents, self.tensor):
            if t is not None and t.data is value:
                return axis_names(t)
        return None


def param_text(name: str, value: Any, input_shapes: tuple) -> str:
    """'scale = 0.7071 (1/√d_k, d_k = 2)', 'axis = -1', 'is_causal = True'."""
    if isinstance(value, float):
        d_k = input_shapes[0][-1] if input_shapes and input_shapes[0] else None
        why = f" (1/√d_k, d_k = {d_k})" if name == "scale" and d_k and np.isclose(value, d_k ** -0.5) else ""
        shown = f"{value:g}" if value.is_integer() and abs(value) < 1e15 else format_number(value)
        return f"{name} = {shown}{why}"
    return f"{name} = {value}"


def _mask_meaning(value: Any) -> str:
    """What 1 and 0 mean when a saved array is a boolean mask."""
    return "; 1 = takes part, 0 = masked" if getattr(value, "dtype", None) == np.bool_ else ""


def backprop_steps(loss: Tensor, grad: Any = None, tokens: tuple[str, ...] | None = None,
                   vocab: tuple[str, ...] | None = None, head: int | None = None,
                   whole: float | None = None) -> Iterator[Step]:
    """Run the backward pass from `loss` one op node at a time, yielding a ``Step`` for each.

    `grad` is as in ``Tensor.backward`` (omitted for a single-element loss); `tokens` label the
    sequence positions in the printed matrices, `vocab` the columns of logits; `head` prints only
    that head of (batch, head, …) arrays; `whole` prints each matrix of at most that many rows
    and columns whole (math.inf: all of them; None: an array of more than 64 numbers prints its
    corners). Leaf gradients are accumulated as the pass goes, exactly
    as ``backward()`` does.

    Example:
        >>> import tinygrad_attn as ta
        >>> x = ta.Tensor([1.0, 2.0], requires_grad=True)
        >>> [s.op for s in backprop_steps((x * x).sum())]
        ['sum', 'mul']
        >>> x.grad
        array([2., 4.], dtype=float32)
    """
    order = {id(t): i for i, t in enumerate(engine.backward_order(loss))}
    notes = Notes(order)
    seed = seed_gradient(loss, grad, "backprop_steps")
    for index, event in enumerate(engine.backward_steps(loss, seed, trace=True)):
        node = event.tensor.node
        assert node is not None                 # backward visits only tensors an op made
        insides = tuple(Inside(symbol, equation, event.trace[symbol])
                        for symbol, equation in node.op.insides if event.trace and symbol in event.trace)
        step_notes, parts = notes.explain(index, event, insides, tokens, head)
        yield Step(
            index=index, op=node.op.name, name=label(event.tensor, order),
            formula=node.op.formulas_at(node.ctx, len(node.parents)),
            module=scope_name(node.scope), output_shape=event.tensor.shape,
            input_shapes=tuple(None if p is None else p.shape for p in node.parents),
            input_names=tuple("None" if p is None else label(p, order) for p in node.parents),
            parameters=tuple(p.name for p in node.parents if is_parameter(p)),
            saved=tuple(k for k, v in node.ctx.saved.items() if v is not None),
            saved_values=tuple(v for v in node.ctx.saved.values() if v is not None),
            params=op_params(node),
            grad=event.grad, sent=event.sent, insides=insides,
            notes=step_notes, parts=parts, tokens=tokens, tensor=event.tensor, vocab=vocab, head=head,
            whole=whole)


def op_params(node: engine.Node) -> tuple[tuple[str, Any], ...]:
    """The op's keyword parameters that read as text (attention's scale, a sum's axis), by name."""
    return tuple((name, getattr(node.ctx, name)) for name in node.op.param_names()
                 if isinstance(getattr(node.ctx, name, None), (bool, int, float, str, tuple)))


def label(t: Tensor, order: dict[int, int]) -> str:
    """A tensor's name for a learner: its own name, else the op that made it and that op's step."""
    if t.name or t.op is None or id(t) not in order:
        return tensor_label(t)
    return f"output of {t.op} (step {order[id(t)]})"
