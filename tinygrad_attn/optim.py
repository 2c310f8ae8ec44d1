"""Optimizers with PyTorch's update rules, gradient clipping and a warmup + cosine schedule.

Updates change ``p.data`` in place and skip parameters whose ``grad`` is None. Every optimizer
has ``state_dict()`` / ``load_state_dict()`` (NumPy arrays and the step count), so a resumed run
continues exactly where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .backend import array_module, to_device, to_numpy
from .tensor import Tensor


class Optimizer:
    """Holds the parameters (each once), the learning rate, a step count and per-parameter buffers."""

    def __init__(self, params: Iterable[Tensor], lr: float):
        unique: dict[int, Tensor] = {}
        for p in params:
            unique.setdefault(id(p), p)
        self.params = list(unique.values())
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got no parameters")
        if lr < 0:
            raise ValueError(f"{type(self).__name__}: lr must be >= 0, got {lr}")
        self.lr = lr
        self.steps = 0
        self.buffers: list[dict[str, Any]] = [{} for _ in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        self.steps += 1
        for p, buffers in zip(self.params, self.buffers):
            if p.grad is not None:
                self._update(p, p.grad, buffers)

    def _update(self, p: Tensor, grad: Any, buffers: dict[str, Any]) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {"steps": np.array(self.steps), "lr": np.array(self.lr)}
        for i, buffers in enumerate(self.buffers):
            state.update({f"{i}.{name}": to_numpy(b) for name, b in buffers.items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        buffers: list[dict[str, Any]] = [{} for _ in self.params]
        for key, value in state.items():
            if key in ("steps", "lr"):
                continue
            index, name = key.split(".", 1)
            p = self.params[int(index)]
            if tuple(value.shape) != p.shape:
                raise ValueError(f"{type(self).__name__}.load_state_dict: buffer {key} has shape "
                                 f"{tuple(value.shape)}, parameter {index} has {p.shape}")
            buffers[int(index)][name] = to_device(np.array(value, dtype=p.dtype), p.device)
        self.steps, self.lr = int(state["steps"]), float(state["lr"])
        self.buffers = buffers


class SGD(Optimizer):
    """g = grad + wd·p; with momentum, b = μ·b + g (b = g at first) and g = b; then p −= lr·g."""

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum, self.weight_decay = momentum, weight_decay

    def _update(self, p, grad, buffers):
        if self.weight_decay:
            grad = grad + self.weight_decay * p.data
        if self.momentum:
            b = buffers.get("momentum")
            buffers["momentum"] = grad = grad.copy() if b is None else self.momentum * b + grad
        p.data -= self.lr * grad


class Adam(Optimizer):
    """m = β₁m + (1−β₁)g, v = β₂v + (1−β₂)g², p −= lr·m̂/(√v̂ + eps), hats = bias-corrected.

    `weight_decay` adds wd·p to the gradient (L2), as torch.optim.Adam does.
    """

    decoupled = False

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    def _update(self, p, grad, buffers):
        xp = array_module(p.data)
        beta1, beta2 = self.betas
        if self.weight_decay and self.decoupled:
            p.data *= 1 - self.lr * self.weight_decay
        elif self.weight_decay:
            grad = grad + self.weight_decay * p.data
        m = buffers["m"] = beta1 * buffers.get("m", 0) + (1 - beta1) * grad
        v = buffers["v"] = beta2 * buffers.get("v", 0) + (1 - beta2) * grad * grad
        m_hat = m / (1 - beta1 ** self.steps)
        v_hat = v / (1 - beta2 ** self.steps)
        p.data -= (self.lr * m_hat / (xp.sqrt(v_hat) + self.eps)).astype(p.dtype, copy=False)


class AdamW(Adam):
    """Adam with decoupled weight decay: p −= lr·wd·p before the Adam step (torch.optim.AdamW)."""

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> float:
    """Scale all gradients by min(1, max_norm / (‖g‖ + 1e-6)), ‖g‖ the norm over all of them
    together; returns ‖g‖ before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    total = math.sqrt(sum(float((g.astype("float64") ** 2).sum()) for g in grads))
    coef = min(1.0, max_norm / (total + 1e-6))
    if coef < 1.0:
        for g in grads:
            g *= coef
    return total


def warmup_cosine(step: int, base_lr: float, warmup_steps: int, total_steps: int,
                  min_lr: float = 0.0) -> float:
    """The learning rate at `step` (0-based): linear warmup to base_lr over warmup_steps, then a
    half cosine down to min_lr at total_steps.

    Example:
        >>> [round(warmup_cosine(s, 1.0, 2, 6), 3) for s in range(7)]
        [0.5, 1.0, 1.0, 0.854, 0.5, 0.146, 0.0]
    """
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
