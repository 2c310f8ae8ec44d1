"""Grad mode and anomaly mode are per thread, as in PyTorch: two real threads whose
steps interleave in a fixed order (each waits for its turn on an Event)."""

import sys
import threading

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.engine import is_grad_enabled
from tinygrad_attn.guards.anomaly import is_anomaly_enabled


def interleave(*scripts):
    """Run each script (a list of (turn, action)) in its own thread, the actions of all scripts in
    the order of their turns 0, 1, 2, …; returns once every thread is done, re-raising the first
    error an action raised."""
    turns = sorted(turn for script in scripts for turn, _ in script)
    assert turns == list(range(len(turns)))
    go = [threading.Event() for _ in range(len(turns) + 1)]
    errors = []

    def play(script):
        for turn, action in script:
            assert go[turn].wait(300), f"turn {turn} never came"
            try:
                if not errors:
                    action()
            except BaseException as error:       # noqa: B036 - handed to the main thread
                errors.append(error)
            go[turn + 1].set()

    threads = [threading.Thread(target=play, args=(script,)) for script in scripts]
    for t in threads:
        t.start()
    go[0].set()
    for t in threads:
        t.join(300)
    if errors:
        raise errors[0]


def test_no_grad_entered_and_left_by_two_threads_out_of_order_leaves_grad_on_everywhere():
    """A enters, B enters, A leaves, B leaves: with one process-wide flag, B's exit restored the
    False that B saw on entry, and every later backward failed."""
    blocks, seen = {}, []

    def enter(name):
        blocks[name] = ta.no_grad()
        blocks[name].__enter__()
        seen.append((name, "in", is_grad_enabled()))

    def leave(name):
        blocks[name].__exit__(None, None, None)
        seen.append((name, "out", is_grad_enabled()))

    interleave([(0, lambda: enter("A")), (2, lambda: leave("A"))],
               [(1, lambda: enter("B")), (3, lambda: leave("B"))])
    assert seen == [("A", "in", False), ("B", "in", False), ("A", "out", True), ("B", "out", True)]
    assert is_grad_enabled()
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_one_threads_no_grad_does_not_stop_another_thread_recording():
    x = ta.Tensor([1.0, -2.0, 3.0], requires_grad=True)
    results, blocks = {}, {}

    def a_enters():
        blocks["A"] = ta.no_grad()
        blocks["A"].__enter__()

    def a_computes():
        results["A"] = x * 3.0

    def b_trains():                 # while A sits inside no_grad
        y = (x * x).tanh().sum()
        y.backward()
        results["B"] = y

    interleave([(0, a_enters), (2, a_computes), (3, lambda: blocks["A"].__exit__(None, None, None))],
               [(1, b_trains)])
    assert results["A"].node is None and not results["A"].requires_grad
    assert results["B"].node is not None
    np.testing.assert_allclose(x.grad, 2 * x.data * (1 - np.tanh(x.data ** 2) ** 2), rtol=1e-6)


def test_anomaly_mode_checks_only_the_thread_that_turned_it_on():
    x = ta.Tensor([0.0, 1.0], requires_grad=True)
    outcome, blocks = {}, {}

    def a_enters():
        blocks["A"] = ta.detect_anomaly()
        blocks["A"].__enter__()
        outcome["A on"] = is_anomaly_enabled()

    def b_logs_zero():              # −inf outside anomaly mode: allowed, as in PyTorch
        outcome["B on"] = is_anomaly_enabled()
        outcome["B"] = x.log().numpy()

    def a_logs_zero():
        with pytest.raises(ta.AnomalyError, match=r"log: forward output \(2,\) holds NaN or Inf; its "
                                                  r"inputs were finite, so this op made them"):
            x.log()
        outcome["A raised"] = True

    def a_leaves():
        blocks["A"].__exit__(None, None, None)

    interleave([(0, a_enters), (2, a_logs_zero), (3, a_leaves)], [(1, b_logs_zero)])
    assert outcome["A on"] and not outcome["B on"] and outcome["A raised"]
    assert outcome["B"].tolist() == [-np.inf, 0.0]
    assert not is_anomaly_enabled()
    assert x.log().numpy()[0] == -np.inf          # off again: no error in the main thread


def test_anomaly_mode_entered_and_left_out_of_order_by_two_threads_ends_off():
    blocks, seen = {}, []

    def enter(name):
        blocks[name] = ta.detect_anomaly()
        blocks[name].__enter__()

    def leave(name):
        blocks[name].__exit__(None, None, None)
        seen.append(is_anomaly_enabled())

    interleave([(0, lambda: enter("A")), (2, lambda: leave("A"))],
               [(1, lambda: enter("B")), (3, lambda: leave("B"))])
    assert seen == [False, False] and not is_anomaly_enabled()
    assert ta.Tensor([0.0]).log().numpy()[0] == -np.inf


def test_backward_from_several_threads_into_shared_parameters_adds_every_pass():
    """Four threads each backprop 500 times through one shared Linear, switching threads as often
    as Python allows: the grads are exactly 2,000 times one pass's. The inputs, weights and
    cotangent are small integers, so every sum is exact in float32 and any lost pass shows."""
    rng = np.random.default_rng(0)
    lin = ta.nn.Linear(5, 3)
    with ta.no_grad():
        lin.weight.data[...] = rng.integers(-3, 4, lin.weight.shape)
        lin.bias.data[...] = rng.integers(-3, 4, lin.bias.shape)
    x = ta.Tensor(rng.integers(-3, 4, (4, 5)).astype(np.float32))
    cotangent = rng.integers(-3, 4, (4, 3)).astype(np.float32)
    (lin(x) * cotangent).sum().backward()
    one_pass = {name: p.grad.copy() for name, p in lin.named_parameters()}
    assert all(np.abs(g).max() > 0 for g in one_pass.values())
    lin.zero_grad()
    threads, passes = 4, 500
    start = threading.Barrier(threads)
    errors = []

    def run():
        try:
            start.wait(300)
            for _ in range(passes):
                (lin(x) * cotangent).sum().backward()
        except BaseException as error:       # noqa: B036 - handed to the main thread
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=run) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(300)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    for name, p in lin.named_parameters():
        np.testing.assert_array_equal(p.grad, threads * passes * one_pass[name], err_msg=name)
