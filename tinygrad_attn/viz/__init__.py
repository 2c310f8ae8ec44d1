"""Seeing backprop: the computation graph (DOT, SVG, PNG), the stepper, the explorer page and the
example graphs they show. ``ta.viz.draw_graph``, ``render`` and ``explore`` are the entry points."""

from .collected import collect
from .dot import draw_graph, emit
from .explorer import explore
from .image import render, write_image

__all__ = ["collect", "draw_graph", "emit", "explore", "render", "write_image"]
