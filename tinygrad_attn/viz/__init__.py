"""Seeing backprop: the computation graph (DOT, SVG, PNG), the stepper, the explorer page and the
example graphs they show. ``ta.viz.draw_graph``, ``render``, ``explore`` and ``forward_steps`` are
the entry points."""

from .collected import collect
from .dot import draw_graph, emit
from .explorer import explore
from .forward import forward_steps
from .image import render, write_image

__all__ = ["collect", "draw_graph", "emit", "explore", "forward_steps", "render", "write_image"]
