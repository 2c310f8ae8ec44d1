"""One row measured: each side's first step (and its loss), its peak memory over one step, then
its steps timed in interleaved rounds.

Every side of a row lives in this one process, on one GPU. A sample is ``calls`` steps between two
synchronizations of the device, divided by ``calls``: what a training loop that runs step after
step gets, with no wait between steps (a single step's time would add the launch of its first
kernel and the wait for its last). ``calls`` is picked per side from its second step so that a
sample lasts about `target` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..harness import Timing
from .runtimes import Peak, Runtime

__all__ = ["Contender", "Measured", "measure"]


@dataclass(frozen=True)
class Contender:
    """One side of a row: a name for the table, the runtime of its library, and `step`, which
    takes one step and (`gives_loss`) returns its loss (a tensor or a float)."""

    name: str
    runtime: Runtime
    step: Callable[[], object]
    gives_loss: bool = False


@dataclass(frozen=True)
class Measured:
    """A row's figures: the sides' names in the row's order, each side's first loss (None: no
    loss) and Peak (None: not measured) by name, and its seconds per step, one sample per round."""

    names: tuple[str, ...]
    losses: dict[str, float | None]
    peaks: dict[str, Peak | None]
    timing: Timing


def _first_loss(contender: Contender) -> float | None:
    """Take the first step (CuPy compiles its kernels here) and give its loss, with nothing of the
    step left alive (the loss's graph would count in the next peak's memory)."""
    loss = contender.step()
    contender.runtime.synchronize()
    if not contender.gives_loss:
        return None
    return float(loss.item()) if hasattr(loss, "item") else float(loss)


def _seconds(contender: Contender, calls: int) -> float:
    synchronize = contender.runtime.synchronize
    synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        contender.step()
    synchronize()
    return (time.perf_counter() - start) / calls


def measure(contenders: list[Contender], rounds: int, target: float) -> Measured:
    """The first step of each side (its loss), a second to pick its calls per sample, one under
    its runtime's memory reading, then `rounds` interleaved rounds of one sample per side."""
    losses = {c.name: _first_loss(c) for c in contenders}
    calls = {c.name: max(1, round(target / max(_seconds(c, 1), 1e-9))) for c in contenders}
    peaks = {c.name: c.runtime.peak_of(c.step) for c in contenders}
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for _ in range(rounds):
        for c in contenders:
            samples[c.name].append(_seconds(c, calls[c.name]))
    return Measured(tuple(samples), losses, peaks, Timing(samples))
