"""The workloads of issue 12, each returning the rows it prints.

Every workload builds the same inputs (from one seed) for both libraries, then times them with
``harness.interleave``. `torch_side` is the module ``benchmarks.torch_side`` or None when PyTorch
is not importable; then only tinygrad_attn's figures are printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn, optim

from .harness import Row, interleave, ms

TRAIN = {"vocab": 16, "d_model": 64, "heads": 4, "layers": 2, "d_ff": 256, "batch": 64, "seq": 32}


@dataclass
class Settings:
    """How long to measure: rounds per workload, sizes, the training run's length, idling."""

    rounds: int
    attention_sizes: tuple[int, ...]
    memory_size: int
    chain_length: int
    reverse_steps: int | None       # None: the default TrainConfig (the run)
    idle: float
    gqa_size: int                   # n of the grouped-query attention rows
    window_size: tuple[int, int]    # (n, window) of the sliding-window row
    llama_batch: int                # sequences per step of the --arch llama row (64: the train command's)


def _ours_train_step(ids: np.ndarray, targets: np.ndarray):
    ta.manual_seed(0)
    model = nn.TinyTransformer(TRAIN["vocab"], TRAIN["d_model"], TRAIN["heads"], TRAIN["layers"],
                               max_len=TRAIN["seq"], d_ff=TRAIN["d_ff"])
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    ids_t, targets_t = ta.Tensor(ids), ta.Tensor(targets)

    def step() -> None:
        loss = F.cross_entropy(model(ids_t), targets_t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def blas_floor_products() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(A shape, B shape) of every matrix product one train step must do: each Linear's forward
    X W, and backward dY Wᵀ and Xᵀ dY; attention's S = Q Kᵀ, O = P V forward and dP = dO Vᵀ,
    dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q backward, over batch × heads."""
    n, d, f, v = TRAIN["batch"] * TRAIN["seq"], TRAIN["d_model"], TRAIN["d_ff"], TRAIN["vocab"]
    t, heads = TRAIN["seq"], TRAIN["batch"] * TRAIN["heads"]
    dh = d // TRAIN["heads"]
    linears = [(d, d)] * 4 + [(d, f), (f, d)]
    products = []
    for fan_in, fan_out in linears * TRAIN["layers"] + [(d, v)]:
        products += [((n, fan_in), (fan_in, fan_out)), ((n, fan_out), (fan_out, fan_in)),
                     ((fan_in, n), (n, fan_out))]
    attention = [((heads, t, dh), (heads, dh, t)), ((heads, t, t), (heads, t, dh)),      # S, O
                 ((heads, t, dh), (heads, dh, t)), ((heads, t, t), (heads, t, dh)),      # dP, dV
                 ((heads, t, t), (heads, t, dh)), ((heads, t, t), (heads, t, dh))]       # dQ, dK
    return products + attention * TRAIN["layers"]


def _blas_floor():
    """numpy.matmul over preallocated float32 operands and outputs: the GEMMs and nothing else."""
    rng = np.random.default_rng(0)
    triples = []
    for a_shape, b_shape in blas_floor_products():
        a, b = (rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape))
        out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        triples.append((a, b, np.empty(out_shape, dtype=np.float32)))

    def products() -> None:
        for a, b, out in triples:
            np.matmul(a, b, out=out)
    return products


def train_step(settings: Settings, torch_side) -> list[Row]:
    """One TinyTransformer step (forward, cross-entropy, backward, Adam), and the BLAS floor."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, TRAIN["vocab"], (TRAIN["batch"], TRAIN["seq"]))
    targets = rng.integers(0, TRAIN["vocab"], (TRAIN["batch"], TRAIN["seq"]))
    contestants = {"ours": _ours_train_step(ids, targets), "floor": _blas_floor()}
    if torch_side is not None:
        contestants["torch"] = torch_side.train_step(TRAIN, ids, targets)
    timing = interleave(contestants, settings.rounds, warmup=2, idle=settings.idle)
    floor_note = f"ours = {timing.ratio('ours', 'floor'):.2f}× the BLAS floor"
    has_torch = torch_side is not None
    return [Row("train step (TinyTransformer, Adam)", ms(timing.median("ours")),
                ms(timing.median("torch")) if has_torch else None,
                timing.ratio("ours", "torch") if has_torch else None, floor_note),
            Row("BLAS floor (numpy.matmul, the step's GEMMs)", ms(timing.median("floor")),
                ms(timing.median("torch")) if has_torch else None,
                timing.ratio("floor", "torch") if has_torch else None,
                f"{len(blas_floor_products())} products; PyTorch column: its whole train step")]


def attention(settings: Settings, torch_side) -> list[Row]:
    """Causal attention forward + backward, batch 1, 4 heads, d_head 64, both kernels."""
    rows = []
    for n in settings.attention_sizes:
        rng = np.random.default_rng(0)
        q, k, v, d_out = (rng.standard_normal((1, 4, n, 64)).astype(np.float32) for _ in range(4))
        leaves = [ta.Tensor(a, requires_grad=True) for a in (q, k, v)]

        def kernel_pass(fn, leaves=leaves, d_out=d_out):
            def one_pass() -> None:
                for t in leaves:
                    t.zero_grad()
                fn(*leaves, is_causal=True).backward(d_out)
            return one_pass
        contestants = {"plain": kernel_pass(F.scaled_dot_product_attention),
                       "flash": kernel_pass(F.flash_attention)}
        if torch_side is not None:
            contestants.update(torch_side.attention_passes(q, k, v, d_out))
        timing = interleave(contestants, settings.rounds, warmup=1, idle=settings.idle)
        pairs = ((("plain", "torch math"), ("plain", "torch sdpa"), ("flash", "torch math"),
                  ("flash", "torch sdpa")) if torch_side is not None else (("plain", None), ("flash", None)))
        for ours, theirs in pairs:
            rows.append(Row(f"attention fwd+bwd n={n}: {ours} vs {theirs or '-'}", ms(timing.median(ours)),
                            ms(timing.median(theirs)) if theirs else None,
                            timing.ratio(ours, theirs) if theirs else None))
    return rows


def op_overhead(settings: Settings, torch_side) -> list[Row]:
    """`chain_length` elementwise ops (·w, tanh, alternately) on (8, 8), then backward."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal((8, 8))).astype(np.float32)
    xt, wt = ta.Tensor(x, requires_grad=True), ta.Tensor(w)

    def chain() -> None:
        xt.zero_grad()
        y = xt
        for _ in range(settings.chain_length // 2):
            y = (y * wt).tanh()
        y.sum().backward()
    contestants = {"ours": chain}
    if torch_side is not None:
        contestants["torch"] = torch_side.op_chain(x, w, settings.chain_length)
    timing = interleave(contestants, settings.rounds, warmup=2, inner=5, idle=settings.idle)
    has_torch = torch_side is not None
    return [Row(f"op overhead: {settings.chain_length} elementwise ops on (8, 8) + backward",
                ms(timing.median("ours")), ms(timing.median("torch")) if has_torch else None,
                timing.ratio("ours", "torch") if has_torch else None,
                f"{timing.median('ours') / settings.chain_length * 1e6:.1f} µs per op (ours, fwd+bwd)")]


def peak(kernel: str, n: int, *more: str) -> dict[str, float]:
    """What ``python -m benchmarks.memory KERNEL N [MORE]`` measures in a fresh process."""
    # glibc returns allocations of 64 KiB and more to the system when freed (instead of keeping
    # them for reuse), so that the resident size follows what is live, the same for both libraries.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", kernel, str(n), *more], check=True,
                         capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout)


def peak_memory(settings: Settings, torch_side) -> list[Row]:
    """Peak memory of one causal fwd+bwd at n = memory_size, 1 head (see benchmarks/memory.py)."""
    n = settings.memory_size
    peaks = {kernel: peak(kernel, n) for kernel in ("plain", "flash")}
    if torch_side is not None:
        peaks.update({kernel: peak(kernel, n) for kernel in ("torch-math", "torch-sdpa")})
    rows = []
    for ours, theirs in (("plain", "torch-math"), ("flash", "torch-sdpa")):
        mine = peaks[ours]
        has_torch = theirs in peaks
        rows.append(Row(f"peak memory n={n}, 1 head: {ours} vs {theirs if has_torch else '-'}",
                        f"{mine['rss_mib']:.1f} MiB",
                        f"{peaks[theirs]['rss_mib']:.1f} MiB" if has_torch else None,
                        mine["rss_mib"] / peaks[theirs]["rss_mib"] if has_torch else None,
                        f"peak RSS growth; tracemalloc {mine['tracemalloc_mib']:.1f} MiB"))
    rows.append(Row(f"peak memory n={n}: flash / plain (ours)", "", None,
                    peaks["flash"]["tracemalloc_mib"] / peaks["plain"]["tracemalloc_mib"],
                    "tracemalloc ratio; target ≤ 1/8"))
    return rows


def train_reverse(settings: Settings, torch_side) -> list[Row]:
    """`tinygrad-attn train reverse` with default flags, run as the command itself (in a child
    process, as a user runs it): its training seconds and held-out accuracy, as it reports them."""
    quick = [] if settings.reverse_steps is None else ["--steps", str(settings.reverse_steps),
                                                       "--eval-size", "20"]
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run([sys.executable, "-m", "tinygrad_attn", "train", "reverse", *quick,
                              "--out", str(Path(folder) / "reverse")], check=True, capture_output=True,
                             text=True, cwd=Path(__file__).resolve().parents[1])
    # "reverse: held-out exact-match accuracy 100.00% on 500 sequences after 1000 steps (20.4 s of training)"
    found = re.search(r"accuracy ([\d.]+%) on (\d+) sequences after (\d+) steps \(([\d.]+) s of training\)",
                      run.stdout)
    if found is None:
        raise RuntimeError(f"train reverse printed no accuracy line:\n{run.stdout}\n{run.stderr}")
    accuracy, held_out, steps, seconds = found.groups()
    label = "default flags" if settings.reverse_steps is None else "quick"
    return [Row(f"train reverse ({steps} steps, {label})", f"{seconds} s", None, None,
                f"held-out exact match {accuracy} on {held_out}; target 100% in ≤ 30 s")]


WORKLOADS = {"train": train_step, "attention": attention, "overhead": op_overhead,
             "memory": peak_memory, "reverse": train_reverse}
