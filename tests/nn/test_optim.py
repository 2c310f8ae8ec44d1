"""Optimizers against updates computed by hand, clipping, the schedule, and exact resumption."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import optim

GRADS = [np.array([0.5, -1.0]), np.array([0.25, 2.0])]


def run(opt_factory, steps=2):
    p = ta.Tensor(np.array([1.0, -2.0]), requires_grad=True)
    opt = opt_factory([p])
    for g in GRADS[:steps]:
        p.grad = g.copy()
        opt.step()
    return p.data, opt


def test_sgd_momentum_weight_decay_by_hand():
    lr, mu, wd = 0.1, 0.9, 0.01
    p = np.array([1.0, -2.0])
    g1 = GRADS[0] + wd * p
    b = g1
    p = p - lr * b
    g2 = GRADS[1] + wd * p
    b = mu * b + g2
    p = p - lr * b
    np.testing.assert_allclose(run(lambda ps: optim.SGD(ps, lr, momentum=mu, weight_decay=wd))[0], p)
    np.testing.assert_allclose(run(lambda ps: optim.SGD(ps, 0.5))[0],
                               np.array([1.0, -2.0]) - 0.5 * (GRADS[0] + GRADS[1]))


@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_and_adamw_by_hand(decoupled):
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.1
    p = np.array([1.0, -2.0])
    m = v = np.zeros(2)
    for t, g in enumerate(GRADS, start=1):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    cls = optim.AdamW if decoupled else optim.Adam
    np.testing.assert_allclose(run(lambda ps: cls(ps, lr=lr, weight_decay=wd))[0], p, rtol=1e-12)
    assert optim.AdamW([ta.Tensor([1.0], requires_grad=True)]).weight_decay == 0.01


def test_parameters_without_grad_are_skipped_and_zero_grad():
    a, b = ta.Tensor([1.0], requires_grad=True), ta.Tensor([2.0], requires_grad=True)
    opt = optim.Adam([a, b, a], lr=0.1)
    assert len(opt.params) == 2
    a.grad = np.array([1.0])
    opt.step()
    assert b.data[0] == 2.0 and a.data[0] != 1.0
    opt.zero_grad()
    assert a.grad is None


def test_clip_grad_norm_returns_the_norm_before_clipping():
    a, b = ta.Tensor([0.0, 0.0], requires_grad=True), ta.Tensor([0.0], requires_grad=True)
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])
    assert optim.clip_grad_norm([a, b], max_norm=1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(np.concatenate([a.grad, b.grad]), np.array([3.0, 0.0, 4.0]) / 5, rtol=1e-5)
    assert optim.clip_grad_norm([a, b], max_norm=10.0) == pytest.approx(1.0, rel=1e-5)


def test_warmup_cosine_endpoints():
    assert optim.warmup_cosine(0, 1e-3, 10, 100) == pytest.approx(1e-4)
    assert optim.warmup_cosine(9, 1e-3, 10, 100) == pytest.approx(1e-3)
    assert optim.warmup_cosine(55, 1e-3, 10, 100, min_lr=1e-5) == pytest.approx(1e-5 + (1e-3 - 1e-5) / 2)
    assert optim.warmup_cosine(100, 1e-3, 10, 100) == pytest.approx(0.0)


@pytest.mark.parametrize("factory", [lambda ps: optim.AdamW(ps, lr=0.01),
                                     lambda ps: optim.SGD(ps, 0.1, momentum=0.9)])
def test_state_dict_resumes_exactly(factory):
    full, _ = run(factory, steps=2)
    p_half, opt_half = run(factory, steps=1)
    p = ta.Tensor(p_half.copy(), requires_grad=True)
    opt = factory([p])
    opt.load_state_dict(opt_half.state_dict())
    p.grad = GRADS[1].copy()
    opt.step()
    np.testing.assert_array_equal(p.data, full)


def test_bad_arguments():
    with pytest.raises(ValueError, match="got no parameters"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="lr must be a finite number >= 0, got -1"):
        optim.Adam([ta.Tensor([1.0], requires_grad=True)], lr=-1)


def test_adam_counts_steps_per_parameter_like_pytorch():
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    a, b = (ta.Tensor(np.array([1.0]), requires_grad=True) for _ in range(2))
    opt = optim.Adam([a, b], lr=lr)
    a.grad = np.array([0.5])
    opt.step()                              # b has no grad: skipped, and not counted for b
    b.grad = np.array([0.5])
    opt.step()
    g = 0.5                                 # b's first update: m̂ = g, v̂ = g², a step of lr
    expected = 1.0 - lr * ((1 - b1) * g / (1 - b1)) / (np.sqrt((1 - b2) * g * g / (1 - b2)) + eps)
    np.testing.assert_allclose(b.data, [expected], rtol=1e-12)
    assert opt.state_dict()["1.step"] == 1 and opt.state_dict()["0.step"] == 2


def test_clip_grad_norm_does_not_scale_a_shared_gradient_twice():
    a, b = ta.Tensor([1.0, 1.0], requires_grad=True), ta.Tensor([1.0, 1.0], requires_grad=True)
    a.grad = b.grad = np.array([3.0, 4.0])  # the engine may hand two leaves one array
    total = optim.clip_grad_norm([a, b, ta.Tensor([0.0], requires_grad=True)], max_norm=1.0)
    assert total == pytest.approx(np.sqrt(50))
    np.testing.assert_allclose(a.grad, np.array([3.0, 4.0]) / np.sqrt(50), rtol=1e-5)
    np.testing.assert_allclose(b.grad, a.grad)
    with pytest.raises(ValueError, match="max_norm must be >= 0"):
        optim.clip_grad_norm([a], -1.0)


def test_optimizer_load_state_dict_errors_change_nothing():
    _, opt = run(lambda ps: optim.Adam(ps, lr=0.01), steps=1)
    state = opt.state_dict()
    before = {k: v.copy() for k, v in opt.state_dict().items()}
    bad_states = {
        "unexpected key '0.momentum'": {**state, "0.momentum": np.zeros(2)},
        "unexpected key '3.m'": {**state, "3.m": np.zeros(2)},
        "buffer 0.v has shape \\(3,\\), expected \\(2,\\)": {**state, "0.v": np.zeros(3)},
        "no 'steps' or 'lr' entry": {k: v for k, v in state.items() if k != "steps"},
    }
    for message, bad in bad_states.items():
        with pytest.raises(ValueError, match=message):
            opt.load_state_dict(bad)
    for key, value in opt.state_dict().items():
        np.testing.assert_array_equal(value, before[key])


def test_warmup_cosine_is_monotone_and_checks_its_arguments():
    lrs = [optim.warmup_cosine(s, 1.0, 5, 20, min_lr=0.1) for s in range(21)]
    assert lrs[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert all(x >= y for x, y in zip(lrs[4:], lrs[5:])) and lrs[-1] == pytest.approx(0.1)
    assert optim.warmup_cosine(3, 1.0, 10, 5) == pytest.approx(0.4)   # a run shorter than warmup
    with pytest.raises(ValueError, match="need step >= 0 and warmup_steps >= 0"):
        optim.warmup_cosine(0, 1.0, -1, 5)
