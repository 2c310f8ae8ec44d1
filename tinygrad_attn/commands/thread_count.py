"""``--threads N`` for the commands that compute (train, sample, step, graph, explore, export), and
the line each prints on stderr before its own output: how many threads the run uses, and why that
many. ``run_with_threads`` runs a command inside ``kernels.threads.thread_settings``, which decides."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..kernels import threads
from ..kernels.threads import Count, thread_count, thread_settings

__all__ = ["add_threads_option", "describe", "run_with_threads", "say_threads"]


def _count(text: str) -> int:
    """--threads' N: a whole number of at least 1 (argparse names the flag in its error)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"N must be a whole number of threads, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"N must be at least 1, got {n}")
    return n


def add_threads_option(parser: argparse.ArgumentParser, idle_runs: str | None = None,
                       follows_idle_cores: Callable[[argparse.Namespace], bool] | None = None) -> None:
    """--threads N for a command; `follows_idle_cores(args)` says whether a run uses the idle cores
    by default (`idle_runs` names those runs in the help), else one thread."""
    default = "1" if idle_runs is None else \
        f"1, or for {idle_runs} every core other processes leave idle, looked at every second"
    parser.add_argument("--threads", type=_count, metavar="N",
                        help="compute on N threads (the matrix products and attention's heads), however "
                             "busy the machine is; default: TINYGRAD_ATTN_THREADS (else "
                             "OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS) if set, else "
                             f"{default}: a second thread loses time wherever other processes keep the "
                             "cores busy")
    parser.set_defaults(follows_idle_cores=follows_idle_cores or (lambda args: False))


def run_with_threads(args: argparse.Namespace) -> int:
    """Run the parsed command; one that takes --threads under the count it asks for (else the
    environment's, the idle cores' or one: ``kernels.threads.thread_settings``), restored after."""
    if not hasattr(args, "threads"):
        return args.run(args)
    with thread_settings(args.threads, follow_idle_cores=args.follows_idle_cores(args)):
        return args.run(args)


def describe(count: Count) -> str:
    """The line that says how many threads a run uses and what set that."""
    n, source = count
    if source == "set_threads":
        return f"threads: {n} (--threads {n})"
    if source == "idle cores":
        return (f"threads: {n} for now: the cores (of {threads.usable_cores()}) that other processes leave "
                "idle, looked at again every second (--threads N fixes the count)")
    if source == "default":
        return ("threads: 1 (the default: a second thread gains little here and loses much wherever "
                "other processes keep the cores busy; --threads N for more)")
    return f"threads: {n} ({source}={n} in the environment; --threads N overrides it)"


def say_threads() -> None:
    """Print the line of the count in force now on stderr, before a run's own output."""
    print(describe(thread_count()), file=sys.stderr, flush=True)
