"""Interleaved timing, the table the suite prints, and the machine's BLAS and thread settings.

Contestants of one workload run round-robin (A B A B ...) after a warm-up, so that machine noise
lands on all of them alike; a row reports each side's median and the median of the per-round
ratios A/B, which is steadier than the ratio of the medians when the load changes mid-run.
After a BLAS call OpenBLAS's threads spin for about 0.1 s and would slow whatever runs next on a
small machine, so the harness idles `idle` seconds before every sample.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Timing:
    """Seconds per call of each contestant, one sample per round."""

    samples: dict[str, list[float]]

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def ratio(self, a: str, b: str) -> float:
        """The median over rounds of A's time / B's time in the same round."""
        return statistics.median(x / y for x, y in zip(self.samples[a], self.samples[b]))


def interleave(contestants: dict[str, Callable[[], object]], rounds: int, warmup: int = 1,
               inner: int = 1, idle: float = 0.15) -> Timing:
    """Run each contestant `warmup` times, then `rounds` rounds of each once in turn.

    A sample is the mean time of `inner` back-to-back calls (for workloads of a few ms).
    """
    for _ in range(warmup):
        for fn in contestants.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(rounds):
        for name, fn in contestants.items():
            time.sleep(idle)
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - start) / inner)
    return Timing(samples)


@dataclass
class Row:
    """One line of the table: a workload, our figure, PyTorch's (None without it), their ratio."""

    workload: str
    ours: str
    theirs: str | None = None
    ratio: float | None = None
    note: str = ""


def format_table(rows: list[Row]) -> str:
    """The rows as a Markdown table (it pastes into notes and issues as it is)."""
    head = ("workload", "tinygrad_attn", "PyTorch", "ratio (median of per-round)", "note")
    body = [(r.workload, r.ours, r.theirs or "-", "-" if r.ratio is None else f"{r.ratio:.2f}×", r.note)
            for r in rows]
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in (head, *body)]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def set_thread_count(threads: int) -> None:
    """Ask every BLAS and OpenMP runtime for `threads` threads; only works before NumPy is imported."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def openblas_threads() -> int | None:
    """The thread count the loaded OpenBLAS really uses (it is in /proc/self/maps once NumPy
    is imported), or None where that cannot be read."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in paths:
        lib = ctypes.CDLL(path)
        for symbol in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                       "openblas_get_num_threads"):
            if hasattr(lib, symbol):
                return int(getattr(lib, symbol)())
    return None


def describe_environment(threads: int, torch: object | None) -> str:
    """The BLAS library behind NumPy, its thread count, and PyTorch's version and threads."""
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except (TypeError, KeyError):       # NumPy before 1.25 prints its config and returns nothing
        blas = {"name": "unknown", "version": ""}
    env = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
    lines = [f"NumPy {np.__version__}, BLAS {blas.get('name')} {blas.get('version')}, "
             f"OpenBLAS threads in use: {openblas_threads() or 'unknown'} ({env}); asked for {threads}"]
    if torch is None:
        lines.append("PyTorch: not used (--no-torch, or not importable): tinygrad_attn side only")
    else:
        info = torch.__config__.parallel_info()
        blas = next((w.split("=")[1].rstrip(",") for w in torch.__config__.show().split()
                     if w.startswith("BLAS_INFO=")), "?")
        omp = next((line.split(":")[1].strip() for line in info.splitlines()
                    if "omp_get_max_threads" in line), "?")
        lines.append(f"PyTorch {torch.__version__}, BLAS {blas}, intra-op threads {torch.get_num_threads()}, "
                     f"OpenMP threads {omp}")
    return "\n".join(lines)
