"""A collected graph written as DOT: ``emit`` makes the graphviz.Digraph (clusters nested by module,
then a legend), and ``draw_graph`` collects and emits in one call. Building DOT source needs only
the graphviz Python package; ``image.py`` lays it out."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .collected import CollectedGraph, collect

__all__ = ["LEGEND", "draw_graph", "emit"]

LEGEND = (
    ("legend_param", {"label": "{parameter (blue)|value and grad}", "shape": "record",
                      "style": "filled", "fillcolor": "lightblue"}),
    ("legend_tensor", {"label": "{tensor made by an op (white)|value and grad}", "shape": "record"}),
    ("legend_const", {"label": "{constant input (grey)|no gradient}", "shape": "record",
                      "style": "filled,dashed", "fillcolor": "gray92"}),
    ("legend_op", {"label": "step N · op\\nits backward formula", "shape": "ellipse", "style": "filled",
                   "fillcolor": "lightyellow"}),
    ("legend_fold", {"label": "module drawn folded\\n(--collapse, --expand)", "shape": "box3d",
                     "style": "filled", "fillcolor": "lavender"}),
    ("legend_edges", {"label": "arrows: the forward pass.\\nBackward runs against them,\\nstep 0 "
                      "(at the loss) first.\\nvalue = forward result, grad =\\nd loss / d tensor.\\n"
                      "‖·‖: norm of a large tensor.", "shape": "plaintext"}),
)


def emit(graph: CollectedGraph, legend: bool = True):
    """The graphviz.Digraph of a collected graph: clusters nested by module path, then the legend."""
    import graphviz

    digraph = graphviz.Digraph("backprop", graph_attr={"rankdir": "TB", "fontname": "Helvetica"},
                               node_attr={"fontname": "Helvetica", "fontsize": "10"})
    clusters = {path: graphviz.Digraph(name=f"cluster_{path}", graph_attr={
        "label": label, "style": "rounded", "color": "gray60"}) for path, label in graph.clusters.items()}
    for node in graph.nodes:
        clusters.get(node.cluster, digraph).node(node.id, **node.attrs)
    for path in sorted(clusters, key=lambda p: -p.count(".")):
        clusters.get(graph.enclosing_cluster(path), digraph).subgraph(clusters[path])
    if legend:
        key = graphviz.Digraph(name="cluster_legend", graph_attr={"label": "legend", "color": "gray60"})
        for node_id, attrs in LEGEND:
            key.node(node_id, **attrs)
        for (upper, _), (lower, _) in zip(LEGEND, LEGEND[1:]):
            key.edge(upper, lower, style="invis")
        digraph.subgraph(key)
    for edge in graph.edges:
        digraph.edge(*edge)
    return digraph


def draw_graph(t: Tensor, show_grads: bool = True, collapse: Any = None, expand: str | None = None,
               tokens: tuple[str, ...] | None = None, legend: bool = True):
    """A graphviz.Digraph of the graph that made `t` (not rendered): ``emit(collect(...))``.

    Args:
        t: the output (often the loss) whose graph to draw.
        show_grads: add each tensor's gradient (from the latest backward; non-leaf gradients are
            kept on the graph's nodes): its entries when small, else its norm.
        collapse: module classes and/or dotted module paths to draw as single nodes, e.g.
            ``nn.MultiHeadAttention`` or ``["blocks.0", "blocks.1"]``.
        expand: the dotted path of one module to draw in full, with every other module folded
            (its enclosing modules stay open so that it can be seen).
        tokens: the label of each sequence position (an ``Example``'s tokens): rows of small
            tensors with one row per position are labelled with them.
        legend: add a legend cluster explaining colours, shapes and arrows.

    Example:
        >>> import tinygrad_attn as ta
        >>> x = ta.Tensor([1.0, 2.0], requires_grad=True)
        >>> g = draw_graph((x * x).sum())
        >>> "mul" in g.source and "sum" in g.source
        True
    """
    return emit(collect(t, show_grads, collapse, expand, tokens), legend)
