"""How the stepper prints an array: numbers to four digits, token labels on rows and columns, one
labelled matrix per batch and head, and a large matrix as its corners unless asked for whole.

An array of up to ``WHOLE`` numbers prints whole. A larger one prints a line with its shape, norm
and range, then each matrix as NumPy prints a large one (its first and last rows and columns),
and that line says how to see it whole: ``whole=N`` (the commands' ``--whole N``) prints every
row and column of each matrix of at most N rows and N columns, ``whole=math.inf`` (``--whole``)
of every matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import to_numpy

__all__ = ["ATTENTION_MATRICES", "VOCABULARY_MATRICES", "WHOLE", "axis_labels", "corner_indices",
           "fits_whole", "format_array", "format_number", "head_of", "lead_label"]


WHOLE = 64          # arrays up to this many elements print whole
# Tensors whose last two axes are (query, key): their columns are tokens too.
ATTENTION_MATRICES = ("S", "P", "Q Kᵀ", "dP", "dS", "keep")
# Tensors whose last axis is the vocabulary (logits, cross-entropy's probabilities).
VOCABULARY_MATRICES = ("logits", "probs")


def format_number(value: float) -> str:
    """Four significant digits, so that every printed number can be checked to its last digit:
    0.1004, 0.002406, 0.0003125, 3.142e-05; from 0.1 up, four decimals (1.2346, 12.3457); an exact
    zero as 0 (a tiny non-zero never looks like 0)."""
    if value == 0:
        return "0"
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "−inf" if value < 0 else "inf"
    exponent = int(f"{value:.3e}".split("e")[1])     # of the value rounded to 4 digits
    if exponent >= -1:
        return f"{value:.4f}"
    if exponent >= -4:
        return f"{value:.{3 - exponent}f}"
    return f"{value:.3e}"


def axis_labels(name: str, shape: tuple[int, ...], tokens: tuple[str, ...] | None,
                vocab: tuple[str, ...] | None = None,
                axes: tuple[str, ...] | None = None) -> tuple[list[str], list[str]]:
    """Row and column labels of the last two axes: tokens where they index the sequence, the
    vocabulary's words where they index the next word (logits), 'head h' where `axes` (the
    array's axis names, ``layout.axis_names``) say the rows are heads."""
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1] if shape else 1)
    row_labels, col_labels = [str(i) for i in range(rows)], [str(j) for j in range(cols)]
    if axes is not None and axes[-2] == "head":
        return [f"head {h}" for h in range(rows)], col_labels
    if vocab is not None and name in VOCABULARY_MATRICES and cols == len(vocab):
        col_labels = list(vocab)
    if tokens is None:
        return row_labels, col_labels
    fits = len(tokens)
    if name in ATTENTION_MATRICES and rows == cols == fits:
        return list(tokens), list(tokens)
    if name == "D" and cols == 1 and rows == fits:       # attention's D: one number per query
        return list(tokens), ["D"]
    if name == "Kᵀ" and cols == fits:
        return row_labels, list(tokens)
    if len(shape) >= 2 and rows == fits and name not in ("Kᵀ",) and not name.endswith(("weight", "bias")):
        return list(tokens), col_labels
    return row_labels, col_labels


def fits_whole(shape: tuple[int, ...], whole: float | None) -> bool:
    """Whether each matrix of an array of `shape` (a vector: one row) has at most `whole` rows and
    `whole` columns; never when `whole` is None."""
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1] if shape else 1)
    return whole is not None and rows <= whole and cols <= whole


def format_array(array: Any, name: str, tokens: tuple[str, ...] | None, indent: str = "      ",
                 vocab: tuple[str, ...] | None = None, axes: tuple[str, ...] | None = None,
                 head: int | None = None, whole: float | None = None) -> list[str]:
    """Lines showing `array` as labelled matrices, one per leading index (batch, head).

    Whole up to ``WHOLE`` numbers, or when each matrix fits `whole` (``fits_whole``); else its
    shape, norm and range, then each matrix as NumPy prints a large one (its first and last rows
    and columns, … between), the first two only unless `head` picks one head, with a line saying
    how to see it whole. `axes` names a 4-D array's axes (``layout.axis_names``): (batch, head, …)
    or (batch, token, …); `head` keeps only that head's matrices of a (batch, head, …) array."""
    if array is None:
        return [indent + "—"]
    original = to_numpy(array)
    values = original.astype(np.float64)
    show = (lambda v: str(int(v))) if original.dtype.kind in "biu" else format_number   # masks, ids
    if values.ndim == 0:
        return [indent + show(float(values))]
    lead = [i for i in (np.ndindex(values.shape[:-2]) if values.ndim > 2 else [()])
            if head is None or head_of(i, values.shape, axes) in (None, head)]
    whole_here = fits_whole(values.shape, whole)
    cut = values.size > WHOLE and not whole_here
    lines: list[str] = []
    if values.size > WHOLE:
        finite = values[np.isfinite(values)]
        span = f", min {format_number(finite.min())}, max {format_number(finite.max())}" \
            if finite.size else ""
        norm = format_number(float(np.linalg.norm(finite)))
        first = "; first: " + ", ".join(format_number(v) for v in values.reshape(-1)[:4]) + ", …" \
            if cut else ""
        lines.append(f"{indent}{values.size} numbers, shape {values.shape}: ‖·‖ = {norm}{span}{first}")
        if cut:
            more = "--whole prints every row and column" if whole is None else \
                f"larger than --whole {whole:g}: a larger N prints it whole"
            what = "the first and last 3 rows and columns of each matrix" if values.ndim >= 2 else \
                "the first 4 numbers"
            lines.append(f"{indent}({what} only; {more})")
        if values.ndim < 2 and cut:
            return lines
        if cut and len(lead) > 2 and head is None:
            hint = ", --head picks one head" if values.ndim > 3 else ""
            lines.append(f"{indent}(the first 2 of {len(lead)} matrices{hint})")
            lead = lead[:2]
    rows, cols = axis_labels(name, values.shape, tokens, vocab, axes)
    for index in lead:
        matrix = values[index] if values.ndim >= 2 else values[None]
        if index:
            lines.append(f"{indent}[{lead_label(index, values.shape, axes, tokens)}]")
        edge = 3 if cut else max(matrix.shape)
        keep_rows, keep_cols = corner_indices(matrix.shape[0], edge), corner_indices(matrix.shape[1], edge)
        row_names = [rows[i] if i is not None else "…" for i in keep_rows] if values.ndim >= 2 else [""]
        col_names = [cols[j] if j is not None else "…" for j in keep_cols]
        cells = [[show(matrix[i, j]) if i is not None and j is not None else "…" for j in keep_cols]
                 for i in keep_rows]
        width = max(len(c) for row in cells + [col_names] for c in row) + 2
        pad = max(len(r) for r in row_names)
        lines.append(indent + " " * pad + "".join(f"{c:>{width}}" for c in col_names))
        for label, row in zip(row_names, cells):
            lines.append(indent + f"{label:>{pad}}" + "".join(f"{c:>{width}}" for c in row))
    return lines


def corner_indices(n: int, edge: int = 3) -> list[int | None]:
    """Indices NumPy shows of an axis of length n: all up to 2·edge + 2, else the first and last
    `edge` with None (…) between."""
    return list(range(n)) if n <= 2 * edge + 2 else [*range(edge), None, *range(n - edge, n)]


def head_of(index: tuple[int, ...], shape: tuple[int, ...], axes: tuple[str, ...] | None) -> int | None:
    """The query head of a leading index of a (B, H, rows, cols) or grouped (B, Hkv, G, rows,
    cols) array; None where the array has no head axis (or a kv head shared by its group)."""
    if len(shape) == 4 and (axes is None or axes[1] == "head"):
        return index[1]
    if len(shape) == 5 and shape[2] > 1:
        return index[1] * shape[2] + index[2]
    return None


def lead_label(index: tuple[int, ...], shape: tuple[int, ...], axes: tuple[str, ...] | None = None,
               tokens: tuple[str, ...] | None = None) -> str:
    """'batch 0, head 1' for (B, H, rows, cols) arrays, 'batch 0, token 'cat'' for token-major
    (B, T, H, D) ones (`axes` from ``layout.axis_names`` says which); 'batch 0, kv head 0, query
    head 1' for grouped-query attention's (B, Hkv, G, rows, cols) view (query head j·G + g),
    'batch 0, kv head 0' for a key or value (B, Hkv, 1, rows, cols) that its group shares; else
    the indices."""
    if len(shape) == 5:
        batch, kv_head, member = index
        shared = "" if shape[2] == 1 else f", query head {kv_head * shape[2] + member}"
        return f"batch {batch}, kv head {kv_head}{shared}"
    names = axes[:2] if axes is not None and len(shape) == 4 else \
        ("batch", "head") if len(shape) == 4 else ("batch",) if len(shape) == 3 else ()
    if len(names) != len(index):
        return ", ".join(str(i) for i in index)
    return ", ".join(f"token {tokens[i]!r}" if n == "token" and tokens is not None and len(tokens) == size
                     else f"{n} {i}" for n, i, size in zip(names, index, shape))
