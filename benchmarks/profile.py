"""cProfile of one side's step: where the time of a workload goes, function by function.

    python -m benchmarks.profile KEY [--side ours] [--calls 200] [--top 15] [--quick]

KEY is a row of the table (``specs.rows``: mlp784, mlp16, chain, attention, flash, train). The
step is built in float32 and run twice to warm up, then `calls` times under cProfile; the top
entries by own time (tottime) are printed, per call of the step. cProfile adds its own cost to
every Python call, so the figures say where the time goes, not how long a step takes
(``python -m benchmarks`` measures that). As in the table's processes, glibc keeps freed memory
for reuse (``--no-keep-freed-memory``: its own thresholds); without it each step maps its large
arrays afresh and the first op to touch them takes the page faults (the train row's GELU backward
read 2.6 ms a call instead of 0.4).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import pstats
import sys
from collections.abc import Sequence

import numpy as np

from tinygrad_attn.training.host_memory import keep_freed_memory

from .options import positive_int
from .sides import SIDES
from .specs import rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("key", help="the row: " + ", ".join(w.key for w in rows(False)))
    parser.add_argument("--side", choices=tuple(SIDES), default="ours")
    parser.add_argument("--calls", type=positive_int, default=200)
    parser.add_argument("--top", type=positive_int, default=15)
    parser.add_argument("--quick", action="store_true", help="the quick suite's sizes")
    parser.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction, default=True,
                        help="glibc keeps freed memory for reuse, as in the table's processes (default)")
    args = parser.parse_args(argv)
    workloads = {w.key: w for w in rows(args.quick)}
    if args.key not in workloads:
        parser.error(f"unknown row {args.key!r}; one of {', '.join(workloads)}")
    workload = workloads[args.key]
    if args.keep_freed_memory:
        keep_freed_memory()
    bench = importlib.import_module(f"benchmarks.sides.{SIDES[args.side]}").build(
        workload.name, workload.sizes, np.float32)
    if bench is None:
        parser.error(f"the {args.side} side does not implement {workload.name}")
    bench.step()
    bench.step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.calls):
        bench.step()
    profiler.disable()
    print(f"{workload.label}, {args.side}: {args.calls} steps under cProfile; top {args.top} by own time")
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats("tottime")
    stats.print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
