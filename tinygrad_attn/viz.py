"""The computation graph as a picture: ``draw_graph`` builds a graphviz.Digraph, ``render``
writes it as SVG or PNG.

Tensors are records (name | shape dtype | value and grad norms), ops are ellipses with their
backward formula; parameters are blue, constants grey and dashed. Nodes made inside a module
sit in a cluster per module, nested by dotted path, and ``collapse=`` folds chosen modules into
one node each. Node ids follow the topological order (t0, t1, …), so the DOT source of a graph
is the same on every run. Building DOT source needs only the graphviz Python package; rendering
runs the system ``dot`` when it is on PATH, else the ``graphviz-pure`` program installed by pip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from . import engine
from .backend import to_numpy
from .tensor import Tensor


def _norm(array: Any) -> str:
    return "—" if array is None else f"{float(np.linalg.norm(to_numpy(array).astype(np.float64))):.3g}"


def _escape(text: str) -> str:
    for ch in "\\{}|<>\"":
        text = text.replace(ch, "\\" + ch)
    return text


def _tensor_path(t: Tensor) -> str | None:
    """The module a tensor belongs to: its creator's scope, or the owner of a named parameter."""
    if t._node is not None:
        return getattr(t._node.scope, "path", None)
    if t.name:
        return t.name.rsplit(".", 1)[0] if "." in t.name else ""
    return None


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


def draw_graph(t: Tensor, show_grads: bool = True, collapse: Any = None):
    """A graphviz.Digraph of the graph that made `t` (not rendered).

    Args:
        t: the output (often the loss) whose graph to draw.
        show_grads: add each tensor's gradient norm (from the latest backward; non-leaf
            gradients are kept on the graph's nodes).
        collapse: module classes and/or dotted module paths to draw as single nodes, e.g.
            ``nn.MultiHeadAttention`` or ``["blocks.0", "blocks.1"]``.

    Example:
        >>> import tinygrad_attn as ta
        >>> x = ta.Tensor([1.0, 2.0], requires_grad=True)
        >>> g = draw_graph((x * x).sum())
        >>> "mul" in g.source and "sum" in g.source
        True
    """
    import graphviz

    ids: dict[int, str] = {}
    tensors: list[Tensor] = []

    def register(x: Tensor) -> None:
        if id(x) not in ids:
            ids[id(x)] = f"t{len(ids)}"
            tensors.append(x)

    for x in (engine.toposort(t) if t.requires_grad else [t]):
        if x._node is not None:
            for parent in x._node.parents:
                if parent is not None and not parent.requires_grad:
                    register(parent)
        register(x)

    modules = {m.path: m for x in tensors if x._node is not None
               for m in [x._node.scope] if m is not None and hasattr(m, "path")}
    folded = _collapsed_paths(modules, collapse)

    def owner(path: str | None) -> str | None:
        """The outermost collapsed module containing `path`, if any."""
        if path is None:
            return None
        inside = [p for p in folded if path == p or (p == "" or path.startswith(p + "."))]
        return min(inside, key=len) if inside else None

    members: dict[str, list[tuple[str, dict[str, str]]]] = {}   # cluster path -> nodes

    def place(path: str | None, node_id: str, attrs: dict[str, str]) -> None:
        while path and path not in modules:       # "blocks" is a list, not a module
            path = path.rsplit(".", 1)[0] if "." in path else ""
        members.setdefault(path or "", []).append((node_id, attrs))

    edges: list[tuple[str, str]] = []
    drawn_folds: set[str] = set()
    for x in tensors:
        tid, path = ids[id(x)], _tensor_path(x)
        target = owner(path)
        if target is not None:
            tid = f"m_{target}"
            if tid not in drawn_folds:
                drawn_folds.add(tid)
                module = modules[target]
                place(target.rsplit(".", 1)[0] if "." in target else None, tid, {
                    "label": f"{type(module).__name__}\\n{target or '(root)'}", "shape": "box3d",
                    "style": "filled", "fillcolor": "lavender"})
            ids[id(x)] = tid
            continue
        grad = x.grad if x._node is None else x._node.grad
        fields = [_escape(engine.tensor_label(x)),
                  _escape(f"{x.shape} {x.dtype}"),
                  f"‖x‖={_norm(x.data)}" + (f"  ‖grad‖={_norm(grad)}" if show_grads else "")]
        attrs = {"label": "{" + "|".join(fields) + "}", "shape": "record"}
        if x._node is None and x.requires_grad:
            attrs.update(style="filled", fillcolor="lightblue" if x.name else "white")
        elif not x.requires_grad:
            attrs.update(style="filled,dashed", fillcolor="gray92")
        place(path, tid, attrs)

    for index, x in enumerate(tensors):
        if x._node is None:
            continue
        out_id = ids[id(x)]
        op_id = f"op{index}"
        if out_id.startswith("m_"):
            op_id = out_id
        else:
            formula = x._node.op.formula[0]
            formula = formula if len(formula) <= 40 else formula[:39] + "…"
            place(_tensor_path(x), op_id, {"label": f"{x.op}\\n{formula}", "shape": "ellipse",
                                           "style": "filled", "fillcolor": "lightyellow"})
            edges.append((op_id, out_id))
        for parent in x._node.parents:
            if parent is not None and ids[id(parent)] != op_id:
                edges.append((ids[id(parent)], op_id))

    graph = graphviz.Digraph("backprop", graph_attr={"rankdir": "TB", "fontname": "Helvetica"},
                             node_attr={"fontname": "Helvetica", "fontsize": "10"})
    clusters = {path: graphviz.Digraph(name=f"cluster_{path}", graph_attr={
        "label": f"{path} ({type(modules[path]).__name__})", "style": "rounded", "color": "gray60"})
        for path in members if path}
    for path, nodes in members.items():
        target = clusters.get(path, graph)
        for node_id, attrs in nodes:
            target.node(node_id, **attrs)
    for path in sorted(clusters, key=lambda p: -p.count(".")):
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        while parent and parent not in clusters:
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
        clusters.get(parent, graph).subgraph(clusters[path])
    for edge in dict.fromkeys(edges):
        graph.edge(*edge)
    return graph


def dot_program() -> str:
    """The Graphviz layout program: the system ``dot``, else pip's ``graphviz-pure``."""
    for candidate in (shutil.which("dot"), shutil.which("graphviz-pure"),
                      str(Path(sys.executable).parent / "graphviz-pure")):
        if candidate and Path(candidate).exists():
            return candidate
    raise FileNotFoundError("no Graphviz program found: install graphviz-pure (pip install "
                            "graphviz-pure) or Graphviz's dot")


def render(t: Tensor, path: str | Path, **kwargs: Any) -> Path:
    """Draw the graph of `t` and write it to `path` as SVG or PNG (by its extension).

    Keyword arguments go to ``draw_graph`` (``show_grads``, ``collapse``).
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("svg", "png"):
        raise ValueError(f"render: path must end in .svg or .png, got {path.name!r}")
    source = draw_graph(t, **kwargs).source
    path.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([dot_program(), f"-T{fmt}", "-o", str(path)], input=source.encode(),
                            capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"render: {dot_program()} failed: {result.stderr.decode(errors='replace')}")
    return path


def ops_in(graph_source: str) -> Iterable[str]:
    """The op names drawn in a DOT source (for tests and summaries)."""
    return [line.split('label="', 1)[1].split("\\n", 1)[0] for line in graph_source.splitlines()
            if "shape=ellipse" in line]
