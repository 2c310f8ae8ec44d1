"""PNG figures of a run: the loss curve and a grid of attention heatmaps (layer × head).

matplotlib is imported inside each function with the Agg backend, so importing this module is
cheap and plotting needs no display. Each PNG is drawn in memory and written whole or not at all
(``files.write_atomically``: a full disk raises SaveError and leaves no truncated file).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..files import write_atomically

__all__ = ["LABEL_INCHES", "LABEL_POINTS", "attention_grid", "loss_curve"]

LABEL_POINTS = 7            # the tick labels' size in attention_grid
LABEL_INCHES = 0.13         # room each row and column gets, so that labels of that size never overlap


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def loss_curve(losses: Sequence[float], path: str | Path, title: str = "training loss",
               validation: tuple[Sequence[int], Sequence[float]] | None = None,
               ylabel: str = "cross-entropy on answer tokens") -> Path:
    """Per-step loss (faint) and its 50-step moving average, log-scaled, saved as a PNG; with
    `validation` (steps, losses), the validation loss measured after those steps, as points."""
    plt = _pyplot()
    per_step = np.asarray(losses, dtype=float)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.arange(1, len(per_step) + 1), per_step, alpha=0.3, label="training, per step")
    window = min(50, len(per_step))
    if window > 1:
        smooth = np.convolve(per_step, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window, len(per_step) + 1), smooth, label=f"training, mean of {window}")
    if validation is not None and len(validation[0]):
        ax.plot(validation[0], validation[1], "o-", label="validation (held-out text)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return _save(plt, fig, path)


def attention_grid(maps: Sequence[np.ndarray], tokens: Sequence[str], path: str | Path,
                   title: str = "") -> Path:
    """One heatmap per (layer, head): rows are queries, columns keys, labelled with `tokens`.

    Args:
        maps: one array (heads, seq, seq) per layer.
        tokens: the `seq` input tokens, as text.
        path: where to save the PNG.
    """
    plt = _pyplot()
    layers, heads = len(maps), maps[0].shape[0]
    side = max(2.6, LABEL_INCHES * len(tokens) + 0.8)       # every token keeps a label of LABEL_POINTS
    fig, axes = plt.subplots(layers, heads, figsize=(side * heads, side * layers), squeeze=False)
    upright = 0 if all(len(t) <= 2 for t in tokens) else 90  # longer labels stand up under the columns
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer][head]
            ax.imshow(weights[head], cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(len(tokens)), tokens, fontsize=LABEL_POINTS, rotation=upright)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=LABEL_POINTS)
            ax.set_title(f"layer {layer} head {head}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(plt, fig, path)


def _save(plt, fig, path: str | Path) -> Path:
    """The figure as a PNG at `path`, written atomically; the figure is closed either way."""
    image = io.BytesIO()
    try:
        fig.savefig(image, format="png", dpi=100)
    finally:
        plt.close(fig)
    return write_atomically(path, image.getvalue())
