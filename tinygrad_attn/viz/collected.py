"""The computation graph as data: ``collect`` walks the graph that made a tensor into a
``CollectedGraph`` (nodes with their labels and module cluster, edges, the backward steps each node
draws), which ``dot.emit`` writes as DOT and the graph command and the explorer read.

Tensors are records (name | shape dtype | values, or norms when large, of value and gradient),
ops carry the backward step number that ``tinygrad-attn step`` shows and their backward formula;
parameters are blue, constants grey and dashed. Nodes made inside a module sit in a cluster per
module, nested by dotted path; ``collapse=`` folds chosen modules into one node each and
``expand=`` folds all but one. Node ids follow the topological order (t0, t1, …), so the drawing
of a graph is the same on every run. Module paths are split in one place, ``ancestors``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import engine
from ..backend import to_numpy
from ..labels import tensor_label
from ..tensor import Tensor
from .layout import axis_names
from .matrices import axis_labels, fits_whole, head_of, lead_label

__all__ = ["CollectedGraph", "DrawnNode", "ancestors", "collect"]

SMALL = 12          # tensors with at most this many entries show their values, larger ones norms
FORMULA_WIDTH = 36  # characters per line of an op's formula


def _norm(array: Any) -> str:
    return "—" if array is None else f"{float(np.linalg.norm(to_numpy(array).astype(np.float64))):.3g}"


def _values(what: str, array: Any, rows: tuple[str, ...] | None) -> str:
    """A record field with the entries of a small tensor, one line per row (``\\l`` ends a
    left-aligned line), rows labelled by token where they are token positions."""
    if array is None:
        return f"{what} —"
    data = to_numpy(array)
    if data.ndim == 0:
        return f"{what} {float(data):.3g}"
    matrix = data.reshape(1, -1) if data.ndim == 1 else data.reshape(-1, data.shape[-1])
    labels = rows if rows is not None and data.ndim == 2 and len(rows) == len(matrix) else None
    lines = [(f"{labels[i]}: " if labels else "") + "  ".join(f"{float(v):.3g}" for v in row)
             for i, row in enumerate(matrix)]
    return _escape(what) + "\\l" + "".join(_escape(line) + "\\l" for line in lines)


def _numbers(x: Any, grad: Any, show_grads: bool, tokens: tuple[str, ...] | None,
             head: int | None = None, whole: float | None = None) -> list[str]:
    """The record fields with the numbers of tensor `x`: its values (and gradient) when small,
    or as grids when each matrix fits `whole` (``matrices.fits_whole``), else their norms; every
    number is labelled value or grad. With `head`, a (batch, head, …) tensor shows that head's
    matrices (or norms) only."""
    axes = axis_names(x)
    lead = [i for i in np.ndindex(x.shape[:-2])] if len(x.shape) > 2 else [()]
    heads = [i for i in lead if head is not None and head_of(i, x.shape, axes) is not None]
    picked = [i for i in lead if head_of(i, x.shape, axes) in (None, head)] if heads else lead
    if fits_whole(x.shape, whole):
        arrays = [("value", x.data)] + ([("grad", grad)] if show_grads else [])
        return [field for what, array in arrays
                for field in _grids(what, array, tensor_label(x), x.shape, picked, tokens, axes)]
    if heads:
        def norm(array: Any) -> str:
            return "—" if array is None else _norm(np.stack([to_numpy(array)[i] for i in picked]))
        return [f"head {head}: ‖value‖={norm(x.data)}" + (f"  ‖grad‖={norm(grad)}" if show_grads else "")]
    if int(np.prod(x.shape)) > SMALL or len(x.shape) > 2:
        return [f"‖value‖={_norm(x.data)}" + (f"  ‖grad‖={_norm(grad)}" if show_grads else "")]
    fields = [_values("value", x.data, tokens)]
    return fields + [_values("grad", grad, tokens)] if show_grads else fields


def _grids(what: str, array: Any, name: str, shape: tuple[int, ...], lead: list[tuple[int, ...]],
           tokens: tuple[str, ...] | None, axes: tuple[str, ...] | None) -> list[str]:
    """Record fields drawing each matrix of `array` (those at `lead`) whole as a grid: a column of
    row labels, then one column per column of the matrix headed by its label (tokens where they
    index the sequence, as the stepper labels them); a caption 'value [batch 0, head 1]' above."""
    if array is None:
        return [f"{what} —"]
    values = to_numpy(array).astype(np.float64) + 0.0          # + 0.0: −0 prints as 0
    if values.ndim == 0:
        return [_escape(f"{what} {float(values):.3g}")]
    rows, cols = axis_labels(name, values.shape, tokens, None, axes)
    if values.ndim == 1:
        values, rows = values[None], [""]
    fields = []
    for index in lead:
        matrix = values[index]
        caption = f"{what} [{lead_label(index, shape, axes, tokens)}]" if index else what
        columns = [["", *rows]] + [[col, *(f"{float(v):.3g}" for v in matrix[:, j])]
                                   for j, col in enumerate(cols)]
        grid = "|".join("{" + "|".join(_escape(cell) for cell in column) + "}" for column in columns)
        fields += [_escape(caption), "{" + grid + "}"]
    return fields


def _escape(text: str) -> str:
    for ch in "\\{}|<>\"":
        text = text.replace(ch, "\\" + ch)
    return text


def ancestors(path: str) -> list[str]:
    """`path` and every dotted path enclosing it, innermost first, down to the root "":
    ``ancestors("blocks.0.attn") == ["blocks.0.attn", "blocks.0", "blocks", ""]``. The one place
    where module paths are split: parents, clusters, folds and owners are all read from it."""
    parts = path.split(".") if path else []
    return [".".join(parts[:n]) for n in range(len(parts), -1, -1)]


def _tensor_path(t: Tensor) -> str | None:
    """The module a tensor belongs to: its creator's scope, or the owner of a named parameter."""
    if t.node is not None:
        return getattr(t.node.scope, "path", None)
    return ancestors(t.name)[1] if t.name else None


def _collapsed_paths(modules: dict[str, Any], collapse: Any) -> list[str]:
    if collapse is None:
        return []
    wanted = collapse if isinstance(collapse, (list, tuple, set)) else [collapse]
    classes = tuple(c for c in wanted if isinstance(c, type))
    names = {c for c in wanted if isinstance(c, str)}
    unknown = sorted(names - set(modules))
    if unknown or len(classes) + len(names) != len(wanted):
        raise ValueError(f"draw_graph: collapse= takes module classes and dotted paths of modules "
                         f"in this graph; got {unknown or list(wanted)}, the graph has modules "
                         f"{sorted(modules)}")
    return [p for p, m in modules.items() if p in names or (classes and isinstance(m, classes))]


def _expanded_paths(modules: dict[str, Any], expand: str | None) -> list[str]:
    """The modules to fold so that only `expand` (with its insides) is drawn in full: all but
    it, its enclosing modules and the modules inside it."""
    if expand is None:
        return []
    if expand not in modules:
        raise ValueError(f"draw_graph: expand= takes the dotted path of one module in this graph; "
                         f"got {expand!r}, the graph has modules {sorted(modules)}")
    return [p for p in modules if p not in ancestors(expand) and expand not in ancestors(p)]


@dataclass(frozen=True)
class DrawnNode:
    """One node of the drawing.

    Attributes:
        id: its DOT id (t3 a tensor, op3 the op that made t3, m_<path> a folded module).
        kind: "tensor", "op" or "fold".
        cluster: dotted path of the module cluster it is drawn in ("" for the top level).
        attrs: its graphviz attributes (label, shape, style, fillcolor).
        op: an op node's op name (None for other nodes).
        folded: a fold node's module path (None for other nodes).
        steps: the backward steps it draws: an op's own step, every step inside a folded module.
    """

    id: str
    kind: str
    cluster: str
    attrs: dict[str, str]
    op: str | None = None
    folded: str | None = None
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class CollectedGraph:
    """What ``draw_graph`` draws, as data: the picture is ``emit``'s DOT text of it, and the graph
    command and the explorer read their counts and node ids here, never from the DOT text.

    Attributes:
        nodes: every node, in the order drawn. edges: (from id, to id) pairs, forward direction.
        clusters: module path -> cluster label, for each module drawn as a cluster.
        modules: every module the graph ran through: dotted path ("" for the root) -> class name.
    """

    nodes: tuple[DrawnNode, ...]
    edges: tuple[tuple[str, str], ...]
    clusters: dict[str, str]
    modules: dict[str, str]

    @property
    def ops(self) -> list[str]:
        """The op names drawn as op nodes (ops inside folded modules are not)."""
        return [node.op for node in self.nodes if node.kind == "op" and node.op is not None]

    @property
    def step_nodes(self) -> dict[int, str]:
        """Backward step number -> id of the node that draws it (its op, or the fold around it)."""
        return {step: node.id for node in self.nodes for step in node.steps}

    def enclosing_cluster(self, path: str) -> str:
        """The innermost drawn cluster strictly enclosing module `path` ("" for the top level)."""
        return _innermost(ancestors(path)[1:], self.clusters)


def _innermost(paths: list[str], among: Any) -> str:
    """The first of `paths` (innermost first, as ``ancestors`` lists them) that is in `among`, else
    "" (the top level)."""
    return next((p for p in paths if p in among), "")


def _tensors(t: Tensor) -> list[Tensor]:
    """The tensors of `t`'s graph in topological order, each constant just before its first user."""
    tensors: dict[int, Tensor] = {}
    for x in (engine.toposort(t) if t.requires_grad else [t]):
        if x.node is not None:
            for parent in x.node.parents:
                if parent is not None and not parent.requires_grad:
                    tensors.setdefault(id(parent), parent)
        tensors.setdefault(id(x), x)
    return list(tensors.values())


def _tensor_attrs(x: Tensor, show_grads: bool, tokens: tuple[str, ...] | None,
                  masked_later: bool = False, head: int | None = None,
                  whole: float | None = None) -> dict[str, str]:
    grad = x.grad if x.node is None else x.node.grad
    fields = [_escape(tensor_label(x)), _escape(f"{x.shape} {x.dtype}")]
    if masked_later:        # the unfused S: the fused op's S shows −inf where this one does not
        fields.append(_escape("scores before the mask: softmax applies it (no −inf here)"))
    fields += _numbers(x, grad, show_grads, tokens, head, whole)
    attrs = {"label": "{" + "|".join(fields) + "}", "shape": "record"}
    if x.node is None and x.requires_grad:
        attrs.update(style="filled", fillcolor="lightblue" if x.name else "white")
    elif not x.requires_grad:
        attrs.update(style="filled,dashed", fillcolor="gray92")
    return attrs


def collect(t: Tensor, show_grads: bool = True, collapse: Any = None, expand: str | None = None,
            tokens: tuple[str, ...] | None = None, head: int | None = None,
            whole: float | None = None) -> CollectedGraph:
    """The nodes, edges and module clusters of the graph that made `t`, with modules folded as
    `collapse` and `expand` ask (arguments as in ``draw_graph``); `head` and `whole` pick the
    numbers a tensor's record shows (``_numbers``)."""
    tensors = _tensors(t)
    modules = {m.path: m for x in tensors if x.node is not None
               for m in [x.node.scope] if m is not None and hasattr(m, "path")}
    folded = set(_collapsed_paths(modules, collapse) + _expanded_paths(modules, expand))
    steps = {id(x): i for i, x in enumerate(engine.backward_order(t))} if t.requires_grad else {}

    def cluster_of(path: str | None) -> str:
        """The innermost module around `path` ("blocks" is a list, not a module)."""
        return _innermost(ancestors(path), modules) if path else ""

    def fold_of(path: str | None) -> str | None:
        """The outermost folded module containing `path`, if any."""
        return next((p for p in reversed(ancestors(path)) if p in folded), None) if path is not None else None

    nodes: dict[str, DrawnNode] = {}
    ids: dict[int, str] = {}
    masked_later = {id(x.node.parents[0]) for x in tensors if x.node is not None
                    and x.node.op.name == "softmax" and x.node.parents[1] is not None}
    for index, x in enumerate(tensors):
        path = _tensor_path(x)
        target = fold_of(path)
        if target is None:
            ids[id(x)] = f"t{index}"
            nodes[ids[id(x)]] = DrawnNode(ids[id(x)], "tensor", cluster_of(path),
                                          _tensor_attrs(x, show_grads, tokens, id(x) in masked_later,
                                                        head, whole))
            continue
        ids[id(x)] = fold = f"m_{target}"
        inside = (steps[id(x)],) if id(x) in steps else ()
        if fold in nodes:
            nodes[fold] = replace(nodes[fold], steps=nodes[fold].steps + inside)
        else:
            nodes[fold] = DrawnNode(fold, "fold", _innermost(ancestors(target)[1:], modules), {
                "label": f"{type(modules[target]).__name__}\\n{target or '(root)'}", "shape": "box3d",
                "style": "filled", "fillcolor": "lavender"}, folded=target, steps=inside)

    edges: list[tuple[str, str]] = []
    for index, x in enumerate(tensors):
        if x.node is None:
            continue
        op_id = ids[id(x)]
        if op_id.startswith("t"):
            op_id = f"op{index}"
            used = zip(x.node.op.formulas_at(x.node.ctx, len(x.node.parents)), x.node.ctx.needs_grad)
            formula = "\\n".join(line for f, needed in used if f and needed      # the ones backward runs
                                  for line in textwrap.wrap(f, FORMULA_WIDTH))
            step = f"step {steps[id(x)]} · " if id(x) in steps else ""
            nodes[op_id] = DrawnNode(op_id, "op", cluster_of(_tensor_path(x)), {
                "label": f"{step}{x.op}\\n{formula}", "shape": "ellipse", "style": "filled",
                "fillcolor": "lightyellow"}, op=x.op, steps=(steps[id(x)],) if id(x) in steps else ())
            edges.append((op_id, ids[id(x)]))
        edges += [(ids[id(parent)], op_id) for parent in x.node.parents
                  if parent is not None and ids[id(parent)] != op_id]
    clusters = {node.cluster: f"{node.cluster} ({type(modules[node.cluster]).__name__})"
                for node in nodes.values() if node.cluster}
    return CollectedGraph(tuple(nodes.values()), tuple(dict.fromkeys(edges)), clusters,
                          {path: type(module).__name__ for path, module in modules.items()})
