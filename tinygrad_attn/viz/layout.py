"""What the axes of a 4-D array are: (batch, head, token, feature) or (batch, token, head, feature).

Attention splits the heads with a reshape (B, T, H·D) → (B, T, H, D) and a transpose to
(B, H, T, D), and merges them back the other way. Both are 4-D, and when T and H differ by one
the shape cannot tell them apart: the ops that made the array can. ``axis_names`` follows a
tensor back through them: a reshape of a (B, T, …) array that keeps B and T is token-major, a
transpose permutes its input's names, an op whose output has its input's shape keeps them;
anything else 4-D is taken as (batch, head, rows, columns), attention's own layout.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HEAD_MAJOR", "TOKEN_MAJOR", "axis_names"]

HEAD_MAJOR = ("batch", "head", "token", "feature")
TOKEN_MAJOR = ("batch", "token", "head", "feature")


def axis_names(t: Any) -> tuple[str, ...] | None:
    """The name of each axis of a 4-D tensor `t` (None for other ranks)."""
    if t is None or len(t.shape) != 4:
        return None
    permutations: list[tuple[int, ...]] = []        # transposes met on the way back, last first
    names: tuple[str, ...] = HEAD_MAJOR
    while t.node is not None:
        op, parent = t.node.op.name, t.node.parents[0] if t.node.parents else None
        if parent is None:
            break
        if op == "reshape" and len(parent.shape) == 3 and parent.shape[:2] == t.shape[:2]:
            names = TOKEN_MAJOR
            break
        if op == "transpose" and len(parent.shape) == 4:
            permutations.append(tuple(t.node.ctx.axes))
        elif tuple(parent.shape) != tuple(t.shape):
            break
        t = parent
    for axes in reversed(permutations):
        names = tuple(names[a] for a in axes)
    return names
