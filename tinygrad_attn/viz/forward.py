"""The forward pass one op at a time: ``forward_steps`` and the ``ForwardStep`` a learner reads
before the backward pass.

The ops are listed in the order they ran (``Node.made``), which is not always the backward pass's
order reversed: unfused attention makes Q, K and V before it transposes K, while the graph's
topological order reaches V only after Q Kᵀ. Each step shows what the op computes (its math,
from the op's docstring), its inputs, and its output's value: the very array the graph holds, so
that the backward steps that follow read the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import engine
from ..labels import scope_name
from ..tensor import Tensor
from .layout import axis_names
from .matrices import format_array
from .stepper import label, op_params, param_text

__all__ = ["ForwardStep", "forward_steps", "op_math"]


@dataclass(frozen=True)
class ForwardStep:
    """One op of the forward pass.

    Attributes:
        index: position in the forward pass (0 is the first op that ran).
        backward_index: the step number of the same op in the backward pass (``Step.index``).
        op: the op's name. computes: its math in one line (``op_math``).
        name: how the output is called, as the backward step calls it.
        module: the dotted path of the module the op ran in (None outside modules).
        input_names, input_shapes: per input, its name and shape (None for an absent optional one).
        params: the op's keyword parameters, by name.
        tensor: the output tensor (its ``.data`` is the value shown).
        tokens, vocab: labels of the sequence positions and of the columns of logits.
        head, whole: the one head printed and the matrices printed whole, as ``Step``'s.
    """

    index: int
    backward_index: int
    op: str
    computes: str
    name: str
    module: str | None
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    params: tuple[tuple[str, Any], ...]
    tensor: Tensor
    tokens: tuple[str, ...] | None = None
    vocab: tuple[str, ...] | None = None
    head: int | None = None
    whole: float | None = None

    @property
    def value(self) -> Any:
        """The output's value."""
        return self.tensor.data

    def __str__(self) -> str:
        where = f"  (in {self.module})" if self.module else ""
        lines = [f"forward {self.index}: {self.op} → {self.name} {self.tensor.shape}{where}"
                 f"   [backward step {self.backward_index}]",
                 f"  computes  {self.computes}"]
        if self.params:
            lines.append("  with " + ", ".join(param_text(name, value, self.input_shapes)
                                               for name, value in self.params))
        inputs = [f"{name} {shape}" for name, shape in zip(self.input_names, self.input_shapes)
                  if shape is not None]
        lines.append(f"  inputs: {', '.join(inputs)}")
        lines.append(f"  value of {self.name}:")
        lines += format_array(self.tensor.data, self.name, self.tokens, vocab=self.vocab,
                              axes=axis_names(self.tensor), head=self.head, whole=self.whole)
        return "\n".join(lines)


def op_math(op: Any) -> str:
    """The math of an op in one line: the first paragraph of its textbook form's docstring
    ('y = max(x, 0).'), also when a kernel ran it."""
    op = op.textbook or op
    paragraph = (op.__doc__ or op.name).strip().split("\n\n")[0]
    return " ".join(paragraph.split())


def forward_steps(loss: Tensor, tokens: tuple[str, ...] | None = None,
                  vocab: tuple[str, ...] | None = None, head: int | None = None,
                  whole: float | None = None) -> Iterator[ForwardStep]:
    """The ops that made `loss`, in the order they ran, each with its output's value (`head` and
    `whole` as in ``backprop_steps``).

    Nothing is computed again and no gradient is touched: it reads the graph `loss` holds. Only
    ops whose output requires grad are in the graph (the ones the backward pass visits).

    Example:
        >>> import tinygrad_attn as ta
        >>> x = ta.Tensor([1.0, -2.0], requires_grad=True)
        >>> [(s.op, s.value.tolist()) for s in forward_steps((x * x).sum())]
        [('mul', [1.0, 4.0]), ('sum', 5.0)]
    """
    backward = engine.backward_order(loss)
    order = {id(t): i for i, t in enumerate(backward)}
    made = [(t.node, t) for t in backward if t.node is not None]      # all of them: ops made them
    for index, (node, t) in enumerate(sorted(made, key=lambda pair: pair[0].made)):
        yield ForwardStep(
            index=index, backward_index=order[id(t)], op=node.op.name, computes=op_math(node.op),
            name=label(t, order), module=scope_name(node.scope),
            input_names=tuple("None" if p is None else label(p, order) for p in node.parents),
            input_shapes=tuple(None if p is None else p.shape for p in node.parents),
            params=op_params(node),
            tensor=t, tokens=tokens, vocab=vocab, head=head, whole=whole)
