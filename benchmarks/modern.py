"""The modern attention workloads: grouped-query attention, flash with a sliding window, the Llama train step.

    python -m benchmarks.modern [--quick] [--only gqa window llama] [--rounds N] [--threads N]
                                [--clock wall|cpu] [--idle S]

Each row compares tinygrad_attn with itself, each side in its own fresh process driven by
``benchmarks/harness.py`` (as ``python -m benchmarks`` runs its sides), in interleaved rounds
(A B A B …; the ratio is the median over rounds of A / B): GQA against the same call with as many
kv heads as query heads (and peak memory, each measured in a fresh process by
``benchmarks.memory``), the window against full causal flash, ``--arch llama``'s train step against
the default one. PyTorch's time is printed where it has the op (``enable_gqa=True``). On a shared
machine, ``--threads 1 --clock cpu`` leaves out the waits for a core (and OpenBLAS threads spinning
while one is taken), which can make a wall-clock ratio off by more than the effect measured. CPU
time still holds the kernel's work on fresh memory: a fused call at n = 2048 maps new (8, 2048,
2048) arrays, and now and then one call of either side spends 0.1–0.3 s more in the system (seen
with transparent huge pages), so a median over few rounds can land on such a call.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .harness import Contestant, Timing, describe_environment, interleave, mismatch, ms
from .options import add_process_options, apply_process_options

QUERY_HEADS = 8


@dataclass
class Settings:
    """Rounds, sizes and the side processes' settings of one run."""

    rounds: int
    threads: int
    idle: float
    clock: str                      # "wall" or "cpu" (see worker.py)
    target: float                   # seconds a sample lasts (calls per sample are chosen to match)
    gqa_size: int                   # n of the grouped-query attention rows
    window_size: tuple[int, int]    # (n, window) of the sliding-window row
    llama_batch: int                # sequences per step of the --arch llama row (64: the train command's)


@dataclass
class Row:
    """One line of the table: a workload, our figure, PyTorch's, the ratio of the two compared."""

    workload: str
    ours: str
    theirs: str | None
    ratio: float
    note: str


def time_sides(sides: dict[str, tuple[str, str, dict]], settings: Settings) -> Timing:
    """Each contestant, label → (side, workload name, sizes), built in its own fresh worker
    process, then timed in interleaved rounds (``harness.interleave``): the Timing by label.
    Contestants of different sides on the same workload and sizes (ours and PyTorch) must first
    agree in float64 (``harness.mismatch``)."""
    contestants: list[Contestant] = []
    try:                                # every worker started is closed, also when a later one fails
        for label, (side, _, _) in sides.items():
            contestants.append(Contestant(side, settings.threads, settings.idle, settings.target,
                                          settings.clock, keep_freed_memory=False, label=label))
        checked: dict[str, tuple[str, dict]] = {}       # the workload's repr → (label, float64 results)
        for c, (side, name, sizes) in zip(contestants, sides.values()):
            built = c.build(name, sizes)
            if built is None:
                raise RuntimeError(f"benchmarks.modern: the {side} side has no workload {name!r} {sizes}")
            key = repr((name, sorted(sizes.items())))
            if key in checked and built[0] is not None:
                wrong = mismatch(built[0], checked[key][1])
                if wrong is not None:
                    raise RuntimeError(f"benchmarks.modern: {c.label} differs from {checked[key][0]} on "
                                       f"{name} {sizes}: {wrong}")
            elif built[0] is not None:
                checked[key] = (c.label, built[0])
        return interleave(contestants, settings.rounds)
    finally:
        for c in contestants:
            c.close()


def peak(kernel: str, n: int, kv_heads: int) -> dict[str, float]:
    """What ``python -m benchmarks.memory KERNEL N HKV`` measures in a fresh process."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}     # freed arrays leave the resident set
    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", kernel, str(n), str(kv_heads)],
                         check=True, capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout)


def grouped_query_attention(settings: Settings, with_torch: bool) -> list[Row]:
    """Causal fwd+bwd, 8 query heads, d_head 64: 2 kv heads against 8, fused and flash; peak memory."""
    n = settings.gqa_size
    rows = []
    for label, kernel in (("fused", "plain"), ("flash", "flash")):
        sizes = {"n": n, "heads": QUERY_HEADS, "kernel": kernel}
        sides = {f"kv{kv}": ("ours", "modern_attention", {**sizes, "kv_heads": kv}) for kv in (2, 8)}
        if with_torch and label == "fused":
            sides["torch"] = ("torch", "modern_attention", {**sizes, "kv_heads": 2})
        timing = time_sides(sides, settings)
        memory = {kv: peak(kernel, n, kv)["tracemalloc_mib"] for kv in (2, 8)}
        rows.append(Row(f"GQA fwd+bwd n={n} Hq=8, {label}: time Hkv=2 / Hkv=8", ms(timing.median("kv2")),
                        ms(timing.median("torch")) if "torch" in sides else None,
                        timing.ratio("kv2", "kv8"),
                        f"Hkv=8: {ms(timing.median('kv8'))}; target ≤ 1×"
                        + ("; PyTorch column: its sdpa, enable_gqa" if "torch" in sides else "")))
        rows.append(Row(f"GQA peak memory n={n} Hq=8, {label}: Hkv=2 / Hkv=8", f"{memory[2]:.1f} MiB", None,
                        memory[2] / memory[8], f"Hkv=8: {memory[8]:.1f} MiB (tracemalloc); target < 1×"))
    return rows


def sliding_window(settings: Settings, with_torch: bool) -> list[Row]:
    """Flash attention causal fwd+bwd, 1 head, d 64: window 256 against the full causal pass."""
    n, window = settings.window_size
    sizes = {"n": n, "heads": 1, "kv_heads": 1, "kernel": "flash"}
    timing = time_sides({"window": ("ours", "modern_attention", {**sizes, "window": window}),
                         "full": ("ours", "modern_attention", sizes)}, settings)
    return [Row(f"flash causal fwd+bwd n={n}: window={window} / full", ms(timing.median("window")), None,
                timing.ratio("window", "full"), f"full: {ms(timing.median('full'))}; target ≤ 0.25×")]


def llama_train_step(settings: Settings, with_torch: bool) -> list[Row]:
    """The train command's step (reverse, default flags): --arch llama against the default."""
    batch = settings.llama_batch
    timing = time_sides({arch: ("ours", "train_command", {"arch": arch, "batch": batch})
                         for arch in ("llama", "default")}, settings)
    return [Row(f"train step reverse, batch {batch}: --arch llama / default", ms(timing.median("llama")),
                None, timing.ratio("llama", "default"),
                f"default: {ms(timing.median('default'))}; target ≤ 1.15×")]


WORKLOADS = {"gqa": grouped_query_attention, "window": sliding_window, "llama": llama_train_step}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.modern", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds, small sizes: checks that it runs")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    add_process_options(parser, default_rounds=10)
    args = parser.parse_args(argv)
    apply_process_options(parser, args)     # before the workers start: they inherit the thread count
    with_torch = importlib.util.find_spec("torch") is not None
    if args.quick:
        settings = Settings(args.rounds or 2, args.threads, args.idle, args.clock, 0.005, gqa_size=64,
                            window_size=(256, 32), llama_batch=4)
    else:
        settings = Settings(args.rounds or 10, args.threads, args.idle, args.clock, 0.05, gqa_size=2048,
                            window_size=(8192, 256), llama_batch=64)
    rows = [row for name in args.only for row in WORKLOADS[name](settings, with_torch)]
    print(describe_environment(args.threads))
    print(f"Each side in its own process; {settings.rounds} interleaved rounds after a warm-up; "
          f"{'CPU' if args.clock == 'cpu' else 'wall-clock'} time")
    print("| workload | tinygrad_attn | PyTorch | ratio (median of per-round) | note |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.workload} | {r.ours} | {r.theirs or '-'} | {r.ratio:.2f}× | {r.note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
