"""What the lock around a leaf's ``.grad`` costs a step, measured against the engine without it.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.lock_cost [--rounds 400]

Backward adds each leaf's gradient into ``.grad`` under one lock (``engine._leaf_grad_lock``), so
that threads running backward into shared parameters lose no contribution. Here the engine's
``_Pass.visit`` as shipped alternates, round by round in one process, with the same function
compiled from its own source without the lock's lines, on three rows of ``python -m
benchmarks``: the chain of 200 ops (one leaf), the MLP 16→16→4 step and the MLP 784→128→10 step
(four leaves each). Each sample is this process's CPU time over enough steps to last about 20 ms.
A row gives both medians and the median per-round ratio with / without (1.02: 2% slower).
"""

from __future__ import annotations

import argparse
import inspect
import re
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence

import numpy as np

from tinygrad_attn import engine

from .options import positive_int
from .sides import ours

ROWS = {"chain (200 ops on (8, 8), backward)": ("chain", {"length": 200}),
        "MLP 16→16→4, batch 8, SGD step": ("mlp", {"widths": (16, 16, 4), "batch": 8}),
        "MLP 784→128→10, batch 64, SGD step": ("mlp", {"widths": (784, 128, 10), "batch": 64})}


def visit_without_lock() -> Callable:
    """``_Pass.visit`` compiled from its source with the lock's acquire, try, finally and release
    taken out (the leaf's read-add-write left as it is), in the engine's namespace."""
    source = textwrap.dedent(inspect.getsource(engine._Pass.visit))
    bare, found = re.subn(r"_leaf_grad_lock\.acquire\(\).*\n\s*try:\n\s*(t\.grad = .*)\n\s*finally:\n"
                          r"\s*_leaf_grad_lock\.release\(\)", r"\1", source)
    if found != 1:
        raise RuntimeError("lock_cost: _Pass.visit no longer takes the lock as this script expects")
    namespace: dict = {}
    exec(compile("from __future__ import annotations\n" + bare, engine.__file__, "exec"),   # noqa: S102
         dict(vars(engine)), namespace)
    return namespace["visit"]


def calls_per_sample(step: Callable[[], object], seconds: float = 0.02) -> int:
    calls = 1
    while True:
        start = time.process_time()
        for _ in range(calls):
            step()
        if time.process_time() - start >= seconds:
            return calls
        calls *= 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lock_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=400, help="alternations per row (default 400)")
    args = parser.parse_args(argv)
    variants = {"with the lock": engine._Pass.visit, "without": visit_without_lock()}
    print("| step | with the lock | without | with / without (median per round) |")
    print("|---|---|---|---|")
    try:
        for label, (name, sizes) in ROWS.items():
            step = ours.build(name, sizes, np.float32).step
            for _ in range(20):
                step()
            calls = calls_per_sample(step)
            times: dict[str, list[float]] = {v: [] for v in variants}
            ratios = []
            for round_ in range(args.rounds):
                order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
                for variant in order:
                    engine._Pass.visit = variants[variant]
                    start = time.process_time()
                    for _ in range(calls):
                        step()
                    times[variant].append((time.process_time() - start) / calls)
                ratios.append(times["with the lock"][-1] / times["without"][-1])
            with_lock, without = (statistics.median(times[v]) * 1e6 for v in variants)
            print(f"| {label} | {with_lock:.1f} µs | {without:.1f} µs | {statistics.median(ratios):.4f} |")
    finally:
        engine._Pass.visit = variants["with the lock"]
    print(f"{args.rounds} rounds, CPU time of this process; run with one BLAS thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
