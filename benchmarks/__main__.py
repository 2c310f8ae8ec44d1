"""``python -m benchmarks``: tinygrad_attn beside PyTorch, MyGrad and bare NumPy, as one table.

Each side of a comparison runs in its own fresh process, warmed up, in interleaved rounds, every
side first checked against PyTorch's float64 results (``benchmarks/harness.py``). Run from the
repository root: ``python -m benchmarks`` (several minutes on 2 cores; ``text`` trains nanoGPT's
laptop model 200 steps on each side and times its step with 1 and all threads; ``smollm`` times forward
+ backward of a SmolLM-135M-shaped model beside transformers), ``--quick`` (a
smoke test: 2 rounds of each workload at small sizes and 3-step training runs), ``--only mlp
chain`` to pick workloads, ``--sides ours mygrad`` to pick sides.
Each workload is timed once per thread count, ``--threads 1 N`` by default (N: the CPU count): one
thread on every side, then every core a learner has (each process gets the count for BLAS, OpenMP,
PyTorch's intra-op threads and ``tinygrad_attn.kernels.parallel``); the rows say which.
``--busy N`` runs N processes that each keep a core busy beside every side (``benchmarks/busy.py``),
as other people's work does on a shared machine, and prints the load average before and after.
A side whose library is not installed (``python -m pip install -e '.[bench]'``) is left out with
a line saying so. Every process runs with glibc keeping freed memory for reuse, as ``tinygrad-attn
train`` does (``--no-keep-freed-memory`` for glibc's own thresholds, under which a step's page
faults, and so its time, change from process to process; ``python -m benchmarks.fresh_process``
shows them).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import replace

from .busy import busy_processes, load_average
from .options import add_process_options, apply_process_options, idle_for, non_negative_int

WORKLOAD_NAMES = ("mlp", "chain", "attention", "train", "memory", "reverse", "text", "smollm")
SIDE_NAMES = ("ours", "torch", "mygrad", "numpy")
INSTALL = {"torch": "python -m pip install torch==2.13.0", "mygrad": "python -m pip install mygrad"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 2 rounds of each workload at small sizes and 3-step "
                             "training runs, to check that everything runs (its timings mean little)")
    parser.add_argument("--only", nargs="+", choices=WORKLOAD_NAMES, default=list(WORKLOAD_NAMES),
                        help="the workloads to run (default: all)")
    parser.add_argument("--sides", nargs="+", choices=SIDE_NAMES, default=list(SIDE_NAMES),
                        help="the sides to compare (default: all that are installed; ours always runs)")
    parser.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction, default=True,
                        help="glibc keeps freed memory for reuse in every side's process, as `tinygrad-attn "
                             "train` sets it (tinygrad_attn.training.host_memory): the default, since with "
                             "glibc's own thresholds whether a step maps its pages afresh changes from "
                             "process to process (our train step took 22.4-27.6 ms in seven runs, 21.4-23.1 "
                             "with it); --no-keep-freed-memory measures glibc's defaults")
    parser.add_argument("--busy", type=non_negative_int, default=0, metavar="N",
                        help="N processes that each keep a core busy beside every side while it is timed, "
                             "as other people's work on a shared machine (default 0); the load average "
                             "is printed before and after")
    add_process_options(parser, default_rounds=10, several_threads=True)
    return parser


def installed_sides(asked: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the sides to run, ours first; a line for each asked-for side whose library is missing)."""
    from .sides import LIBRARY, TITLES

    sides, missing = ["ours"], []
    for side in asked:
        if side == "ours" or side in sides:
            continue
        library = LIBRARY[side]
        if library is None or importlib.util.find_spec(library) is not None:
            sides.append(side)
        else:
            missing.append(f"{TITLES[side]}: not installed, its column is left out ({INSTALL[side]}, "
                           "or the bench extra: python -m pip install -e '.[bench]')")
    return sides, missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_process_options(parser, args)     # before NumPy loads its thread pool, here and in the workers
    with busy_processes(args.busy):
        if args.busy:
            print(f"{args.busy} busy process{'es' if args.busy > 1 else ''} beside every side; load "
                  f"average before: {load_average()}", flush=True)
        table = _measure(args)
        if args.busy:
            print(f"load average after: {load_average()}")
    print(table)
    return 0


def _measure(args: argparse.Namespace) -> str:
    """Every workload asked for, each side in its own process: the lines describing them printed,
    the table returned."""
    from .harness import describe_environment, describe_side, format_table
    from .smollm import smollm_rows
    from .specs import rows
    from .text import STEPS, text_rows
    from .workloads import Settings, compare, peak_memory, train_reverse

    sides, missing = installed_sides(args.sides)
    counts = sorted(set(args.threads))
    several = len(counts) > 1
    settings = Settings(rounds=args.rounds or (2 if args.quick else 10), sides=sides, threads=max(counts),
                        idle=idle_for(max(counts), args.idle), target=0.005 if args.quick else 0.05,
                        clock=args.clock,
                        keep_freed_memory=args.keep_freed_memory, memory_size=256 if args.quick else 4096,
                        reverse_steps=3 if args.quick else None)
    print(describe_environment(counts))
    for line in missing:
        print(line)
    print("glibc malloc keeps freed memory in every process: "
          f"{'yes, the default' if args.keep_freed_memory else 'no (--no-keep-freed-memory)'}")
    described: dict[tuple[str, int], dict] = {}
    table = []
    for workload in rows(args.quick):
        if workload.name not in args.only:
            continue
        for threads in counts:          # one row per thread count, side by side in the table
            row = compare(workload, replace(settings, threads=threads, idle=idle_for(threads, args.idle)),
                          described)
            if several:
                row.workload += f", {threads} thread{'s' if threads > 1 else ''}"
            table.append(row)
            print(f"done: {row.workload}", file=sys.stderr, flush=True)
    if "memory" in args.only:
        table += peak_memory(settings)
    if "reverse" in args.only:
        table += train_reverse(settings)
    if "text" in args.only:     # nanoGPT's laptop model on text beside PyTorch (benchmarks/text.py)
        table += text_rows(sides, 3 if args.quick else STEPS, settings.rounds, settings.target,
                           settings.keep_freed_memory, max(counts))
    if "smollm" in args.only:   # a SmolLM-135M-shaped model beside transformers (benchmarks/smollm.py)
        table += smollm_rows(sides, 1 if args.quick else 5, max(counts))
    for (side, threads), info in described.items():
        print(describe_side(side, info, threads if several else None))
    print(f"Each side in its own process; {settings.rounds} interleaved rounds after a warm-up; "
          f"{'CPU' if args.clock == 'cpu' else 'wall-clock'} time; "
          + ("a row's thread count is every process's (BLAS, OpenMP, PyTorch's intra-op threads, ours); "
             if several else "")
          + "a peer's "
          "cell: its median (median over rounds of peer / tinygrad_attn; below 1: the peer is faster)")
    return format_table(table, sides)


if __name__ == "__main__":
    sys.exit(main())
