"""The rows of the table: timed comparisons (each side in its own process), peak memory, and a
full ``train reverse`` run.

``compare`` starts one fresh worker per side for a workload, checks every side's float64 results
against the reference (PyTorch's, else ours), times the float32 workload in interleaved rounds
and makes the row: our median, and for each peer its median and the median per-round ratio
peer / ours (below 1: the peer is faster).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from .harness import ROOT, Contestant, Row, interleave, mismatch, ms
from .specs import Workload


@dataclass
class Settings:
    """How long to measure and what with: rounds, the sides, the processes' settings."""

    rounds: int
    sides: list[str]            # "ours" first; only sides whose library is installed
    threads: int
    idle: float
    target: float               # seconds a sample lasts (calls per sample are chosen to match)
    clock: str                  # "wall" or "cpu" (see worker.py)
    keep_freed_memory: bool
    memory_size: int
    reverse_steps: int | None   # None: the default TrainConfig (the full run)


def compare(workload: Workload, settings: Settings, describe: dict[tuple[str, int], dict]) -> Row:
    """One workload on every side, each in a fresh process: checked, then timed.

    `describe` collects each side's process information (library versions, threads) once per
    thread count.
    """
    contestants: list[Contestant] = []
    try:                                # every worker started is closed, also when a later one fails
        for side in settings.sides:
            contestants.append(Contestant(side, settings.threads, settings.idle, settings.target,
                                          settings.clock, settings.keep_freed_memory))
        for c in contestants:
            describe.setdefault((c.side, settings.threads), c.info)
        built = {c.side: c.build(workload.name, workload.sizes) for c in contestants}
        reference_side = "torch" if built.get("torch") is not None else "ours"
        reference = built[reference_side][0]
        row, timed = Row(workload.label), []
        notes = []
        for c in contestants:
            if built[c.side] is None:
                row.cells[c.side] = "not implemented"
                continue
            results, note = built[c.side]
            wrong = None if results is None else mismatch(results, reference)
            if wrong is not None:
                row.cells[c.side] = "wrong results"
                notes.append(f"{c.side}: {wrong} (vs {reference_side} float64)")
                continue
            if note:
                notes.append(f"{c.side}: {note}")
            timed.append(c)
        if "ours" not in [c.side for c in timed]:
            raise RuntimeError(f"benchmarks: {workload.label}: our results differ from {reference_side}'s: "
                               f"{'; '.join(notes)}")
        timing = interleave(timed, settings.rounds)
    finally:
        for c in contestants:
            c.close()
    ours = timing.median("ours")
    row.cells["ours"] = ms(ours)
    if workload.per == "op":
        row.cells["ours"] += f" ({ours / workload.sizes['length'] * 1e6:.1f} µs an op)"
    for c in timed[1:]:
        row.cells[c.side] = f"{ms(timing.median(c.side))} ({timing.ratio(c.side, 'ours'):.2f}×)"
    row.note = "; ".join(notes)
    return row


def _peak(kernel: str, n: int) -> dict[str, float]:
    # glibc returns allocations of 64 KiB and more to the system when freed (instead of keeping
    # them for reuse), so that the resident size follows what is live, the same for both libraries.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", kernel, str(n)], check=True,
                         capture_output=True, text=True, env=env, cwd=ROOT)
    return json.loads(out.stdout)


def peak_memory(settings: Settings) -> list[Row]:
    """Peak memory of one causal fwd+bwd at n = memory_size, 1 head (see benchmarks/memory.py),
    each kernel in a fresh process; the PyTorch cell's ratio is its peak / ours."""
    n = settings.memory_size
    peaks = {kernel: _peak(kernel, n) for kernel in ("plain", "flash")}
    if "torch" in settings.sides:
        peaks.update({kernel: _peak(kernel, n) for kernel in ("torch-math", "torch-sdpa")})
    rows = []
    for ours, theirs in (("plain", "torch-math"), ("flash", "torch-sdpa")):
        mine = peaks[ours]["rss_mib"]
        row = Row(f"peak memory n = {n}, 1 head: our {ours} kernel"
                  + (f" vs {theirs.replace('-', ' ')}" if theirs in peaks else ""),
                  {"ours": f"{mine:.1f} MiB"},
                  f"peak RSS growth; tracemalloc {peaks[ours]['tracemalloc_mib']:.1f} MiB")
        if theirs in peaks:
            theirs_mib = peaks[theirs]["rss_mib"]
            row.cells["torch"] = f"{theirs_mib:.1f} MiB ({theirs_mib / mine:.2f}×)"
        rows.append(row)
    flash_share = peaks["flash"]["tracemalloc_mib"] / peaks["plain"]["tracemalloc_mib"]
    rows.append(Row(f"peak memory n = {n}: flash / plain (ours)", {"ours": f"{flash_share:.3f}"},
                    "tracemalloc ratio; target ≤ 1/8"))
    return rows


def train_reverse(settings: Settings) -> list[Row]:
    """`tinygrad-attn train reverse` with default flags, run as the command itself (in a child
    process, as a user runs it): its training seconds and held-out accuracy, as it reports them."""
    quick = [] if settings.reverse_steps is None else ["--steps", str(settings.reverse_steps),
                                                       "--eval-size", "20"]
    with tempfile.TemporaryDirectory() as folder:
        run = subprocess.run([sys.executable, "-m", "tinygrad_attn", "train", "reverse", *quick,
                              "--out", os.path.join(folder, "reverse")], check=True, capture_output=True,
                             text=True, cwd=ROOT)
    # "reverse: held-out exact-match accuracy 100.00% on 500 sequences after 1000 steps (20.4 s of training)"
    found = re.search(r"accuracy ([\d.]+%) on (\d+) sequences after (\d+) steps \(([\d.]+) s of training\)",
                      run.stdout)
    if found is None:
        raise RuntimeError(f"train reverse printed no accuracy line:\n{run.stdout}\n{run.stderr}")
    accuracy, held_out, steps, seconds = found.groups()
    label = "default flags" if settings.reverse_steps is None else "quick"
    return [Row(f"train reverse ({steps} steps, {label})", {"ours": f"{seconds} s"},
                f"held-out exact match {accuracy} on {held_out}; target 100% in ≤ 30 s")]
