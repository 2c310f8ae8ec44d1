"""The backprop explorer: one self-contained HTML page with the graph and every backward step.

``explore(loss)`` runs ``backprop_steps`` once, turns each ``Step`` into plain JSON (every array
kept whole, each number exactly as the step holds it), draws the graph as SVG, and inlines both
into a page together with the viewer (``explorer_assets/explorer.js`` and ``explorer.css``, plain
files read here). Modules that hold other modules (a transformer block, its attention, its MLP)
start folded into one box; the page carries one picture laid out by Graphviz per fold state (all
folded, and one per such module opened with the modules around it), so a click on a box only
switches pictures. The page is data plus a viewer: JavaScript only shows
the numbers, it never computes a gradient. Nothing on the page loads anything from the network.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import to_numpy
from ..tensor import Tensor
from .collected import CollectedGraph, ancestors, collect
from .dot import emit
from .forward import ForwardStep, forward_steps
from .image import layout, write_file
from .layout import axis_names
from .matrices import axis_labels, corner_indices, fits_whole, head_of, lead_label
from .stepper import Step, backprop_steps, param_text

__all__ = ["EDGE", "Explorer", "NON_FINITE", "WHOLE_MATRIX", "array_json", "explore", "foldable_modules",
           "forward_json", "graph_svg", "graph_views", "script_safe_json", "step_json"]


NON_FINITE = {math.inf: "inf", -math.inf: "-inf"}
WHOLE_MATRIX = 1024     # a matrix of more numbers is sent as its corners (see array_json)
EDGE = 4


def array_json(array: Any, name: str, tokens: tuple[str, ...] | None,
               vocab: tuple[str, ...] | None = None, axes: tuple[str, ...] | None = None,
               head: int | None = None, whole: float | None = None) -> dict[str, Any] | None:
    """An array as {shape, data (flat, row-major), rows, cols, captions (one per matrix: 'batch 0,
    head 1', as the stepper labels them, `axes` saying a 4-D array's layout)}; ±inf and nan
    become strings ("inf", "-inf", "nan") since JSON has no such numbers. None stays None.

    A matrix (the last two axes) of more than ``WHOLE_MATRIX`` numbers (a model's (tokens, 576)
    activations, its (tokens, vocabulary) logits) is sent as NumPy prints it: its first and last
    ``EDGE`` rows and columns, "…" between, with ``corners``, ``full_shape`` and its ``range`` (min, max), so
    that a large model's page stays a few MB; unless each matrix fits `whole` (``fits_whole``):
    then it is sent whole and ``numbers`` tells the viewer to print every number. With `head`,
    only that head's matrices of a (batch, head, …) array are sent (``head`` says which)."""
    if array is None:
        return None
    values = to_numpy(array).astype(np.float64)
    rows, cols = axis_labels(name, values.shape, tokens, vocab, axes)
    lead = list(np.ndindex(values.shape[:-2])) if values.ndim > 2 else []
    extra: dict[str, Any] = {"numbers": fits_whole(values.shape, whole)}
    if head is not None and any(head_of(index, values.shape, axes) is not None for index in lead):
        lead = [index for index in lead if head_of(index, values.shape, axes) in (None, head)]
        extra["head"] = head
        values = np.stack([values[index] for index in lead])
    captions = [lead_label(index, to_numpy(array).shape, axes, tokens) for index in lead]
    gap = np.zeros(values.shape, dtype=bool)
    matrix = values if values.ndim >= 2 else values.reshape(1, -1)
    if values.ndim and matrix.shape[-2] * matrix.shape[-1] > WHOLE_MATRIX and not extra["numbers"]:
        finite = values[np.isfinite(values)]
        extra.update(corners=True, full_shape=list(to_numpy(array).shape),
                     range=[float(finite.min()), float(finite.max())] if finite.size else None)
        keep_rows, keep_cols = corner_indices(matrix.shape[-2], EDGE), corner_indices(matrix.shape[-1], EDGE)
        small = matrix[..., [i or 0 for i in keep_rows], :][..., [j or 0 for j in keep_cols]]
        gap = np.broadcast_to(np.array([[i is None or j is None for j in keep_cols] for i in keep_rows]),
                              small.shape)
        values, gap = (small, gap) if values.ndim >= 2 else (small[0], gap[0])
        rows = [rows[i] if i is not None else "…" for i in keep_rows] if values.ndim >= 2 else rows
        cols = [cols[j] if j is not None else "…" for j in keep_cols]
    data = ["…" if hidden else v if math.isfinite(v) else ("nan" if math.isnan(v) else NON_FINITE[v])
            for v, hidden in zip(values.reshape(-1).tolist(), gap.reshape(-1).tolist())]
    integer = to_numpy(array).dtype.kind in "biu"          # masks, ids: shown as 1, 0, 3
    if "head" in extra and "full_shape" not in extra:
        extra["full_shape"] = list(to_numpy(array).shape)
    return {"shape": list(values.shape), "data": data, "rows": rows, "cols": cols, "captions": captions,
            "integer": integer, **extra}


def step_json(step: Step) -> dict[str, Any]:
    """What the viewer shows for one step (which node draws it depends on the view: see
    ``graph_views``), with the step's head and whole (``Step``)."""
    def array(value: Any, name: str, axes: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        return array_json(value, name, step.tokens, step.vocab, axes, step.head, step.whole)

    out_axes, in_axes = step.layouts()
    inputs = [{"name": name, "shape": None if shape is None else list(shape), "grad": array(grad, name, axes)}
              for name, shape, grad, axes in zip(step.input_names, step.input_shapes, step.sent, in_axes)]
    shown = {id(inside.array) for inside in step.insides}
    return {
        "index": step.index, "op": step.op, "name": step.name,
        "formula": list(dict.fromkeys(f for f in step.formula if f)),      # *xs: one formula for all
        "module": step.module, "shape": list(step.output_shape),
        "params": [param_text(name, value, step.input_shapes) for name, value in step.params],
        "saved": [{"label": step.saved_label(name, value),
                   "array": array(value, name, step.saved_axes(value))}
                  for name, value in zip(step.saved, step.saved_values) if id(value) not in shown],
        "grad": array(step.grad, step.name, out_axes), "inputs": inputs,
        "parts": [{"source": source, "grad": array(part, step.name, out_axes)}
                  for source, part in step.parts],
        "insides": [{"symbol": inside.symbol, "equation": inside.equation, "kind": inside.kind,
                     "array": array(inside.array, inside.symbol)} for inside in step.insides],
        "notes": list(step.notes)}


def forward_json(f: ForwardStep) -> dict[str, Any]:
    """What the viewer shows for one op of the forward pass."""
    return {"index": f.index, "backward": f.backward_index, "op": f.op, "name": f.name,
            "computes": f.computes, "module": f.module, "shape": list(f.tensor.shape),
            "params": [param_text(name, value, f.input_shapes) for name, value in f.params],
            "inputs": [{"name": name, "shape": None if shape is None else list(shape)}
                       for name, shape in zip(f.input_names, f.input_shapes)],
            "value": array_json(f.value, f.name, f.tokens, f.vocab, axis_names(f.tensor), f.head, f.whole)}


def foldable_modules(graph: CollectedGraph) -> list[str]:
    """The modules the explorer folds: every module, but the root, that holds other modules
    (a transformer block, its attention and MLP); modules of single layers stay open."""
    return sorted(path for path in graph.modules
                  if path and any(path in ancestors(inner)[1:] for inner in graph.modules))


def graph_views(loss: Tensor, tokens: tuple[str, ...] | None) -> list[dict[str, Any]]:
    """The pictures of the graph the page switches between, each laid out by Graphviz here: all
    foldable modules folded (key ""), and for each foldable module the picture with it and the
    modules around it open (key: its path), the others folded. Each view says which node draws
    each step (its op, or the folded module around it) and which module each folded box opens."""
    foldable = foldable_modules(collect(loss, tokens=tokens))
    views = []
    for key in ["", *foldable]:
        opened = [path for path in ancestors(key) if path in foldable][::-1]
        graph = collect(loss, tokens=tokens, collapse=[p for p in foldable if p not in opened] or None)
        folds = {node.id: node.folded for node in graph.nodes if node.kind == "fold"}
        views.append({"key": key, "open": opened, "folds": folds, "stepNodes": graph.step_nodes,
                      "svg": graph_svg(emit(graph).source)})
    return views


def graph_svg(dot_source: str) -> str:
    """The laid-out graph as an inline <svg> element: no XML prolog, DOCTYPE or namespace URLs."""
    svg = layout(dot_source, "svg").decode()
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2)


def script_safe_json(data: Any) -> str:
    """`data` as JSON text that can sit inside a <script> element: every "<" written as the JSON
    escape \\u003c, so no name or token can hold "</script" (which would end the element) or
    "<!--" and "<script" (which make the browser swallow the rest of the page); JSON.parse reads
    the same strings back."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def _asset(name: str) -> str:
    return (resources.files(__package__) / "explorer_assets" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Explorer:
    """The explorer page: ``html`` is the whole file; in Jupyter it shows inline (an iframe).

    Attributes:
        html: the self-contained page. steps: the number of backward steps on it.
        path: where it was written (None if not written).
        forward_ops: the number of forward ops it walks first (0: no forward phase).
    """

    html: str
    steps: int
    path: Path | None = None
    forward_ops: int = 0

    def __repr__(self) -> str:
        """One line: what a text-only front end prints instead of the page."""
        where = f", written to {self.path}" if self.path else ""
        size = len(self.html.encode()) // 1024
        ops = f"{self.forward_ops} forward ops, then " if self.forward_ops else ""
        return f"<backprop explorer: {ops}{self.steps} steps, {size} KiB of HTML{where}>"

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
                'style="width:100%;height:720px;border:1px solid #ccc"></iframe>')


def explore(loss: Tensor, path: str | Path | None = None, tokens: tuple[str, ...] | None = None,
            title: str = "backprop explorer", vocab: tuple[str, ...] | None = None,
            forward: bool = False, head: int | None = None, whole: float | None = None) -> Explorer:
    """Run the backward pass from `loss` step by step and build the explorer page.

    The leaves' ``.grad`` are filled as by ``loss.backward()``. `tokens` label sequence
    positions (rows and columns of attention matrices), `vocab` the columns of logits; `path`,
    when given, is where the page is written (parent folders created). With `forward` the page
    walks the forward pass first (``forward_steps``: each op in the order it ran, with its
    output's value), then the backward pass. `head` shows only that head's matrices of (batch,
    head, …) arrays; `whole` sends each matrix of at most that many rows and columns whole and
    prints every number of it (math.inf: every matrix), as ``array_json`` says.

    Raises:
        ValueError: `loss` does not require a gradient, or `path` cannot be written (with why).
    """
    if not loss.requires_grad:
        raise ValueError(f"explore: the loss {loss.shape} does not require grad: nothing to backpropagate")
    ops = [forward_json(f) for f in forward_steps(loss, tokens, vocab, head, whole)] if forward else []
    steps = list(backprop_steps(loss, tokens=tokens, vocab=vocab, head=head, whole=whole))
    views = graph_views(loss, tokens)
    data = {"title": title, "tokens": list(tokens) if tokens else None, "forward": ops,
            "steps": [step_json(step) for step in steps],
            "views": [{"key": view["key"], "open": view["open"], "folds": view["folds"],
                       "nodes": [view["stepNodes"].get(step.index) for step in steps]} for view in views]}
    payload = script_safe_json(data)
    pictures = "\n".join(f'<div class="view" data-view="{index}" hidden>\n{view["svg"]}\n</div>'
                         for index, view in enumerate(views))
    parts = {"title": html.escape(title), "css": _asset("explorer.css"), "views": pictures,
             "data": payload, "js": _asset("explorer.js")}
    page = re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], _asset("explorer.html"))
    written = None
    if path is not None:
        written = write_file("explore", Path(path), page.encode("utf-8"))     # whole or not at all
    return Explorer(page, len(steps), written, len(ops))
