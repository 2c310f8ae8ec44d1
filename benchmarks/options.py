"""The options that say how the side processes are timed, shared by ``python -m benchmarks`` and
``python -m benchmarks.modern``: rounds, threads, clock and idle time. Imports nothing but the
standard library, so that setting the thread count comes before NumPy loads."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

__all__ = ["add_process_options", "apply_process_options", "idle_for", "non_negative_int",
           "non_negative_seconds", "positive_int", "set_thread_count", "thread_environment", "whole_number"]


SPIN_IDLE = 0.15    # seconds: OpenBLAS's idle threads spin for about 0.1 s after a call


def whole_number(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `least` (argparse names the flag in its error)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {least}, got {text!r}") \
                from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value
    return parse


positive_int = whole_number(1)
non_negative_int = whole_number(0)


def non_negative_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more, got {text}")
    return value


def add_process_options(parser: argparse.ArgumentParser, default_rounds: int,
                        several_threads: bool = False) -> None:
    """--rounds, --threads, --clock and --idle: how the side processes are timed. With
    `several_threads`, --threads takes one or more counts (default: 1 and the CPU count)."""
    parser.add_argument("--rounds", type=positive_int, default=None,
                        help=f"interleaved rounds per workload (default {default_rounds})")
    if several_threads:
        parser.add_argument("--threads", type=positive_int, nargs="+",
                            default=sorted({1, os.cpu_count() or 1}),
                            help="threads in every process (BLAS, OpenMP, PyTorch's intra-op threads and "
                                 "ours), one row per count for each workload (default: 1 and the CPU "
                                 "count, both)")
    else:
        parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                            help="BLAS/OpenMP threads in every process (default: the CPU count)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="what a sample measures: wall-clock time (default), or each process's CPU "
                             "time, steadier on a loaded machine and fair between sides only with "
                             "--threads 1 (refused otherwise)")
    parser.add_argument("--idle", type=non_negative_seconds, default=None,
                        help="seconds idle before each sample, for BLAS threads to stop spinning "
                             f"(default {SPIN_IDLE} with more than one thread, 0 with one: no thread "
                             "spins then, and a pause would only let the next sample start on a "
                             "core whose caches the other sides' processes have refilled)")


def apply_process_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse --clock cpu with more than one thread, fill in the default --idle (one count;
    several: ``idle_for`` each), then set the thread count for every process (the largest of
    several)."""
    counts = args.threads if isinstance(args.threads, list) else [args.threads]
    if args.clock == "cpu" and max(counts) != 1:
        parser.error("--clock cpu sums the CPU time of every thread of a process; use it with --threads 1")
    if args.idle is None and not isinstance(args.threads, list):
        args.idle = idle_for(args.threads, None)
    set_thread_count(max(counts))


def idle_for(threads: int, idle: float | None) -> float:
    """The pause before a sample: `idle` if given, else SPIN_IDLE with more than one thread, 0 with one."""
    if idle is not None:
        return idle
    return SPIN_IDLE if threads > 1 else 0.0


def thread_environment(threads: int) -> dict[str, str]:
    """The variables that ask every BLAS and OpenMP runtime (and tinygrad_attn.kernels.parallel) for
    `threads` threads in a process started with them."""
    return {var: str(threads) for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def set_thread_count(threads: int) -> None:
    """Ask every BLAS and OpenMP runtime for `threads` threads, here and in every process started
    from here; works only before NumPy is imported (so this module imports it later)."""
    os.environ.update(thread_environment(threads))
