"""Busy processes beside the sides (``python -m benchmarks --busy N``): N processes that each keep
one core busy for as long as the timing lasts, as other people's work does on a shared machine.

Each is a Python loop with nothing in it; it ends when ``busy_processes`` leaves its block (the
timing done, failed or interrupted) and, should this process be killed first, as soon as it finds
that its parent is gone. Imports nothing but the standard library.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SPIN", "busy_processes", "load_average"]

# Busy while its parent is the process whose id it is given (gone: the child has another parent).
SPIN = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, or 'unknown' where the system gives none."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


@contextmanager
def busy_processes(n: int) -> Iterator[list[subprocess.Popen]]:
    """`n` busy processes while the block runs (none for 0), all stopped when it ends."""
    processes: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            processes.append(subprocess.Popen([sys.executable, "-c", SPIN, str(os.getpid())],
                                              stdin=subprocess.DEVNULL))
        yield processes
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()
