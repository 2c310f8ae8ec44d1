"""PNG drawings of a Graphviz layout, painted with matplotlib in DejaVu Sans.

Graphviz lays the graph out and reports every shape and text as xdot drawing operations
(``-Tjson``); this module paints them on a matplotlib canvas. It exists because the PNG
renderer of ``graphviz-pure`` has no glyph for math symbols such as ⊙ (it draws an empty box),
while DejaVu Sans, which matplotlib ships, has ⊙, ᵀ, √, Σ, − and ‖.
"""

from __future__ import annotations

import functools
import json
from typing import Any

__all__ = ["FONT", "paint_layout"]


FONT = "DejaVu Sans"
_ALIGN = {"l": "left", "c": "center", "r": "right"}


def _color(value: str) -> Any:
    """An xdot colour ('#rrggbb', '#rrggbbaa' or a name) as matplotlib takes it."""
    if value.startswith("#") and len(value) == 9:
        return tuple(int(value[i:i + 2], 16) / 255 for i in (1, 3, 5, 7))
    return value


@functools.cache
def _font() -> Any:
    from matplotlib import font_manager, ft2font

    font = ft2font.FT2Font(font_manager.findfont(FONT))
    font.set_size(100.0, 72)           # 100 pt at 72 dpi: widths in 1/64 pixel = 1/64 point
    return font


def _fitted_size(text: str, size: float, width: float) -> float:
    """The font size at which `text` in DejaVu Sans spans about `width` points: the layout
    measured it in Helvetica, which is narrower; never below 70 % of `size`."""
    font = _font()
    font.set_text(text, 0.0)
    drawn = font.get_width_height()[0] / 64 / 100 * size
    room = 0.97 * width                # a little air between text and border
    return size if drawn <= room or width <= 0 else max(size * room / drawn, 0.7 * size)


def _paint(ax: Any, ops: list[dict[str, Any]], zorder: int) -> None:
    """Paint one object's xdot operations on `ax`."""
    from matplotlib.patches import Ellipse, PathPatch, Polygon
    from matplotlib.path import Path as MplPath

    pen, fill, style, font = "black", "none", "solid", (14.0, FONT)
    for op in ops:
        kind = op["op"]
        dashes = "--" if "dashed" in style else ":" if "dotted" in style else "-"
        line: dict[str, Any] = {"edgecolor": pen, "linestyle": dashes, "linewidth": 0.9, "zorder": zorder}
        face = fill if kind.isupper() else "none"          # upper-case ops are filled shapes
        if kind == "c":
            pen = _color(op["color"])
        elif kind == "C":
            fill = _color(op["color"])
        elif kind == "S":
            style = op["style"]
        elif kind == "F":
            font = (float(op["size"]), op["face"])
        elif kind in ("e", "E"):
            cx, cy, rx, ry = op["rect"]
            ax.add_patch(Ellipse((cx, cy), 2 * rx, 2 * ry, facecolor=face, **line))
        elif kind in ("p", "P"):
            ax.add_patch(Polygon(op["points"], closed=True, facecolor=face, **line))
        elif kind == "L":
            ax.add_patch(Polygon(op["points"], closed=False, facecolor="none", **line))
        elif kind in ("b", "B"):
            points = op["points"]
            codes = [MplPath.MOVETO] + [MplPath.CURVE4] * (len(points) - 1)
            ax.add_patch(PathPatch(MplPath(points, codes), facecolor=face, **line))
        elif kind == "T":
            x, y = op["pt"]
            ax.text(x, y, op["text"], ha=_ALIGN.get(op["align"], "center"), va="baseline", color=pen,
                    fontfamily=FONT, fontsize=_fitted_size(op["text"], font[0], float(op["width"])),
                    zorder=zorder + 1)


def paint_layout(layout_json: bytes, dpi: int = 96) -> bytes:
    """The PNG bytes of a graph laid out by Graphviz (``dot -Tjson`` output)."""
    import io

    from matplotlib.figure import Figure

    layout = json.loads(layout_json)
    x0, y0, x1, y1 = (float(v) for v in layout["bb"].split(","))
    figure = Figure(figsize=((x1 - x0) / 72, (y1 - y0) / 72), dpi=dpi)
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.axis("off")
    _paint(ax, layout.get("_draw_", []) + layout.get("_ldraw_", []), zorder=0)
    for obj in layout.get("objects", []):             # clusters (below) and nodes (above edges)
        zorder = 1 if "nodes" in obj or "subgraphs" in obj or obj["name"].startswith("cluster") else 5
        _paint(ax, obj.get("_draw_", []) + obj.get("_ldraw_", []), zorder)
    for edge in layout.get("edges", []):
        _paint(ax, sum((edge.get(key, []) for key in ("_draw_", "_hdraw_", "_tdraw_", "_ldraw_")), []), 3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, facecolor="white", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()
