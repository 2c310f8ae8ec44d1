"""Our side alone with 1, 2, … threads: the scaling table of ``tinygrad_attn.kernels.parallel``.

    python -m benchmarks.scaling [--threads 1 2] [--only attention flash train] [--rounds 10]
                                 [--no-keep-freed-memory]

One process builds each workload once (float32) and times it with each thread count in turn,
round after round, so that the machine's load lands on every count alike: each count sets
``threads.set_threads(n)`` (OpenBLAS's threads and the split's). A row gives, per count, the median wall
time of a step, its CPU time (all threads), and the step's critical path in CPU time: the calling
thread's CPU time with every split counted as its slowest piece. On a machine whose cores are free
the wall time approaches the critical path; on a loaded machine (more runnable threads than
cores) the wall time says more about the scheduler than about the split, and the critical path,
measured in CPU time, is what the split can give. The load average is printed with the table.
As in ``python -m benchmarks``, glibc's malloc keeps freed memory for reuse (``--no-keep-freed-memory``
for its own thresholds, under which a third of an n = 256 attention step is page faults).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence

from .options import SPIN_IDLE, set_thread_count

KEYS = ("attention", "flash", "train")


class CriticalPath:
    """Wraps ``parallel._run_piece`` to time each piece in its thread's CPU time; ``step_path``
    is the calling thread's CPU time over a step, each split counted as its slowest piece."""

    def __init__(self, parallel):
        self.parallel, self.run_piece = parallel, parallel._run_piece
        self.splits: dict = {}          # a split's body (held until the next step) → its pieces
        parallel._run_piece = self._timed

    def _timed(self, body, index):
        start = time.thread_time()
        try:
            return self.run_piece(body, index)
        finally:
            self.splits.setdefault(body, []).append((on_main_thread(), time.thread_time() - start))

    def step_path(self, step) -> float:
        self.splits.clear()
        start = time.thread_time()
        step()
        own = time.thread_time() - start
        for pieces in self.splits.values():
            own += max(t for _, t in pieces) - sum(t for main, t in pieces if main)
        return own

    def close(self) -> None:
        self.parallel._run_piece = self.run_piece


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, os.cpu_count() or 1}),
                        help="thread counts (default: 1 and the CPU count)")
    parser.add_argument("--only", nargs="+", choices=KEYS, default=list(KEYS))
    parser.add_argument("--rounds", type=int, default=10, help="rounds per workload (default 10)")
    parser.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction, default=True,
                        help="glibc keeps freed memory for reuse, as `tinygrad-attn train` and "
                             "python -m benchmarks set it (default: yes)")
    args = parser.parse_args(argv)
    args.threads = sorted(set(args.threads))
    if min(args.threads) < 1 or args.rounds < 1:
        parser.error("--threads and --rounds must be at least 1")
    set_thread_count(max(args.threads))         # before NumPy loads: OpenBLAS starts this many threads
    import numpy as np

    from tinygrad_attn.kernels import parallel, threads
    from tinygrad_attn.training.host_memory import keep_freed_memory

    from . import specs
    from .sides import ours
    blas = threads.openblas()
    blas_before = None if blas is None else blas[0]()
    kept = args.keep_freed_memory and keep_freed_memory()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"OpenBLAS: {'found' if blas else 'not found (its threads stay as set)'}; "
          f"glibc malloc keeps freed memory: {'yes' if kept else 'no'}")
    print("| workload | threads | wall ms a step | CPU ms a step | critical path, CPU ms | "
          "wall vs 1 thread |\n|---|---|---|---|---|---|")
    path = CriticalPath(parallel)
    try:
        for workload in (w for w in specs.rows(False) if w.key in args.only):
            bench = ours.build(workload.name, workload.sizes, np.float32)
            bench.step()
            samples = {n: {"wall": [], "cpu": [], "path": []} for n in args.threads}
            for _ in range(args.rounds + 1):            # the first round warms each count up
                for n in args.threads:
                    threads.set_threads(n)          # OpenBLAS's and over_batch's
                    time.sleep(SPIN_IDLE if n > 1 else 0)
                    wall, cpu = time.perf_counter(), time.process_time()
                    critical = path.step_path(bench.step)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    for name, value in (("wall", wall), ("cpu", cpu), ("path", critical)):
                        samples[n][name].append(value)
            for n in args.threads:
                s = {name: statistics.median(values[1:]) * 1e3 for name, values in samples[n].items()}
                ratio = statistics.median(a / b for a, b in zip(samples[args.threads[0]]["wall"][1:],
                                                                 samples[n]["wall"][1:]))
                print(f"| {workload.label} | {n} | {s['wall']:.2f} | {s['cpu']:.2f} | {s['path']:.2f} | "
                      f"{ratio:.2f}× |", flush=True)
    finally:
        path.close()
        threads.set_threads(None)
        if blas is not None:
            blas[1](blas_before)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
