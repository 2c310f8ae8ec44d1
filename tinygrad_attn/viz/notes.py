"""The stepper's notes: why a gradient is exactly zero, and which parts a gradient sums.

Exact zeros look like bugs to a learner unless something says why. These are the known reasons:
a masked (causal) score has probability 0 and so gradient 0; a one-hot softmax row passes no
gradient back to its scores; a bias added to every key is invisible to softmax; relu's slope is 0
where its input is negative. A tensor used by several ops gets the sum of their gradients.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engine
from ..backend import to_numpy
from ..labels import scope_name, tensor_label
from .matrices import format_number, head_of, lead_label

__all__ = ["Notes", "TINY", "attention_zeros", "broadcast_matmul_sums", "is_parameter", "shared_kv_heads"]


TINY = 1e-5         # a gradient this small relative to the one arriving counts as zero (rounding)


def is_parameter(t: Any) -> bool:
    """A named leaf that takes a gradient: a module's parameter (named ``blocks.0.attn.q_proj.weight``
    when its model is first called) or a tensor the user named. Read from the tensor alone, so the
    stepper needs nothing from ``nn``."""
    return t is not None and t.is_leaf and t.requires_grad and bool(t.name)


class Notes:
    """Follows a backward pass step by step and explains each step's zeros and sums.

    Args:
        order: the step number of each op output (``id(tensor)`` → index).
    """

    def __init__(self, order: dict[int, int]):
        self.order = order
        self.parts: dict[int, list[tuple[str, Any]]] = {}     # id(tensor) → (source, gradient sent)

    def explain(self, index: int, event: engine.BackwardEvent, insides: tuple, tokens: Any,
                head: int | None = None) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]:
        """(notes, parts) of step `index`; `parts` are (source, gradient) when several ops sent one;
        `head`: notes on per-head matrices name only that head's (the ones the stepper prints)."""
        t, node = event.tensor, event.tensor.node
        assert node is not None                 # backward visits only tensors an op made
        parts = tuple(self.parts.pop(id(t), ()))
        notes = []
        if len(parts) > 1:
            notes.append(f"dL/d({tensor_label(t) if t.name else 'this output'}) is the sum of the "
                         f"{len(parts)} gradients its consumers sent: " + " + ".join(s for s, _ in parts))
        for i, (parent, g) in enumerate(zip(node.parents, event.sent)):
            if parent is not None and g is not None:
                self.parts.setdefault(id(parent), []).append(
                    (f"step {index} ({node.op.name}{_in(node)}, input {i})", g))
        inside = {i.symbol: to_numpy(i.array) for i in insides}
        if "P" in inside and "dS" in inside:
            notes += attention_zeros(inside["P"], inside["dS"], inside.get("S"), tokens, "dQ", head,
                                     inside.get("dP"))
        elif node.op.name == "softmax" and event.sent[0] is not None:
            scores = _masked_scores(node)
            if node.parents[1] is not None:
                notes.append(f"the input {tensor_label(node.parents[0])} holds the scores before "
                             "masking: softmax applies the keep mask inside, so −inf shows nowhere here; "
                             "the fused attention step (without --unfused) prints S with −inf at the "
                             "masked cells")
            notes += attention_zeros(to_numpy(t.data), to_numpy(event.sent[0]), scores, tokens, None, head,
                                     to_numpy(event.grad))
        notes += shared_kv_heads(node, inside, event)
        notes += broadcast_matmul_sums(node, event)
        notes += _key_bias_zero(t, node, event)
        if node.op.name == "getitem" and event.sent[0] is not None:
            notes += _unpicked_zero(node)
        if node.op.name == "relu" and event.sent[0] is not None:
            off = int((to_numpy(node.parents[0].data) <= 0).sum())
            x = node.parents[0].name or "x"
            if off:
                notes.append(f"dL/d{x if len(x) == 1 else f'({x})'} is 0 at the {off} position(s) where "
                             f"{x} ≤ 0: relu's slope is 0 there")
        return tuple(notes), parts if len(parts) > 1 else ()


def _in(node: Any) -> str:
    name = scope_name(node.scope)
    return f" in {name}" if name else ""


def _masked_scores(node: Any) -> np.ndarray:
    """The softmax step's logits as its op saw them: −inf where the keep mask is False."""
    x = to_numpy(node.parents[0].data)
    keep, bias = (None if p is None else to_numpy(p.data) for p in node.parents[1:])
    z = x if bias is None else x + bias
    return z if keep is None else np.where(keep, z, -np.inf)


def attention_zeros(p: np.ndarray, ds: np.ndarray, scores: np.ndarray | None, tokens: Any,
                    query_grad: str | None, head: int | None = None, dp: np.ndarray | None = None
                    ) -> list[str]:
    """Notes on the zeros of dS = P ⊙ (dP − rowsum(dP ⊙ P)): masked cells, rows whose P is
    one-hot, rows whose dP is 0. Each row is named as the stepper captions its matrix ('batch 0,
    head 3'); with `head`, only that head's matrices (the ones printed) are noted. A one-hot row's
    dS is 0 in exact arithmetic; where float rounding leaves a few units in the last place (D is
    dP's entry at the one key summed in another order), the note says so and gives the value."""
    notes, shape = [], p.shape
    lead = list(np.ndindex(shape[:-2]))
    p, ds = p.reshape(-1, *p.shape[-2:]), ds.reshape(-1, *ds.shape[-2:])       # one matrix each
    dp = None if dp is None else dp.reshape(p.shape)
    if scores is not None:
        masked = np.isneginf(np.broadcast_to(scores, shape)).reshape(p.shape)
        if masked.any():
            per_matrix = int(masked[0].sum()) if (masked == masked[0]).all() else None
            count = f"{per_matrix} masked cells of each matrix" if per_matrix is not None and len(p) > 1 \
                else f"{int(masked.sum())} masked cells"
            notes.append(f"P and dS are exactly 0 at the {count} (scores set to −inf by the mask, e.g. "
                         f"keys after the query under the causal mask): a masked key gets probability 0 "
                         f"and no gradient; dP = dO Vᵀ is computed at every cell, so it need not be 0 "
                         f"there, and P ⊙ (dP − D) removes it")
    names = list(tokens) if tokens is not None and len(tokens) == p.shape[-2] else None
    shown = [(m, index) for m, index in enumerate(lead or [()])
             if head is None or head_of(index, shape, None) in (None, head)]     # the matrices printed
    found: dict[tuple[str, int, int], list[tuple[str, float]]] = {}   # (kind, row, key) → (matrix, |dS|)
    for m, index in shown:
        caption = f"[{lead_label(index, shape, None, tokens)}]" if index else ""
        for row in range(p.shape[-2]):
            nonzero = np.flatnonzero(p[m, row])
            largest = float(np.abs(ds[m, row]).max())
            if len(nonzero) == 0:
                kind, key = "masked", -1
            elif dp is not None and not dp[m, row].any():
                kind, key = "no gradient", -1
            elif len(nonzero) == 1 and p[m, row, nonzero[0]] == 1:
                scale = float(np.abs(dp[m, row]).max()) if dp is not None else largest
                kind = "one-hot" if largest == 0 else "one-hot, rounded" if largest <= TINY * scale else ""
                key = int(nonzero[0])
            else:
                continue
            if kind:
                found.setdefault((kind, row, key), []).append((caption, largest))
    dq = f", and so is that row of {query_grad} = scale · dS K" if query_grad else ""
    for (kind, row, key), found_in in found.items():
        where = "" if len(lead) <= 1 else " in every matrix" if len(found_in) == len(shown) > 1 else \
            " in " + ", ".join(caption for caption, _ in found_in)
        what = f"row {_position(names, row)}"
        if kind == "masked":
            notes.append(f"{what} of P is all 0{where} (every key masked): its output and gradients are 0")
            continue
        if kind == "no gradient":
            notes.append(f"{what} of dP is 0{where}, so that row of dS is 0{dq}: no gradient arrives at "
                         f"this query's output (that row of dO is 0, as at the last position, whose next "
                         f"token the loss does not predict)")
            continue
        seen = _position(names, key) if names and p.shape[-1] == len(names) else str(key)
        why = (f"the query sees only key {seen} (its P row is one-hot), and dS = P ⊙ (dP − "
               f"rowsum(dP ⊙ P)) = 0 when one P is 1 and the rest 0")
        if kind == "one-hot":
            notes.append(f"{what} of dS is 0{where}{dq}: {why}")
        else:
            values = ", ".join(format_number(v) for _, v in found_in)
            small = f", and that row of {query_grad} = scale · dS K as small" if query_grad else ""
            notes.append(f"{what} of dS is 0 up to float rounding{where} (largest |value| {values}){small}: "
                         f"{why}; but D = rowsum(dO ⊙ O) is dP's entry at that key, dO · V, summed in "
                         f"another order, so dP − D keeps a few units in the last place")
    return notes


def _position(names: list[str] | None, i: int) -> str:
    """A row or column by its token, with its position where the token occurs more than once:
    "'cat'", "'t' (position 6)"."""
    if names is None:
        return str(i)
    return repr(names[i]) + (f" (position {i})" if names.count(names[i]) > 1 else "")


def shared_kv_heads(node: Any, inside: dict[str, np.ndarray], event: engine.BackwardEvent) -> list[str]:
    """Grouped-query attention: which query heads read each kv head, and dK, dV as sums over them.

    In the grouped view q is (B, Hkv, G, T, D) and k, v are (B, Hkv, 1, S, D): a kv head is
    broadcast over its G query heads, so the gradient sent to it is the sum of the G parts the
    backward computed (the inside dK and dV, one matrix per query head).
    """
    if node.op.name not in ("scaled_dot_product_attention", "flash_attention"):
        return []
    q, k = node.parents[0], node.parents[1]
    if "dK" not in inside and "dV" not in inside or q.ndim != 5 or k.ndim != 5 or k.shape[2] != 1 \
            or q.shape[2] == 1:
        return []
    group = q.shape[2]
    notes = [f"kv head {j} is read by query heads {', '.join(str(j * group + g) for g in range(group))}"
             for j in range(k.shape[1])]
    for symbol, position in (("dK", 1), ("dV", 2)):
        if symbol not in inside or event.sent[position] is None:
            continue
        parts = inside[symbol][0, 0, :, 0, :]                           # batch 0, kv head 0, row 0
        column = int(np.abs(parts).sum(axis=0).argmax())
        summed = to_numpy(event.sent[position])[0, 0, 0, 0, column]
        terms = " + ".join(format_number(v) for v in parts[:, column])
        notes.append(f"{symbol} of a shared kv head is the sum of its query heads' parts (the inside "
                     f"{symbol} above, one matrix per query head): e.g. kv head 0, row 0, column {column}: "
                     f"{terms} = {format_number(summed)}")
    return notes


def broadcast_matmul_sums(node: Any, event: engine.BackwardEvent) -> list[str]:
    """A matmul input broadcast over batch axes gets the sum of its parts over them.

    Unfused grouped-query attention multiplies P (B, Hkv, G, T, T) by V (B, Hkv, 1, T, D), and
    Q by Kᵀ the same way: one kv head serves the G query heads of its group. dB = Aᵀ dC is then
    one matrix per query head, summed over the group; the formula alone does not say so.
    """
    if node.op.name != "matmul":
        return []
    grad = to_numpy(event.grad)
    arrays = [to_numpy(p.data) for p in node.parents]
    notes = []
    for position, (parent, sent) in enumerate(zip(node.parents, event.sent)):
        x = arrays[position]
        if sent is None or x.ndim < 3 or grad.ndim != x.ndim or x.shape[:-2] == grad.shape[:-2]:
            continue
        summed = [axis for axis in range(x.ndim - 2) if x.shape[axis] == 1 and grad.shape[axis] > 1]
        if len(summed) != 1:
            continue
        axis = summed[0]
        a, b = arrays
        parts = np.swapaxes(a, -1, -2) @ grad if position == 1 else grad @ np.swapaxes(b, -1, -2)
        symbol, other = ("dB", "Aᵀ dC") if position == 1 else ("dA", "dC Bᵀ")
        lead = [0] * (x.ndim - 2)
        terms = []
        for g in range(grad.shape[axis]):
            lead[axis] = g
            terms.append(parts[tuple(lead)][0])
        column = int(np.abs(np.array(terms)).sum(axis=0).argmax())
        total = to_numpy(sent)[(0,) * (x.ndim - 1) + (column,)]
        heads = x.ndim == 5 and axis == 2               # attention's grouped view
        group = f"the {grad.shape[axis]} query heads that share kv head 0" if heads \
            else f"the {grad.shape[axis]} entries of axis {axis}"
        why = ("one matrix per query head, added over them: a shared kv head's dK and dV are the sums "
               "of its query heads' parts") if heads else "one matrix per entry, added over them"
        notes.append(f"{symbol} for {tensor_label(parent)} is a sum: it was broadcast to {group}, so "
                     f"{other} is {why}. E.g. row 0, column {column}: "
                     + " + ".join(_term(float(t[column])) for t in terms)
                     + f" = {format_number(float(total))}")
    return notes


def _term(value: float) -> str:
    """A number in a written sum: negative ones in parentheses, 0.1 + (−0.2)."""
    return f"({format_number(value)})" if value < 0 else format_number(value)


def _unpicked_zero(node: Any) -> list[str]:
    """Elements an index never picks get no gradient (an embedding's rows for absent ids)."""
    x = node.parents[0]
    picked = np.zeros(x.shape, dtype=bool)
    picked[node.ctx.index] = True
    if picked.all():
        return []
    name = tensor_label(x)
    rows = np.flatnonzero(~picked.reshape(len(picked), -1).any(axis=1)) if x.ndim > 1 else np.array([], int)
    which = f"rows {rows.tolist()} (ids that do not occur in the input)" if len(rows) and \
        (~picked).sum() == len(rows) * picked[0].size else f"{int((~picked).sum())} elements"
    return [f"dL/d({name}) is 0 in {which}: the index never picked them, so no gradient flows there"]


def _key_bias_zero(t: Any, node: Any, event: engine.BackwardEvent) -> list[str]:
    """A key projection's bias gets a zero gradient: softmax ignores a constant shift of a row."""
    path = scope_name(node.scope) or ""
    if node.op.name not in ("add", "linear") or not (t.name == "K" or path.endswith("k_proj")):
        return []
    arriving = float(np.abs(to_numpy(event.grad)).max())
    notes = []
    for parent, g in zip(node.parents, event.sent):
        if is_parameter(parent) and g is not None and parent.ndim == 1 and arriving > 0:
            largest = float(np.abs(to_numpy(g)).max())
            if largest <= TINY * arriving:
                notes.append(f"dL/d({parent.name}) is 0 up to rounding (largest |value| "
                             f"{largest:.0e}): adding one vector b to every key adds q·b to every "
                             f"score of query q's row, a constant shift that softmax ignores "
                             f"(softmax(s + c) = softmax(s)), so the loss does not depend on b")
    return notes
