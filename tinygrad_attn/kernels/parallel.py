"""Threads over the batch axes: the one place where a kernel's work is split across the cores.

Attention's heads and batch rows are independent: the same kernel runs on each. NumPy releases
the GIL inside its ufuncs and BLAS calls, so Python threads that each run the kernel on their own
slice of the batch axes run at the same time without a compiler. ``over_batch(body, batch)`` cuts
the batch shape into one piece per thread along one axis and calls ``body(index)`` for each, where
``index`` is a tuple of slices over the batch axes; ``piece(x, index)`` is an input's part of it.
The body writes its results into arrays made beforehand (or returns them): each piece runs exactly
the operations the whole batch would, element for element, so the results are bit-identical to
one thread's. With one thread (or work too small to be worth it: ``min_work``) the body is called
once, with ``index = ()``: the kernel as the docs write it, on the whole batch. The other pieces
run on helper threads that wait for work between splits (``_Helper``), held to cores other than
the caller's while they run (``_own_cores``); one split at a time uses them.

How many threads: ``threads.get_threads()``, the count the matrix products use too: one unless
asked for more (``set_threads(n)``, ``--threads N``, TINYGRAD_ATTN_THREADS) or, for the text model
and real shapes, the cores other processes leave idle (``threads.py`` says why).

The pieces halve the work exactly (in CPU time, run apart); running them at once costs more CPU
time than apart (the cores' shared cache, most likely) and each split waits for a sleeping thread
to wake, which a short piece feels and a long one does not. Where no core is free the split cannot
gain. What it gains, and where it loses, is measured in ``benchmarks/README.md`` ("Every core")
with ``python -m benchmarks`` and ``python -m benchmarks.scaling``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .threads import get_threads, openblas

__all__ = ["BUSY_SHARE", "MIN_WORK", "MIN_WORK_CORES_BUSY", "min_work", "over_batch", "piece", "split_axis"]

T = TypeVar("T")

# Below this many elements of work (attention: score elements, batch × Tq × Tk) the batch is not
# split: handing a piece to another thread costs as much as a few thousand scores' work.
MIN_WORK = 1 << 15

# The threshold while other threads of this process kept a core busy since the last call
# (``_cores_busy_elsewhere``): BLAS's own, which spin for a while after each threaded product (the
# linear layers'), on the core a helper needs; the helper then gets part of it: the nanoGPT text
# step (196,608 scores a layer) stays whole, attention at n = 256 alone (262,144) and flash at
# n = 2048 split (benchmarks/README.md, "Every core").
MIN_WORK_CORES_BUSY = 1 << 21
BUSY_SHARE = 0.25       # other threads' CPU time, as a share of the time since the last call, that is "busy"

_worker = threading.local()                 # .busy: this thread runs a piece (no nested split)
_last_call: tuple | None = None             # (thread, wall, process CPU, its CPU) as over_batch last ended


class _Helper:
    """A thread that runs one piece at a time, handed over by two locks used as signals: ``go``
    (released: a piece is waiting) and ``done`` (released: its result or error is in). Waking it
    costs one lock release, not ThreadPoolExecutor's queue, future and condition (the hand-off's
    cost, with the other core busy and idle: benchmarks/README.md, "Every core")."""

    def __init__(self, number: int):
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.job: tuple = ()
        self.outcome: tuple = ()
        self.cpu: int | None = None             # the core it is held to (_place), None: any
        self.thread = threading.Thread(target=self._serve, name=f"tinygrad_attn_{number}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            self.go.acquire()
            body, index = self.job
            try:
                self.outcome = (True, _run_piece(body, index))
            except BaseException as error:      # handed to the caller, raised there
                self.outcome = (False, error)
            self.job = ()
            self.done.release()

    def start(self, body: Callable[[tuple], Any], index: tuple) -> None:
        self.job = (body, index)
        self.go.release()

    def finish(self) -> tuple:
        """(True, result) or (False, error), once the piece is done."""
        self.done.acquire()
        outcome, self.outcome = self.outcome, ()       # the helper keeps no reference to the result
        return outcome


_helpers: list[_Helper] = []
_crew_lock = threading.Lock()               # held by the over_batch call whose pieces the helpers run


def _crew(size: int) -> list[_Helper]:
    """`size` helper threads (more are started the first time more are asked for)."""
    while len(_helpers) < size:
        _helpers.append(_Helper(len(_helpers) + 1))
    return _helpers[:size]


@functools.cache
def _current_cpu() -> Callable[[], int] | None:
    """The C library's sched_getcpu (the core the calling thread runs on now), or None."""
    try:
        getcpu = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError, TypeError):
        return None
    getcpu.restype = ctypes.c_int
    return getcpu


@contextmanager
def _own_cores(helpers: list[_Helper]) -> Iterator[None]:
    """While the pieces run, the caller held to the core it is on and each helper to another of
    its own (Linux; with fewer cores than pieces, or no way to tell, all stay free). The caller's
    cores are given back afterwards; a helper keeps its core until the caller moves.

    Left free after the machine sat idle, a woken helper was put on the caller's core, or the
    caller on the helper's, and the pieces took turns on one core: the idle core counted as taken
    (a split attention step after the cores sat idle was slower free than held: measured in
    benchmarks/README.md, "Every core")."""
    getcpu = _current_cpu()
    if getcpu is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    mine, here = os.sched_getaffinity(0), getcpu()
    others = [cpu for cpu in sorted(mine) if cpu != here]
    if here not in mine or len(others) < len(helpers):
        yield
        return
    try:
        for helper, cpu in zip(helpers, others):
            if helper.cpu != cpu and helper.thread.native_id is not None:
                os.sched_setaffinity(helper.thread.native_id, {cpu})
                helper.cpu = cpu
        os.sched_setaffinity(0, {here})
    except OSError:             # not allowed here (a sandbox): the threads stay free
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def _forget_helpers() -> None:
    """In a forked child the helpers' threads do not exist: start new ones when asked."""
    global _crew_lock
    _helpers.clear()
    _crew_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while pieces run: each piece's products then run on its own core. With
    BLAS's threads as well, the two spin-wait on each other and OpenBLAS runs one threaded product
    at a time, slower than one thread per piece. Only the split
    that holds the helpers (``_crew_lock``) sets it, so no two splits undo each other's setting."""
    blas = openblas()
    if blas is None or blas[0]() <= 1:
        yield
        return
    get, set_count = blas
    before = get()
    set_count(1)
    try:
        yield
    finally:
        set_count(before)


def _run_piece(body: Callable[[tuple], T], index: tuple) -> T:
    _worker.busy = True
    try:
        return body(index)
    finally:
        _worker.busy = False


def split_axis(batch: tuple[int, ...], fixed: int | None = None, threads: int = 2) -> int | None:
    """The batch axis the pieces are cut along, or None: of the axes of size ≥ 2 other than `fixed`
    (an axis whose results are summed, such as the group of query heads sharing a kv head), the
    one whose largest piece among `threads` is the smallest share of the batch (the first of
    those that tie). Batch (2, 4) among 4 threads is cut along its 4 heads (a quarter each), not
    its 2 rows (half each): with more threads than cores the slowest piece sets the time."""
    best, best_share = None, 1.0
    for axis, size in enumerate(batch):
        if size >= 2 and axis != fixed:
            share = -(-size // min(threads, size)) / size       # ⌈size / pieces⌉ / size
            if share < best_share:
                best, best_share = axis, share
    return best


def _cores_busy_elsewhere() -> bool:
    """Whether threads other than the caller used more than BUSY_SHARE of a core since the
    caller's last ``over_batch`` call ended (our helpers sleep then: the CPU time is BLAS's spinning
    threads', or the program's own). False on a caller's first call."""
    if _last_call is None or _last_call[0] != threading.get_ident():
        return False
    _, wall, process, caller = _last_call
    others = (time.process_time() - process) - (time.thread_time() - caller)
    return others > BUSY_SHARE * (time.perf_counter() - wall)


def min_work() -> int:
    """The least work ``over_batch`` splits now: MIN_WORK, or MIN_WORK_CORES_BUSY while other
    threads keep a core busy (see both)."""
    return MIN_WORK_CORES_BUSY if _cores_busy_elsewhere() else MIN_WORK


def _note_call_end() -> None:
    global _last_call
    _last_call = (threading.get_ident(), time.perf_counter(), time.process_time(), time.thread_time())


def over_batch(body: Callable[[tuple], T], batch: tuple[int, ...], work: int, *, xp: Any = None,
               fixed: int | None = None) -> list[T]:
    """``body(index)`` for each piece of the batch shape, one piece per thread; the results in order.

    `work` is the size of the job (split only from ``min_work()``); `xp` the array module (only NumPy's
    arrays are split: CuPy runs its own kernels in parallel); `fixed` an axis never cut (see
    split_axis). Called from inside a piece, the body runs whole on that thread.
    """
    threads = get_threads()
    if threads == 1 or getattr(_worker, "busy", False) or (xp is not None and xp.__name__ != "numpy"):
        return [body(())]
    try:
        return _split(body, batch, work, threads, fixed)
    finally:
        _note_call_end()


def _split(body: Callable[[tuple], T], batch: tuple[int, ...], work: int, threads: int,
           fixed: int | None) -> list[T]:
    """over_batch's pieces among `threads` threads, or the body whole where that does not pay."""
    axis = split_axis(batch, fixed, threads)
    if axis is None or work < min_work() or not _crew_lock.acquire(blocking=False):
        return [body(())]           # (the lock: another thread's split has the helpers)
    try:
        parts = min(threads, batch[axis])
        bounds = [batch[axis] * i // parts for i in range(parts + 1)]
        indices = [(slice(None),) * axis + (slice(a, b),) for a, b in zip(bounds[:-1], bounds[1:])]
        helpers = _crew(parts - 1)
        with _own_cores(helpers), _one_blas_thread():
            for helper, index in zip(helpers, indices[1:]):
                helper.start(body, index)
            try:
                first = _run_piece(body, indices[0])
            finally:            # every piece is done writing before anything is returned or raised
                outcomes = [helper.finish() for helper in helpers]
    finally:
        _crew_lock.release()
    for ok, value in outcomes:
        if not ok:
            raise value
    return [first] + [value for _, value in outcomes]


def piece(x: Any, index: tuple, batch_ndim: int) -> Any:
    """`x`'s part of the batch piece `index`: `x` broadcasts to (*batch, a, b) with batch_ndim batch
    axes; an axis where `x` has size 1 (broadcast) is kept whole. None stays None."""
    if x is None or not index:
        return x
    lead = x.ndim - 2                           # x's batch axes, aligned to the right of the batch
    if lead <= 0:
        return x
    offset = batch_ndim - lead
    cut = tuple(index[offset + j] if offset + j < len(index) and x.shape[j] != 1 else slice(None)
                for j in range(lead))
    return x[cut]
