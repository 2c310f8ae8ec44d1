"""``python -m benchmarks``: every workload of issues 12 and 19, tinygrad_attn beside PyTorch, as one table.

Run from the repository root: ``python -m benchmarks`` (a few minutes on 2 cores, most of it the
default ``train reverse`` run), ``python -m benchmarks --quick`` (a smoke test of a few seconds),
``--only train overhead`` to pick workloads, ``--no-torch`` to leave PyTorch out.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

WORKLOAD_NAMES = ("train", "attention", "overhead", "memory", "reverse", "gqa", "window", "llama")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds, small sizes, a 3-step training run: checks that everything runs")
    parser.add_argument("--only", nargs="+", choices=WORKLOAD_NAMES, default=list(WORKLOAD_NAMES),
                        help="the workloads to run (default: all)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds per workload (default 9)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="BLAS/OpenMP threads on both sides (default: the CPU count)")
    parser.add_argument("--keep-freed-memory", action="store_true",
                        help="glibc keeps freed memory for reuse in this process, as `tinygrad-attn train` "
                             "sets it (tinygrad_attn.training.host_memory); both libraries run under it")
    parser.add_argument("--idle", type=float, default=0.15,
                        help="seconds idle before each sample, for BLAS threads to stop spinning")
    parser.add_argument("--no-torch", action="store_true", help="run tinygrad_attn only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .harness import set_thread_count
    set_thread_count(args.threads)          # before NumPy and PyTorch load their thread pools
    if args.keep_freed_memory:
        from tinygrad_attn.training.host_memory import keep_freed_memory
        keep_freed_memory()
    from . import modern, workloads
    from .harness import describe_environment, format_table
    from .workloads import Settings

    torch_side = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            torch.set_num_threads(args.threads)
            from . import torch_side
    if args.quick:
        settings = Settings(rounds=args.rounds or 2, attention_sizes=(64,), memory_size=256,
                            chain_length=20, reverse_steps=3, idle=args.idle, gqa_size=64,
                            window_size=(256, 32), llama_batch=4)
    else:
        settings = Settings(rounds=args.rounds or 9, attention_sizes=(128, 512, 2048), memory_size=4096,
                            chain_length=200, reverse_steps=None, idle=args.idle, gqa_size=2048,
                            window_size=(8192, 256), llama_batch=64)
    print(describe_environment(args.threads, None if torch_side is None else torch_side.torch))
    print("glibc malloc keeps freed memory (--keep-freed-memory): "
          f"{'yes' if args.keep_freed_memory else 'no, the default'}")
    rows = []
    for name in args.only:
        rows += {**workloads.WORKLOADS, **modern.WORKLOADS}[name](settings, torch_side)
        print(f"done: {name}", file=sys.stderr, flush=True)
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
