"""The model nanoGPT's README gives for a laptop CPU (4 layers, 4 heads, width 128, context 64,
batch 12) on the characters of Python's help topics, beside the same model in PyTorch.

    python -m benchmarks.text [--quick] [--steps N] [--rounds N]     (also a workload of
                                                                       python -m benchmarks: text)

Two questions, each side in its own fresh process:

- Do the two engines train the same? Both start from the same weights (``specs.transformer_weights``)
  and take the same batches (``specs.text_batches``) for 200 AdamW steps in float32 (gradients
  clipped to norm 1, a constant rate); the losses after the last step should agree within 1%
  (float32 rounding grows step by step, so they are not bit-equal).
- How long does a step take? The train step of the table's ``train`` workload at these sizes
  (forward, cross-entropy, backward, Adam), timed in interleaved rounds with one BLAS/intra-op
  thread in every process, then with all of them (the CPU count).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence

from .options import set_thread_count
from .sides import SIDES

STEPS = 200
TOLERANCE = 0.01            # the losses after STEPS steps: |ours − PyTorch| / PyTorch


def losses(side: str, steps: int) -> list[float]:
    """The side's `steps` losses, trained in a fresh process with one thread (``python -m
    benchmarks.text --losses``): the numbers do not depend on the thread count, and on a loaded
    machine spinning BLAS threads can make a step ten times slower."""
    from .harness import ROOT

    env = {**os.environ, **{v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    run = subprocess.run([sys.executable, "-m", "benchmarks.text", "--losses", side, "--steps", str(steps)],
                         check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return json.loads(run.stdout)


def text_rows(sides: Sequence[str], steps: int, rounds: int, target: float, keep_freed_memory: bool,
              threads: int) -> list:
    """The table's rows: the losses after `steps` steps, then the step time with 1 and `threads`
    threads (PyTorch's cells only when "torch" is among `sides`)."""
    from . import specs
    from .harness import Row
    from .workloads import Settings, compare

    sizes = specs.NANOGPT
    with_torch = "torch" in sides
    ours = losses("ours", steps)
    row = Row(f"nanoGPT laptop config on help-topic text: loss after {steps} AdamW steps (float32)",
              {"ours": f"{ours[-1]:.4f} (from {ours[0]:.4f})"})
    if with_torch:
        theirs = losses("torch", steps)
        gap = abs(ours[-1] - theirs[-1]) / theirs[-1]
        row.cells["torch"] = f"{theirs[-1]:.4f} (from {theirs[0]:.4f})"
        worst = max(abs(a - b) / b for a, b in zip(ours, theirs))
        row.note = (f"same weights and batches; gap {gap:.4%} after the last step "
                    f"({'within' if gap <= TOLERANCE else 'OUTSIDE'} the {TOLERANCE:.0%} target), "
                    f"at most {worst:.4%} at any step")
    rows = [row]
    timed_sides = ["ours", "torch"] if with_torch else ["ours"]
    for count in sorted({1, threads}):
        set_thread_count(count)         # the environment the side processes start with
        settings = Settings(rounds=rounds, sides=timed_sides, threads=count, idle=0.0 if count == 1 else 0.15,
                            target=target, clock="wall", keep_freed_memory=keep_freed_memory, memory_size=0,
                            reverse_steps=None)
        step = compare(specs.Workload("nanogpt", "train", f"nanoGPT laptop config train step (Adam), "
                                      f"batch 12 × 64, {count} thread{'s' if count > 1 else ''}", sizes),
                       settings, {})
        rows.append(step)
    set_thread_count(threads)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.text", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 steps and 2 rounds: checks that it runs")
    parser.add_argument("--steps", type=int, help=f"training steps of the loss comparison (default {STEPS})")
    parser.add_argument("--rounds", type=int, help="interleaved timing rounds (default 10)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="the 'all threads' count (default: the CPU count)")
    parser.add_argument("--losses", choices=("ours", "torch"), help=argparse.SUPPRESS)   # a side's process
    args = parser.parse_args(argv)
    steps = args.steps or (3 if args.quick else STEPS)
    if args.losses:
        side = importlib.import_module(f"benchmarks.sides.{SIDES[args.losses]}")
        from . import specs
        print(json.dumps(side.text_losses(specs.NANOGPT, steps)))
        return 0
    from .__main__ import installed_sides
    from .harness import format_table

    sides, missing = installed_sides(["ours", "torch"])
    for line in missing:
        print(line)
    rows = text_rows(sides, steps, args.rounds or (2 if args.quick else 10), 0.005 if args.quick else 0.05,
                     True, args.threads)
    print("Each side in its own process; wall-clock medians; a PyTorch cell's ratio: the median over "
          "rounds of PyTorch / tinygrad_attn (below 1: PyTorch is faster)")
    print(format_table(rows, sides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
