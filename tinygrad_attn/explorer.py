"""The backprop explorer: one self-contained HTML page with the graph and every backward step.

``explore(loss)`` runs ``backprop_steps`` once, turns each ``Step`` into plain JSON (every array
kept whole, each number exactly as the step holds it), draws the graph with ``viz.draw_graph`` as
SVG, and inlines both into a page together with the viewer (``explorer_assets/explorer.js`` and
``explorer.css``, plain files read here). The page is data plus a viewer: JavaScript only shows
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

from . import viz
from .backend import to_numpy
from .stepper import Step, axis_labels, backprop_steps
from .tensor import Tensor

NON_FINITE = {math.inf: "inf", -math.inf: "-inf"}


def array_json(array: Any, name: str, tokens: tuple[str, ...] | None) -> dict[str, Any] | None:
    """An array as {shape, data (flat, row-major), rows, cols}; ±inf and nan become strings
    ("inf", "-inf", "nan") since JSON has no such numbers. None stays None."""
    if array is None:
        return None
    values = to_numpy(array).astype(np.float64)
    data = [v if math.isfinite(v) else ("nan" if math.isnan(v) else NON_FINITE[v])
            for v in values.reshape(-1).tolist()]
    rows, cols = axis_labels(name, values.shape, tokens)
    return {"shape": list(values.shape), "data": data, "rows": rows, "cols": cols}


def step_json(step: Step, node: str | None) -> dict[str, Any]:
    """What the viewer shows for one step; `node` is the id of its op in the SVG graph."""
    inputs = [{"name": name, "shape": None if shape is None else list(shape),
               "grad": array_json(grad, name, step.tokens)}
              for name, shape, grad in zip(step.input_names, step.input_shapes, step.sent)]
    return {
        "index": step.index, "op": step.op, "name": step.name, "formula": list(step.formula),
        "module": step.module, "shape": list(step.output_shape), "node": node,
        "grad": array_json(step.grad, step.name, step.tokens), "inputs": inputs,
        "parts": [{"source": source, "grad": array_json(part, step.name, step.tokens)}
                  for source, part in step.parts],
        "insides": [{"symbol": inside.symbol, "equation": inside.equation, "kind": inside.kind,
                     "array": array_json(inside.array, inside.symbol, step.tokens)}
                    for inside in step.insides],
        "notes": list(step.notes)}


def op_nodes(dot_source: str) -> dict[int, str]:
    """Step number -> id of the op node in a ``draw_graph`` DOT source ("step N · op" labels)."""
    return {int(step): node for node, step in
            re.findall(r'^\t+(op\d+) \[label="step (\d+) · ', dot_source, re.M)}


def graph_svg(dot_source: str) -> str:
    """The laid-out graph as an inline <svg> element: no XML prolog, DOCTYPE or namespace URLs."""
    svg = viz.layout(dot_source, "svg").decode()
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg, count=2)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("explorer_assets", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Explorer:
    """The explorer page: ``html`` is the whole file; in Jupyter it shows inline (an iframe).

    Attributes:
        html: the self-contained page. steps: the number of backward steps on it.
        path: where it was written (None if not written).
    """

    html: str
    steps: int
    path: Path | None = None

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
                'style="width:100%;height:720px;border:1px solid #ccc"></iframe>')


def explore(loss: Tensor, path: str | Path | None = None, tokens: tuple[str, ...] | None = None,
            title: str = "backprop explorer") -> Explorer:
    """Run the backward pass from `loss` step by step and build the explorer page.

    The leaves' ``.grad`` are filled as by ``loss.backward()``. `tokens` label sequence
    positions (rows and columns of attention matrices); `path`, when given, is where the page is
    written (parent folders created).

    Raises:
        ValueError: `loss` does not require a gradient, or `path` cannot be written (with why).
    """
    if not loss.requires_grad:
        raise ValueError(f"explore: the loss {loss.shape} does not require grad: nothing to backpropagate")
    steps = list(backprop_steps(loss, tokens=tokens))
    source = viz.draw_graph(loss, tokens=tokens).source
    nodes = op_nodes(source)
    data = {"title": title, "tokens": list(tokens) if tokens else None,
            "steps": [step_json(step, nodes.get(step.index)) for step in steps]}
    payload = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")
    parts = {"title": html.escape(title), "css": _asset("explorer.css"), "svg": graph_svg(source),
             "data": payload, "js": _asset("explorer.js")}
    page = re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], _asset("explorer.html"))
    written = None
    if path is not None:
        written = Path(path)
        try:
            written.parent.mkdir(parents=True, exist_ok=True)
            written.write_text(page, encoding="utf-8")
        except OSError as error:
            blocker = next((p for p in written.parents if p.exists() and not p.is_dir()), None)
            reason = f"{str(blocker)!r} is a file, not a folder" if blocker else error.strerror or str(error)
            raise ValueError(f"explore: cannot write {str(written)!r}: {reason}") from error
    return Explorer(page, len(steps), written)
