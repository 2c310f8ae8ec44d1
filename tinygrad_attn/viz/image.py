"""A DOT graph as a picture: Graphviz lays it out (the system ``dot`` when it is on PATH, else the
``graphviz-pure`` program installed by pip) and writes SVG; PNGs are painted by matplotlib from the
layout (``png.py``) so that math glyphs such as ⊙ show."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..tensor import Tensor
from . import png as viz_png
from .dot import draw_graph

__all__ = ["dot_program", "layout", "render", "source_to_image", "write_image"]


def dot_program() -> str:
    """The Graphviz layout program: the system ``dot``, else pip's ``graphviz-pure``."""
    for candidate in (shutil.which("dot"), shutil.which("graphviz-pure"),
                      str(Path(sys.executable).parent / "graphviz-pure")):
        if candidate and Path(candidate).exists():
            return candidate
    raise FileNotFoundError("no Graphviz program found: install graphviz-pure (pip install "
                            "graphviz-pure) or Graphviz's dot")


def layout(source: str, fmt: str) -> bytes:
    """Run the Graphviz program on DOT `source` and return its `fmt` output (svg, json)."""
    result = subprocess.run([dot_program(), f"-T{fmt}"], input=source.encode(), capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"render: {dot_program()} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout


def source_to_image(source: str, fmt: str) -> bytes:
    """The SVG or PNG bytes of DOT `source`; PNGs are painted by matplotlib from the layout."""
    return viz_png.paint_layout(layout(source, "json")) if fmt == "png" else layout(source, "svg")


def render(t: Tensor, path: str | Path, **kwargs: Any) -> Path:
    """Draw the graph of `t` and write it to `path` as SVG or PNG (by its extension), creating
    missing parent folders.

    Keyword arguments go to ``draw_graph`` (``show_grads``, ``collapse``, ``expand``, ``tokens``).

    Raises:
        ValueError: the extension is not .svg or .png, or `path` cannot be written (a file where
            a folder should be, no permission), with the reason.
    """
    return write_image(draw_graph(t, **kwargs).source, path)


def write_image(source: str, path: str | Path) -> Path:
    """Lay out DOT `source` and write it to `path` as SVG or PNG (by the extension), creating
    missing parent folders.

    Raises:
        ValueError: as ``render``.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("svg", "png"):
        raise ValueError(f"render: path must end in .svg or .png, got {path.name!r}")
    image = source_to_image(source, fmt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image)
    except OSError as error:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        reason = f"{str(blocker)!r} is a file, not a folder" if blocker else error.strerror or str(error)
        raise ValueError(f"render: cannot write {str(path)!r}: {reason}") from error
    return path
