"""The train step alone in fresh processes: what a bare training loop of your own sees.

    python -m benchmarks.fresh_process [--processes 3] [--steps 30] [--sides ours torch]
                                       [--keep-freed-memory]

Each process builds one side's TinyTransformer train step (the ``train`` row of ``python -m
benchmarks``) in float32 and nothing else: unlike the benchmark's workers it runs no float64 check
first. It takes 5 steps to warm up, then times `steps` steps: CPU milliseconds a step (one BLAS
thread, so CPU time is the work done) and the minor page faults a step (pages the kernel mapped and
zeroed, ``resource.getrusage``). The sides alternate, one fresh process each, `processes` times;
the ratio printed for each peer is peer / ours, process by process, as in ``python -m benchmarks``
(below 1: the peer is faster).

Where glibc's heap ends up after a step decides how many pages the next one maps afresh, and that
moves from process to process (the order of imports alone moves it), so each process is a line of
its own. ``--keep-freed-memory`` runs every process under ``keep_freed_memory()``, as
``tinygrad-attn train`` does: then a step faults a few pages at most.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .options import positive_int, set_thread_count

WARMUP = 5
ROOT = Path(__file__).resolve().parents[1]      # where `python -m benchmarks...` runs


def run_child(side: str, steps: int, keep_freed_memory: bool) -> None:
    """Build `side`'s train step, warm it up, time `steps` steps; print "ms faults" a step."""
    import resource
    import time

    import numpy as np

    from . import specs
    from .sides import SIDES
    if keep_freed_memory:
        from tinygrad_attn.training.host_memory import keep_freed_memory as keep
        keep()
    if side == "torch":
        import torch
        torch.set_num_threads(1)
    module = importlib.import_module(f"benchmarks.sides.{SIDES[side]}")
    train = next(row for row in specs.rows(False) if row.key == "train")
    bench = module.build(train.name, train.sizes, np.float32)
    for _ in range(WARMUP):
        bench.step()
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
    for _ in range(steps):
        bench.step()
    seconds = time.process_time() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(f"{seconds / steps * 1e3:.3f} {faults / steps:.0f}")


def measure(side: str, steps: int, keep_freed_memory: bool) -> tuple[float, float]:
    """(ms a step, page faults a step) of `side` in a fresh process."""
    command = [sys.executable, "-m", "benchmarks.fresh_process", "--child", side, "--steps", str(steps)]
    done = subprocess.run(command + (["--keep-freed-memory"] if keep_freed_memory else []),
                          capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"fresh_process: the {side} process failed:\n{done.stderr}")
    ms, faults = done.stdout.splitlines()[-1].split()     # the last line: anything a side printed is above
    return float(ms), float(faults)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fresh_process", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=positive_int, default=3,
                        help="fresh processes per side (default 3)")
    parser.add_argument("--steps", type=positive_int, default=30, help="timed steps per process (default 30)")
    parser.add_argument("--sides", nargs="+", choices=("ours", "torch", "mygrad", "numpy"),
                        default=["ours", "torch"],
                        help="the sides (default: ours torch); ours always runs, first")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="every process calls keep_freed_memory() first, as tinygrad-attn train does")
    parser.add_argument("--child", choices=("ours", "torch", "mygrad", "numpy"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1 or args.steps < 1:
        parser.error(f"--processes and --steps must be at least 1, got {args.processes} and {args.steps}")
    set_thread_count(1)             # before NumPy is imported, here and in every child
    if args.child:
        run_child(args.child, args.steps, args.keep_freed_memory)
        return 0
    from .__main__ import installed_sides
    from .sides import TITLES

    sides, missing = installed_sides(args.sides)
    for line in missing:
        print(line)
    times: dict[str, list[float]] = {side: [] for side in sides}
    print(f"TinyTransformer train step alone, float32, one thread; {args.processes} fresh processes a "
          f"side, {WARMUP} warm-up + {args.steps} timed steps each; keep_freed_memory: "
          f"{'yes' if args.keep_freed_memory else 'no'}")
    print("| process | side | CPU ms a step | page faults a step |\n|---|---|---|---|")
    for index in range(1, args.processes + 1):
        for side in sides:
            ms, faults = measure(side, args.steps, args.keep_freed_memory)
            times[side].append(ms)
            print(f"| {index} | {TITLES[side]} | {ms:.1f} | {faults:,.0f} |", flush=True)
    for side in sides[1:]:
        ratios = [peer / ours for ours, peer in zip(times["ours"], times[side])]
        print(f"{TITLES[side]} / tinygrad_attn, process by process: " + ", ".join(f"{r:.2f}×" for r in ratios)
              + f" (median {statistics.median(ratios):.2f}×; below 1: {TITLES[side]} is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
