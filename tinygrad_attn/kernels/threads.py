"""How many threads tinygrad_attn computes on: one count for OpenBLAS's matrix products and for
``over_batch``'s split of attention's heads, set together, and why it is one unless asked.

The count in force, the first of these that applies:

1. ``set_threads(n)`` (the commands' ``--threads N``);
2. the environment: the first of TINYGRAD_ATTN_THREADS, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
   MKL_NUM_THREADS that holds a whole number ≥ 1 (after ours, OpenBLAS's own order);
3. inside ``thread_settings(follow_idle_cores=True)`` (``train text``, the commands run on a
   model folder): the cores this process may run on that other processes leave idle, at least
   one; ``check_idle_cores()`` (the training loop calls it after every step) looks again once
   CHECK_SECONDS have passed;
4. else one: what ``import tinygrad_attn`` sets.

Why one by default: OpenBLAS's threads spin, waiting for each other, between the parts of a
product. Where another process holds a core, the system puts one of them aside for its time slice,
and the others spin until it comes back: each product, and so each step, takes several times what
one thread takes. The toy tasks gain little from a second core even when it is idle, and one
thread keeps their runs the same to the last bit however busy the machine; the text model's and a
real model's products are large enough to gain, hence step 3, which lets them use a core only while
no other process wants it. ``benchmarks/README.md`` ("Threads on a busy machine")
has the measurements. Without /proc/stat (Linux) idle cores cannot be seen, and step 3 gives one.
OpenBLAS is set through its own functions (``openblas()``); another BLAS follows only the
environment it was loaded with.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

__all__ = ["BUSY_SHARE", "CHECK_SECONDS", "ENVIRONMENT", "Count", "apply", "check_idle_cores", "get_threads",
           "idle_threads", "openblas", "set_threads", "thread_count", "thread_settings", "usable_cores"]

ENVIRONMENT = ("TINYGRAD_ATTN_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CHECK_SECONDS = 1.0     # how often ``check_idle_cores`` looks at the other processes' use again
BUSY_SHARE = 0.2        # a core the other processes used more than this share of is not idle
_SHORTEST_LOOK = 0.1    # seconds: a shorter window says too little (the clock ticks in 1/100 s)


class Count(NamedTuple):
    """The thread count in force and where it comes from: "set_threads", an environment variable's
    name, "idle cores" (``thread_settings``) or "default"."""

    threads: int
    source: str


class _Look(NamedTuple):
    """What the machine's usable cores had done at one moment: wall-clock seconds, the seconds
    their CPUs were busy (every process), and this process's CPU seconds."""

    wall: float
    busy: float
    own: float


_asked: int | None = None               # set_threads' value; None: not asked
_following = False                      # inside thread_settings(follow_idle_cores=True)
_idle_threads = 1                       # what the last look found (step 3)
_blas_set: int | None = None            # what apply last gave OpenBLAS


def usable_cores() -> int:
    """The cores this process may run on."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return len(cores) if cores else (os.cpu_count() or 1)


def _from_environment() -> Count | None:
    for name in ENVIRONMENT:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return Count(int(value), name)
    return None


def thread_count() -> Count:
    """The count in force and where it comes from (see the module's docstring)."""
    if _asked is not None:
        return Count(_asked, "set_threads")
    return _from_environment() or (Count(_idle_threads, "idle cores") if _following else Count(1, "default"))


def get_threads() -> int:
    """How many threads the products and ``over_batch`` use now."""
    return thread_count().threads


def set_threads(n: int | None) -> None:
    """Compute on `n` threads from now on, whatever else runs on the machine; None: follow the
    environment, else the idle cores or one (see the module's docstring)."""
    global _asked
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"set_threads: n must be a whole number ≥ 1 or None, got {n!r}")
    _asked = n
    apply()


@functools.cache
def openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS NumPy loaded, found among this process's
    libraries (/proc/self/maps: Linux), or None (another BLAS, another system)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        return None
    for path in paths:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            get, put = f"{prefix}_get_num_threads{suffix}", f"{prefix}_set_num_threads{suffix}"
            if hasattr(lib, get) and hasattr(lib, put):
                getattr(lib, put).argtypes = [ctypes.c_int]
                return getattr(lib, get), getattr(lib, put)
    return None


def apply() -> None:
    """Give OpenBLAS the count in force (``over_batch`` reads it at each call). NumPy must be
    loaded; ``import tinygrad_attn`` calls this once it is."""
    global _blas_set
    threads = get_threads()
    blas = openblas()
    if blas is not None and threads != _blas_set:
        blas[1](threads)
        _blas_set = threads


def _busy_seconds(cores: set[int]) -> float | None:
    """CPU seconds the machine's `cores` have been busy since boot, every process's (/proc/stat:
    user, nice, system, irq, softirq and steal, the last being time another machine took), or None."""
    try:
        with open("/proc/stat") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu") and line[3:4].isdigit()]
        ticks = sum(sum(int(f) for f in (p[1], p[2], p[3], p[6], p[7], p[8]))
                    for p in lines if int(p[0][3:]) in cores)
    except (OSError, ValueError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def _look() -> _Look | None:
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    busy = _busy_seconds(cores) if cores else None
    return None if busy is None else _Look(time.monotonic(), busy, time.process_time())


def idle_threads(before: _Look, now: _Look, cores: int) -> int:
    """Threads for the cores the other processes left idle between two looks: every core, less
    each started past BUSY_SHARE of the others' CPU time per second; at least one."""
    others = max(0.0, (now.busy - before.busy) - (now.own - before.own)) / (now.wall - before.wall)
    taken = max(0, math.ceil(others - BUSY_SHARE))
    return max(1, cores - taken)


_last_look = _look()                    # from the import on: the first window a command looks at


def _look_again() -> None:
    """Keep the count the other processes' use since the last look gives (nothing, where that was
    too short a while ago to tell, or cannot be seen)."""
    global _last_look, _idle_threads
    look = _look()
    if look is not None and _last_look is not None and look.wall - _last_look.wall >= _SHORTEST_LOOK:
        _idle_threads = idle_threads(_last_look, look, usable_cores())
        _last_look = look


def check_idle_cores() -> None:
    """While following the idle cores: once CHECK_SECONDS have passed since the last look, look
    again and give OpenBLAS the count found. Cheap otherwise: the training loop calls it after
    every step."""
    if _following and _last_look is not None and time.monotonic() - _last_look.wall >= CHECK_SECONDS:
        _look_again()
        apply()


@contextmanager
def thread_settings(threads: int | None = None, *, follow_idle_cores: bool = False) -> Iterator[Count]:
    """Within the block: `threads` threads if given (as ``set_threads``), else, with
    `follow_idle_cores`, unless the environment asks for a count, the idle cores (work that gains
    from more than one: the text model, a real model's shapes), looked at now (over the time since
    the last look, or since the import) and again by ``check_idle_cores``. Yields the count in force
    at the start; afterwards the settings are what they were before.

    Example:
        >>> with thread_settings(3) as count:
        ...     count, get_threads()
        (Count(threads=3, source='set_threads'), 3)
    """
    global _asked, _following, _idle_threads
    before = _asked, _following, _idle_threads
    if threads is not None:
        set_threads(threads)
    if follow_idle_cores and not _following:
        _following, _idle_threads = True, 1
        _look_again()
    apply()
    try:
        yield thread_count()
    finally:
        _asked, _following, _idle_threads = before
        apply()
