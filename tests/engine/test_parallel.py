"""Attention split over the batch axes among threads (tinygrad_attn/kernels/parallel.py): the same bits as
one thread, every piece run, and the thread count taken from the settings, never assumed."""

import threading

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.kernels import parallel
from tinygrad_attn.kernels.threads import openblas, set_threads


@pytest.fixture(autouse=True)
def environment_threads():
    """Every test starts and ends following the environment."""
    set_threads(None)
    yield
    set_threads(None)


def attention_grads(kernel, q, k, v, threads, **options):
    """Output and dQ, dK, dV of `kernel` with the batch split among `threads` threads, from a
    random cotangent (the same in every call)."""
    set_threads(threads)
    leaves = [ta.Tensor(a, requires_grad=True) for a in (q, k, v)]
    out = kernel(*leaves, **options)
    out.backward(np.random.default_rng(1).standard_normal(out.shape).astype(q.dtype))
    return [out.numpy()] + [t.grad for t in leaves]


# (q, k, v shapes, options): causal; a padding mask and a float mask with batch axes; grouped-query
# attention with 2 kv heads (the cut axis) and with 1 (only the query-head axis can be cut, and
# backward, which sums over it, is not cut); a sliding window with blocks that leave a remainder.
CASES = [
    (((2, 3, 96, 16), (2, 3, 96, 16), (2, 3, 96, 8)), {"is_causal": True}),
    (((3, 2, 80, 8), (1, 2, 96, 8), (3, 2, 96, 8)),
     {"mask": "padding and bias"}),
    (((1, 4, 96, 8), (1, 2, 96, 8), (1, 2, 96, 8)), {"is_causal": True, "enable_gqa": True}),
    (((1, 4, 128, 8), (1, 1, 128, 8), (1, 1, 128, 8)), {"is_causal": True, "enable_gqa": True}),
    (((4, 96, 8), (4, 96, 8), (4, 96, 8)), {"is_causal": True, "window": 40}),
]


def case_arrays(shapes, options, rng, dtype):
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in shapes)
    options = dict(options)
    if options.get("mask") == "padding and bias":
        n_q, n_k = shapes[0][-2], shapes[1][-2]
        keep = np.ones((3, 1, 1, n_k), dtype=bool)
        keep[1, ..., 70:] = False                       # batch row 1: its last keys are padding
        bias = rng.standard_normal((n_q, n_k)).astype(dtype)
        options["mask"] = ta.Tensor(np.where(keep, bias, -np.inf).astype(dtype))
    return q, k, v, options


@pytest.mark.parametrize("kernel", [F.scaled_dot_product_attention, F.flash_attention],
                         ids=["plain", "flash"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes,options", CASES)
def test_split_batch_gives_the_same_bits_as_one_thread(kernel, dtype, shapes, options, rng, monkeypatch):
    q, k, v, options = case_arrays(shapes, options, rng, dtype)
    if kernel is F.flash_attention:
        options["block_size"] = 32
    monkeypatch.setattr(parallel, "MIN_WORK", 1)       # split whatever the size
    monkeypatch.setattr(parallel, "MIN_WORK_CORES_BUSY", 1)
    pieces = []
    run_piece = parallel._run_piece
    monkeypatch.setattr(parallel, "_run_piece",
                        lambda body, index: pieces.append(index) or run_piece(body, index))
    one = attention_grads(kernel, q, k, v, 1, **options)
    assert pieces == []
    for threads in (2, 3, 7):                           # 7: more threads than the axis has entries
        split = attention_grads(kernel, q, k, v, threads, **options)
        assert len(pieces) >= 2, "the batch was split"      # (backward too, unless a group is summed)
        pieces.clear()
        for name, a, b in zip(("out", "dQ", "dK", "dV"), one, split):
            assert a.shape == b.shape and a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=f"{name} with {threads} threads")
    # and the values are attention's: the plain kernel against the formula in float64
    if kernel is F.scaled_dot_product_attention and dtype == np.float64 and "window" not in options:
        reference = F.scaled_dot_product_attention(*(ta.Tensor(a) for a in (q, k, v)), fused=False,
                                                   **options)
        np.testing.assert_allclose(one[0], reference.numpy(), rtol=1e-10, atol=1e-12)


def test_every_piece_runs_once_at_the_same_time_as_the_others():
    seen = []
    together = threading.Barrier(3, timeout=10)     # broken (an error) unless all 3 run at once

    def body(index):
        seen.append((index, threading.current_thread().name))
        together.wait()
        return index

    set_threads(3)
    results = parallel.over_batch(body, (1, 7, 2), work=parallel.min_work())
    assert results == [(slice(None), slice(0, 2)), (slice(None), slice(2, 4)), (slice(None), slice(4, 7))]
    assert sorted(str(i) for i, _ in seen) == sorted(str(i) for i in results)
    assert len({name for _, name in seen}) == 3        # the caller's thread and two of the pool's


def test_small_work_a_nested_call_and_one_thread_run_whole():
    set_threads(4)
    assert parallel.over_batch(lambda i: i, (8,), work=parallel.min_work() - 1) == [()]
    assert parallel.over_batch(lambda i: parallel.over_batch(lambda j: j, (8,), work=parallel.min_work()),
                               (8,), work=parallel.min_work()) == [[()]] * 4
    assert parallel.over_batch(lambda i: i, (8, 4), work=parallel.min_work(), fixed=0) == [
        (slice(None), slice(a, a + 1)) for a in range(4)]
    set_threads(1)
    assert parallel.over_batch(lambda i: i, (8,), work=10**9) == [()]


def test_a_failing_piece_raises_after_every_piece_is_done():
    set_threads(2)
    done = []

    def body(index):
        if index[0].start == 0:
            raise ValueError("piece 0 fails")
        done.append(index)

    with pytest.raises(ValueError, match="piece 0 fails"):
        parallel.over_batch(body, (4,), work=parallel.min_work())
    assert done == [(slice(2, 4),)]


@pytest.fixture
def blas():
    """OpenBLAS's (get, set) of its thread count, the count put back after the test."""
    found = openblas()
    if found is None:
        pytest.skip("NumPy's BLAS here is not OpenBLAS")
    before = found[0]()
    yield found
    found[1](before)


def test_blas_threads_are_given_back_after_a_split(blas):
    get, put = blas
    put(2)
    set_threads(2)
    during = parallel.over_batch(lambda i: get(), (4,), work=parallel.min_work())
    assert during == [1, 1] and get() == 2


def test_a_split_started_while_another_thread_splits_runs_whole():
    set_threads(2)
    inside, release, second = threading.Event(), threading.Event(), []

    def first_body(index):
        inside.set()
        assert release.wait(timeout=10)
        return index

    first = []
    caller = threading.Thread(target=lambda: first.append(parallel.over_batch(first_body, (4,),
                                                                                 work=parallel.min_work())))
    caller.start()
    try:
        assert inside.wait(timeout=10)
        second.append(parallel.over_batch(lambda i: i, (4,), work=parallel.min_work()))
    finally:
        release.set()
        caller.join(timeout=10)
    assert second == [[()]]                            # the helpers were taken: one piece, this thread
    assert first == [[(slice(0, 2),), (slice(2, 4),)]]
    halves = [(slice(0, 2),), (slice(2, 4),)]
    assert parallel.over_batch(lambda i: i, (4,), work=parallel.min_work()) == halves


def test_the_cut_axis_gives_the_smallest_largest_piece():
    assert parallel.split_axis((1, 4)) == 1                     # the only axis that can be cut
    assert parallel.split_axis((2, 4), threads=2) == 0          # halves either way: the first
    assert parallel.split_axis((2, 4), threads=4) == 1          # quarters, not halves
    assert parallel.split_axis((2, 3), threads=4) == 1          # thirds, not halves
    assert parallel.split_axis((64, 4), threads=8) == 0
    assert parallel.split_axis((3, 2), fixed=0) == 1            # a summed axis is never cut
    assert parallel.split_axis((1, 1)) is None
    set_threads(4)
    assert parallel.over_batch(lambda i: i, (2, 4), work=parallel.min_work()) == [
        (slice(None), slice(a, a + 1)) for a in range(4)]


def test_small_work_is_not_split_while_other_threads_keep_a_core_busy(monkeypatch):
    clock = {"wall": 0.0, "process": 0.0, "thread": 0.0}
    for name, key in (("perf_counter", "wall"), ("process_time", "process"), ("thread_time", "thread")):
        monkeypatch.setattr(parallel.time, name, lambda key=key: clock[key])
    monkeypatch.setattr(parallel, "_last_call", None)
    set_threads(2)
    halves = [(slice(0, 2),), (slice(2, 4),)]
    assert parallel.over_batch(lambda i: i, (4,), work=parallel.MIN_WORK) == halves   # first call
    # 10 ms later; this thread used 8 ms of CPU, other threads 2 ms (a fifth of a core): not busy
    clock.update(wall=0.010, process=0.010, thread=0.008)
    assert parallel.min_work() == parallel.MIN_WORK
    assert parallel.over_batch(lambda i: i, (4,), work=parallel.MIN_WORK) == halves
    # 10 ms more; other threads used 6 ms of it (BLAS's spinning): small work stays whole
    clock.update(wall=0.020, process=0.026, thread=0.012)
    assert parallel.min_work() == parallel.MIN_WORK_CORES_BUSY > parallel.MIN_WORK
    assert parallel.over_batch(lambda i: i, (4,), work=parallel.MIN_WORK) == [()]
    assert len(parallel.over_batch(lambda i: i, (4,), work=parallel.MIN_WORK_CORES_BUSY)) == 2
    # from another thread the last call says nothing: its first call splits
    other = []
    caller = threading.Thread(target=lambda: other.append(parallel.min_work()))
    caller.start()
    caller.join(timeout=10)
    assert other == [parallel.MIN_WORK]


@pytest.mark.skipif(not hasattr(parallel.os, "sched_setaffinity") or parallel._current_cpu() is None,
                    reason="no way to hold a thread to a core here")
def test_the_pieces_run_on_cores_of_their_own_and_the_caller_gets_its_cores_back():
    cores = parallel.os.sched_getaffinity(0)
    if len(cores) < 2:
        pytest.skip("one core")
    set_threads(2)
    held = parallel.over_batch(lambda i: parallel.os.sched_getaffinity(0), (2,), work=parallel.min_work())
    assert all(len(h) == 1 for h in held) and held[0] != held[1] and held[0] | held[1] <= cores
    assert parallel.os.sched_getaffinity(0) == cores


def test_a_split_runs_where_threads_may_not_be_held_to_cores(monkeypatch):
    def refused(*args):
        raise PermissionError("sched_setaffinity: not allowed")

    monkeypatch.setattr(parallel.os, "sched_setaffinity", refused, raising=False)
    set_threads(2)
    halves = [(slice(0, 2),), (slice(2, 4),)]
    assert parallel.over_batch(lambda i: i, (4,), work=parallel.min_work()) == halves
