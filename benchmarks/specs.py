"""What each workload computes and on which inputs: one definition that every side builds from.

A workload is a name (``mlp``, ``chain``, ``attention``, ``train``; for ``benchmarks.modern``,
``modern_attention``, grouped-query attention and the sliding window, and ``train_command``, the
step of ``tinygrad-attn train``) and a dict of sizes. Every side (``benchmarks/sides/*.py``) calls
``inputs`` in its own process and gets the same arrays, from one seed, in the dtype asked for:
float64 for the check against the reference, float32 for timing. Weights are in tinygrad_attn's
layout (a linear layer's weight is (in, out)) and named as its ``state_dict`` names them; a side
with another layout converts.

This module imports only NumPy, so that a side's process loads nothing of the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

TRAIN = {"vocab": 16, "d_model": 64, "heads": 4, "layers": 2, "d_ff": 256, "batch": 64, "seq": 32}
LEARNING_RATE = {"mlp": 0.1, "train": 1e-3}     # SGD for the MLP, Adam for the transformer
# nanoGPT's configuration for a laptop CPU (its README), on the characters of Python's help topics
# (103 distinct): trained with AdamW at a constant rate, gradients clipped to norm 1.
NANOGPT = {"vocab": 103, "d_model": 128, "heads": 4, "layers": 4, "d_ff": 512, "batch": 12, "seq": 64}
TEXT_TRAINING = {"lr": 1e-3, "weight_decay": 0.01, "clip": 1.0}


@dataclass(frozen=True)
class Workload:
    """One row of the table: a key naming the row (``python -m benchmarks.profile KEY``), the
    workload's name, how the row is labelled, its sizes."""

    key: str
    name: str
    label: str
    sizes: dict = field(default_factory=dict)
    per: str = ""           # "op": the note gives our time per op (the chain)


def rows(quick: bool) -> list[Workload]:
    """The workloads of the table, in order; `quick` shrinks each to a few milliseconds."""
    if quick:
        return [Workload("mlp16", "mlp", "MLP 16→16→4, batch 8, cross-entropy, SGD step",
                         {"widths": (16, 16, 4), "batch": 8}),
                Workload("chain", "chain", "20 elementwise ops on (8, 8) + backward", {"length": 20},
                         per="op"),
                Workload("attention", "attention", "causal attention n = 32, 2 heads, fwd + bwd",
                         {"n": 32, "heads": 2, "kernel": "plain"}),
                Workload("train", "train", "TinyTransformer train step (Adam), 1 layer, batch 4 × 8",
                         {**TRAIN, "layers": 1, "batch": 4, "seq": 8})]
    return [Workload("mlp784", "mlp", "MLP 784→128→10, batch 64, cross-entropy, SGD step",
                     {"widths": (784, 128, 10), "batch": 64}),
            Workload("mlp16", "mlp", "MLP 16→16→4, batch 8, same step", {"widths": (16, 16, 4), "batch": 8}),
            Workload("chain", "chain", "200 elementwise ops on (8, 8) + backward", {"length": 200}, per="op"),
            Workload("attention", "attention", "causal attention n = 256, 4 heads, d 64, fwd + bwd",
                     {"n": 256, "heads": 4, "kernel": "plain"}),
            Workload("flash", "attention", "causal attention n = 2048, 4 heads: our flash kernel",
                     {"n": 2048, "heads": 4, "kernel": "flash"}),
            Workload("train", "train", "TinyTransformer train step (Adam), d 64, 2 layers, batch 64 × 32",
                     TRAIN)]


def inputs(name: str, sizes: dict, dtype: type) -> dict[str, np.ndarray]:
    """The arrays of workload `name` (float ones in `dtype`), the same in every process."""
    rng = np.random.default_rng(0)
    if name == "mlp":
        widths, batch = sizes["widths"], sizes["batch"]
        arrays = {"x": rng.standard_normal((batch, widths[0])),
                  "labels": rng.integers(0, widths[-1], batch)}
        for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:]), start=1):
            bound = 1 / math.sqrt(fan_in)
            arrays[f"fc{i}.weight"] = rng.uniform(-bound, bound, (fan_in, fan_out))
            arrays[f"fc{i}.bias"] = rng.uniform(-bound, bound, fan_out)
    elif name == "chain":
        shape = sizes.get("shape", (8, 8))      # benchmarks.gpu: (64, 64)
        arrays = {"x": rng.standard_normal(shape), "w": 1 + 0.1 * rng.standard_normal(shape)}
    elif name in ("attention", "modern_attention"):
        # modern_attention (benchmarks.modern): `kv_heads` key/value heads for `heads` query heads;
        # `batch` sequences (default 1)
        heads = {"q": sizes["heads"], "k": sizes.get("kv_heads", sizes["heads"])}
        heads.update(v=heads["k"], d_out=heads["q"])
        batch = sizes.get("batch", 1)
        arrays = {key: rng.standard_normal((batch, h, sizes["n"], 64)) for key, h in heads.items()}
    elif name == "train":
        arrays = {"ids": rng.integers(0, sizes["vocab"], (sizes["batch"], sizes["seq"])),
                  "targets": rng.integers(0, sizes["vocab"], (sizes["batch"], sizes["seq"])),
                  **transformer_weights(rng, sizes)}
    elif name == "train_command":
        arrays = {}                     # the command's own task batch, which only our side builds
    else:
        raise ValueError(f"benchmarks: unknown workload {name!r}")
    return {key: a.astype(dtype) if a.dtype.kind == "f" else a for key, a in arrays.items()}


def transformer_weights(rng: np.random.Generator, sizes: dict) -> dict[str, np.ndarray]:
    """TinyTransformer's parameters by their state_dict names: embeddings N(0, 1), linear layers
    uniform in ±1/√fan_in, layer norms ones and zeros (as the library initialises them)."""
    d, f, v = sizes["d_model"], sizes["d_ff"], sizes["vocab"]

    def linear(prefix: str, fan_in: int, fan_out: int) -> dict[str, np.ndarray]:
        bound = 1 / math.sqrt(fan_in)
        return {f"{prefix}.weight": rng.uniform(-bound, bound, (fan_in, fan_out)),
                f"{prefix}.bias": rng.uniform(-bound, bound, fan_out)}

    def norm(prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.weight": np.ones(d), f"{prefix}.bias": np.zeros(d)}

    weights = {"tok_emb.weight": rng.standard_normal((v, d)),
               "pos_emb.weight": rng.standard_normal((sizes["seq"], d))}
    for i in range(sizes["layers"]):
        block = f"blocks.{i}"
        weights.update(norm(f"{block}.ln1"))
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            weights.update(linear(f"{block}.attn.{proj}", d, d))
        weights.update(norm(f"{block}.ln2"))
        weights.update(linear(f"{block}.mlp.fc1", d, f))
        weights.update(linear(f"{block}.mlp.fc2", f, d))
    weights.update(norm("ln_f"))
    weights.update(linear("head", d, v))
    return weights


def text_batches(steps: int, sizes: dict, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(ids, targets), int64 (steps, batch, seq): random windows of the first 90% of Python's help
    topics as character ids (the characters sorted), targets the next characters: what
    ``tinygrad-attn train text`` trains on, drawn here so that a side's process loads nothing but
    NumPy (the text is tinygrad_attn.text.corpus.default_corpus's)."""
    from pydoc_data.topics import topics

    text = "".join(topics[name] for name in sorted(topics))
    chars = sorted(set(text))
    if len(chars) != sizes["vocab"]:
        raise ValueError(f"benchmarks: this Python's help topics have {len(chars)} characters, "
                         f"not {sizes['vocab']}")
    ids = np.searchsorted(np.array(chars), np.array(list(text)))                  # each character's id
    train = ids[:len(ids) - len(ids) // 10]
    starts = np.random.default_rng(seed).integers(0, len(train) - sizes["seq"], (steps, sizes["batch"]))
    windows = train[starts[..., None] + np.arange(sizes["seq"] + 1)]           # (steps, batch, seq + 1)
    return windows[..., :-1], windows[..., 1:]
