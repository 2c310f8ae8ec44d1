"""A real model's backward pass on your own text, as the example graph of ``step``, ``graph`` and
``explore`` (``--model PATH --text "…"``).

The loss is that of predicting each next token of the text (the mean cross-entropy over its
positions 1 … n−1). One block, ``layer`` (default the last), runs op by op, so its attention is
stepped at matrix level with the tokens labelling rows and columns; every other block is folded
(``nn.fold``): one backward step each, its parameters' gradients still exact. That keeps a
30-layer model's pass to a few dozen steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..nn import TinyTransformer, fold
from ..tensor import Tensor
from ..text import visible
from ..viz.example_graphs import Example

__all__ = ["text_example"]


def text_example(model: TinyTransformer, tokenizer: Any, text: str, layer: int | None = None,
                 head: int | None = None, fused: bool = True) -> Example:
    """The example graph of `model` on `text`: block `layer` op by op, `head` the one head whose
    matrices are printed (None: all; a negative layer or head counts from the end), `fused`
    attention as one op.

    Raises:
        ValueError: no tokenizer, a text of fewer than 2 tokens or more than the model's max_len,
            a model without layers, a layer or head the model does not have.
    """
    if tokenizer is None:
        raise ValueError("the model folder has no tokenizer.json, so the text cannot be made into tokens")
    ids = tokenizer.encode(text)
    if not 2 <= len(ids) <= model.max_len:
        raise ValueError(f"--text {text!r} is {len(ids)} token{'' if len(ids) == 1 else 's'}; the loss "
                         f"predicts each next token, so give 2 to {model.max_len} (the model's max_len)")
    n = len(model.blocks)
    if n == 0:
        raise ValueError("the model has no layers (its config gives 0), so there is no block to step")
    chosen = n - 1 if layer is None else layer + n if layer < 0 else layer
    if not 0 <= chosen < n:
        raise ValueError(f"--layer {layer}: the model has {n} layers (0 to {n - 1}, or -1 for the last)")
    attn = model.blocks[chosen].attn
    shown = None if head is None else head + attn.num_heads if head < 0 else head
    if shown is not None and not 0 <= shown < attn.num_heads:
        raise ValueError(f"--head {head}: layer {chosen} has {attn.num_heads} heads "
                         f"(0 to {attn.num_heads - 1}, or -1 for the last)")
    model.eval()
    attn.fused = fused
    ids_array = np.array([ids])
    with model.scope():
        x = model.embed(Tensor(ids_array))                              # (1, T, D)
        for i, block in enumerate(model.blocks):
            x = block(x, is_causal=True) if i == chosen else fold(block, x, is_causal=True)
        logits = model.head(model.ln_f(x))                              # (1, T, V)
        logits.name = "logits"
    loss = F.cross_entropy(logits[0, :-1], ids_array[0, 1:])
    loss.name = "loss"
    tokens = tuple(visible(t) for t in tokenizer.tokens(ids))
    known = min(tokenizer.vocab_size, logits.shape[-1])    # a model may have more logits than tokens
    vocab = tuple(visible(t) for t in tokenizer.tokens(range(known))) + \
        tuple(f"#{i}" for i in range(known, logits.shape[-1]))                     # logits' columns
    return Example(loss=loss, model=model, tokens=tokens, head=shown, vocab=vocab,
                   intro=_intro(text, ids, tokens, logits, chosen, n, shown, attn.num_heads))


def _intro(text: str, ids: list[int], tokens: tuple[str, ...], logits: Tensor, layer: int, layers: int,
           head: int | None, heads: int) -> str:
    z = logits.numpy()[0].astype(np.float64)                            # (T, V)
    z = z - z.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    heads_shown = f"head {head} of {heads} printed" if head is not None else f"all {heads} heads printed"
    quoted = [f"'{token}'" for token in tokens]            # labels are escaped already: no repr
    lines = [f"text {text!r}: {len(ids)} tokens " + " ".join(f"{t}({i})" for t, i in zip(quoted, ids)),
             f"layer {layer} of 0…{layers - 1} is stepped op by op ({heads_shown}); the other "
             f"{layers - 1} blocks are folded, one step each.",
             "next-token predictions (the loss is their mean −log p):"]
    for t in range(len(ids) - 1):
        p = float(np.exp(log_p[t, ids[t + 1]]))
        lines.append(f"  after {quoted[t]:>12} → {quoted[t + 1]:<12} p = {p:.4f}, −log p = "
                     f"{-log_p[t, ids[t + 1]]:.4f}")
    return "\n".join(lines)
