"""The rows of ``python -m benchmarks.gpu``: what each builds on each side, the lines of the table
it gives, and the targets of issue 41 ("The GPU at PyTorch's pace") each line is held to.

A row's ``build(sizes, place)`` gives its contenders, built where `place` says; ``sizes`` is the
row's own (the issue's shapes) or smaller ones (the tests). A Line compares two contenders of a
row, by their place in that list: A is ours, B what it is measured against (PyTorch, or ours in
another form or on the CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import specs
from .measure import Contender
from .models import GPT2, SMOLLM, twins
from .runtimes import Place, Runtime

__all__ = ["ROWS", "Line", "Row", "Target"]

# The train command's run length for the reverse row's steps: long enough that no timed step is
# refused as past the end (the learning rate's schedule does not change a step's work).
COMMAND_STEPS = 10**9


@dataclass(frozen=True)
class Target:
    """A bound on a line's ratio: ``ratio SIGN bound``, SIGN one of ≥, > and ≤."""

    sign: str
    bound: float

    def met(self, ratio: float) -> bool:
        return {"≥": ratio >= self.bound, ">": ratio > self.bound, "≤": ratio <= self.bound}[self.sign]

    def __str__(self) -> str:
        return f"{self.sign} {self.bound:g}"


@dataclass(frozen=True)
class Line:
    """A line of the table: contender `a` (its index in the row's list) against `b`. `speed`
    bounds B's time / A's (the median over rounds); `memory` bounds A's memory / B's, either the
    whole peak (``memory_of="peak"``: everything the library holds at the step's high point) or
    what the step added to what was held before it (``"step"``)."""

    label: str
    a: int
    b: int
    speed: Target | None = None
    memory: Target | None = None
    memory_of: str = "peak"


@dataclass(frozen=True)
class Row:
    """A row: its key (``--only``), its sizes, how its contenders are built, its lines."""

    key: str
    sizes: dict
    build: Callable[[dict, Place], list[Contender]]
    lines: tuple[Line, ...]


def _ours(name: str, sizes: dict, place: Place, label: str = "ours", loss: bool = False) -> Contender:
    """Workload `name` of ``benchmarks/sides/ours.py`` (the CPU suite's), on our device."""
    from ..sides import ours

    bench = ours.build(name, sizes, np.float32, device=place.ours_device)
    return Contender(label, place.ours, bench.step, loss)


def _torch(name: str, sizes: dict, place: Place, label: str = "PyTorch", loss: bool = False) -> Contender:
    """Workload `name` of ``benchmarks/sides/peer_torch.py``, PyTorch's twin, on its device."""
    from ..sides import peer_torch

    bench = peer_torch.build(name, sizes, np.float32, device=place.torch_device)
    return Contender(label, place.torch, bench.step, loss)


def _nanogpt(sizes: dict, place: Place) -> list[Contender]:
    return [_ours("train", sizes, place, loss=True), _torch("train", sizes, place, loss=True)]


def _chain(sizes: dict, place: Place) -> list[Contender]:
    return [_ours("chain", sizes, place), _torch("chain", sizes, place)]


def _attention(sizes: dict, place: Place) -> list[Contender]:
    """Ours fused (one op, the (n, n) matrix held) and flash, PyTorch's SDPA and written out."""
    return [_ours("attention", {**sizes, "kernel": "plain"}, place, "ours fused"),
            _ours("attention", {**sizes, "kernel": "flash"}, place, "ours flash"),
            _torch("attention", sizes, place, "PyTorch SDPA"),
            _torch("attention", {**sizes, "kernel": "written"}, place, "PyTorch written out")]


def _command_step(sizes: dict, device: str, runtime: Runtime, label: str) -> Contender:
    """A step of ``tinygrad-attn train reverse --device DEVICE`` (`sizes`: TrainConfig's fields),
    taken by the command's own ``train()``, batch drawn, loss read and gradients clipped included."""
    from tinygrad_attn.training import TrainConfig, TrainState, make_model, train
    from tinygrad_attn.training.tasks import get_task

    config = TrainConfig(**sizes, device=device, steps=COMMAND_STEPS)
    task = get_task("reverse")
    model = make_model(task, config)
    state = TrainState.fresh(model, config)

    def step() -> float:
        train(model, task, config, state=state, stop_after=1)
        return state.history.loss[-1]
    return Contender(label, runtime, step, gives_loss=True)


def _reverse(sizes: dict, place: Place) -> list[Contender]:
    return [_command_step(sizes, place.ours_device, place.ours, "ours on the GPU"),
            _command_step(sizes, "cpu", place.host, "ours on the CPU")]


def _attention_lines(n: int) -> tuple[Line, ...]:
    label = f"causal attention fwd + bwd, b 4, h 8, d 64, n = {n}"
    lines = (Line(f"{label}: fused vs SDPA", 0, 2, speed=Target("≥", 0.5), memory_of="step"),
             Line(f"{label}: flash vs SDPA", 1, 2, memory_of="step"),
             Line(f"{label}: fused vs written out", 0, 3, memory_of="step"))
    if n >= 4096:       # flash against our own fused kernel: as fast, in a quarter of the memory
        lines += (Line(f"{label}: flash vs our fused", 1, 0, speed=Target("≥", 1), memory=Target("≤", 0.25),
                       memory_of="step"),)
    return lines


ROWS = {row.key: row for row in (
    Row("gpt2", dict(GPT2), twins,
        (Line("GPT-2 124M shape, batch 8 × 512, forward + backward + AdamW", 0, 1,
              speed=Target("≥", 0.8), memory=Target("≤", 1.2)),)),
    Row("smollm", dict(SMOLLM), twins,
        (Line("SmolLM-135M shape (30 layers, GQA 9/3, tied), batch 8 × 512, same step", 0, 1,
              speed=Target("≥", 0.7), memory=Target("≤", 1.2)),)),
    Row("nanogpt", dict(specs.NANOGPT), _nanogpt,
        (Line("nanoGPT's laptop model (4 × 128, block 64, batch 12), a train step (Adam)", 0, 1,
              speed=Target("≥", 0.5)),)),
    Row("reverse", {"d_model": 64, "num_layers": 2, "batch_size": 64}, _reverse,
        (Line("`train reverse` step (d 64, 2 layers, batch 64): the GPU vs the same machine's CPU", 0, 1,
              speed=Target(">", 1)),)),
    Row("attention1024", {"batch": 4, "heads": 8, "n": 1024}, _attention, _attention_lines(1024)),
    Row("attention4096", {"batch": 4, "heads": 8, "n": 4096}, _attention, _attention_lines(4096)),
    Row("chain", {"length": 200, "shape": (64, 64)}, _chain,
        (Line("200 small ops (64 × 64) + backward", 0, 1),)),
)}
