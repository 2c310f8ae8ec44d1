"""Timing in separate processes, interleaved, and the table the suite prints.

Each side of a comparison (tinygrad_attn, PyTorch, MyGrad, bare NumPy) runs in its own fresh
process (``worker.py``), so that no library's allocations change another's speed (sharing one
process did: glibc's heap state left by one library slowed the next by up to 2×). The parent
drives them round-robin over pipes (A B C, A B C, ...) after a warm-up, so machine noise lands on
all of them alike, and reports each side's median and the median of the per-round ratios
peer / ours, steadier than the ratio of the medians when the load changes mid-run. Every process
gets the same thread settings (the environment of ``options.thread_environment`` when it starts, and
PyTorch's intra-op threads set to the same count).

Before timing, every side's float64 results (loss and gradients) are compared with PyTorch's,
or with ours where PyTorch is not installed; a side that disagrees is reported and not timed.
"""

from __future__ import annotations

import os
import pickle
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinygrad_attn.kernels.threads import openblas

from .options import thread_environment
from .sides import TITLES

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-6                 # float64 results of two engines: the same math, other summation orders


class Contestant:
    """One side's worker process, started fresh, answering ``build`` and ``round`` over a pipe.
    Its samples are filed under `label` (default: the side), so that two processes of one side
    (tinygrad_attn against itself, ``benchmarks.modern``) can be timed side by side."""

    def __init__(self, side: str, threads: int, idle: float, target: float, clock: str,
                 keep_freed_memory: bool, label: str | None = None):
        self.side, self.label = side, label or side
        command = [sys.executable, "-m", "benchmarks.worker", side, str(threads), str(idle), str(target),
                   clock]
        self.process = subprocess.Popen(command + (["--keep-freed-memory"] if keep_freed_memory else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
                                        env={**os.environ, **thread_environment(threads)})
        self.info = self._expect("ready")[1]

    def _expect(self, *kinds: str) -> tuple:
        try:
            kind, *payload = pickle.load(self.process.stdout)
        except EOFError:
            raise RuntimeError(f"benchmarks: the {self.side} worker exited (see its stderr above)") from None
        if kind == "error":
            raise RuntimeError(f"benchmarks: the {self.side} worker failed:\n{payload[0]}")
        if kind not in kinds:
            raise RuntimeError(f"benchmarks: the {self.side} worker answered {kind!r}, expected {kinds}")
        return (kind, *payload)

    def _ask(self, *message: object) -> None:
        pickle.dump(message, self.process.stdin)
        self.process.stdin.flush()

    def build(self, name: str, sizes: dict) -> tuple | None:
        """(float64 results or None, note) once the workload is built and warm; None when this
        side does not implement it."""
        self._ask("build", name, sizes)
        kind, *payload = self._expect("built", "absent")
        return None if kind == "absent" else tuple(payload[:2])

    def time_round(self) -> float:
        self._ask("round")
        return self._expect("time")[1]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def mismatch(results: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> str | None:
    """None when every array of `results` matches the reference's of the same name, else what
    differs. An array may differ by RTOL of its largest magnitude, or of a thousandth of the
    largest magnitude of all the reference's arrays, whichever is more: a gradient that is zero
    in exact arithmetic (a key projection's bias under softmax) is rounding noise in both."""
    if results.keys() != reference.keys():
        return f"results {sorted(results)} but the reference has {sorted(reference)}"
    overall = max(float(np.max(np.abs(ref), initial=0.0)) for ref in reference.values())
    for name, ref in reference.items():
        got = results[name]
        if np.shape(got) != np.shape(ref):
            return f"{name}: shape {np.shape(got)}, the reference's {np.shape(ref)}"
        scale = max(float(np.max(np.abs(ref), initial=0.0)), 1e-3 * overall, 1e-300)
        error = float(np.max(np.abs(got - ref), initial=0.0)) / scale
        if not error <= RTOL:
            return f"{name}: off by {error:.1e} of its largest magnitude"
    return None


@dataclass
class Timing:
    """Seconds per call of each contestant (by label: its side's name unless it was given one),
    one sample per round."""

    samples: dict[str, list[float]]

    def median(self, label: str) -> float:
        return statistics.median(self.samples[label])

    def ratio(self, a: str, b: str) -> float:
        """The median over rounds of A's time / B's time in the same round."""
        return statistics.median(x / y for x, y in zip(self.samples[a], self.samples[b]))


def interleave(contestants: list[Contestant], rounds: int, warmup: int = 1) -> Timing:
    """`warmup` discarded rounds, then `rounds` rounds, each contestant once per round, in turn;
    the samples by contestant label."""
    samples: dict[str, list[float]] = {c.label: [] for c in contestants}
    for index in range(warmup + rounds):
        for c in contestants:
            seconds = c.time_round()
            if index >= warmup:
                samples[c.label].append(seconds)
    return Timing(samples)


@dataclass
class Row:
    """One line of the table: the workload, a cell per side (absent: "-"), and a note."""

    workload: str
    cells: dict[str, str] = field(default_factory=dict)
    note: str = ""


def format_table(rows: list[Row], sides: list[str]) -> str:
    """The rows as a Markdown table (it pastes into notes and issues as it is)."""
    head = ("workload", *(TITLES[s] for s in sides), "note")
    return markdown(head, [(r.workload, *(r.cells.get(s, "-") for s in sides), r.note) for r in rows])


def markdown(head: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    """A Markdown table of a header and lines of cells, each column as wide as its widest cell."""
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in (head, *body)]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 0.01 else f"{seconds * 1e3:.1f} ms"


def openblas_threads() -> int | None:
    """The thread count the loaded OpenBLAS really uses, or None where that cannot be read."""
    blas = openblas()
    return None if blas is None else int(blas[0]())


def describe_side(side: str, info: dict, threads: int | None = None) -> str:
    """One line on a worker's libraries and threads, as that process sees them (`threads`: the
    count asked for, named when a run times several)."""
    asked = "" if threads is None else f" with {threads} thread{'s' if threads > 1 else ''} asked for"
    line = (f"{TITLES[side]}{asked}: "
            f"NumPy {info['numpy']}, OpenBLAS threads in use "
            f"{info['openblas_threads'] or 'unknown'}")
    if "version" in info:
        line += f"; {TITLES[side]} {info['version']}"
    if "intra_op_threads" in info:
        line += f", intra-op threads {info['intra_op_threads']}"
    if "batch_threads" in info:
        line += f", threads over attention's batch {info['batch_threads']} (tinygrad_attn.kernels.parallel)"
    return line


def describe_environment(threads: int | list[int]) -> str:
    """The BLAS library behind NumPy and the thread settings every process starts with."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (TypeError, KeyError):       # NumPy before 1.25 prints its config and returns nothing
        blas = {"name": "unknown", "version": ""}
    env = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
    return (f"NumPy {np.__version__}, BLAS {blas.get('name')} {blas.get('version')} ({env}); "
            f"asked for {' and '.join(map(str, threads)) if isinstance(threads, list) else threads}")
