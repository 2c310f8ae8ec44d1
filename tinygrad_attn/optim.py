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
from .guards import inplace
from .tensor import Tensor

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "clip_grad_norm", "warmup_cosine"]


class Optimizer:
    """Holds the parameters (each once), the learning rate, a step count and per-parameter buffers.

    A subclass names its buffers in `buffer_names` (arrays shaped like the parameter, or
    "step", a per-parameter update count) and defines ``_update``.
    """

    buffer_names: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Tensor], lr: float):
        name = type(self).__name__
        if isinstance(params, Tensor) or not isinstance(params, Iterable):
            got = "one Tensor" if isinstance(params, Tensor) else type(params).__name__
            raise TypeError(f"{name}: params must be an iterable of Tensors such as model.parameters() "
                            f"or [w, b], got {got}")
        unique: dict[int, Tensor] = {}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: params must be Tensors, got {type(p).__name__} at position {i}")
            unique.setdefault(id(p), p)
        self.params = list(unique.values())
        if not self.params:
            raise ValueError(f"{name}: got no parameters")
        _check_settings(name, lr=lr)
        self.lr = lr
        self.steps = 0
        self.buffers: list[dict[str, Any]] = [{} for _ in self.params]

    def zero_grad(self) -> None:
        """Set every parameter's grad to None."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a grad, in place."""
        self.steps += 1
        for p, buffers in zip(self.params, self.buffers):
            if p.grad is not None:
                if type(p.data) is np.ndarray and not p.data.flags.writeable:
                    p.data = p.data.copy()  # a graph's sealed output given as the data (w.data = y.data)
                self._update(p, p.grad, buffers)
                if type(p.data) is not np.ndarray:  # (NumPy's are fingerprinted: a change is seen)
                    inplace.bump(p.data)    # a graph that saved p refuses its backward from now on

    def _update(self, p: Tensor, grad: Any, buffers: dict[str, Any]) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, np.ndarray]:
        """The step count, the learning rate and every buffer (``"<param index>.<buffer>"``), as
        NumPy arrays that ``np.savez`` can store."""
        state = {"steps": np.array(self.steps), "lr": np.array(self.lr)}
        for i, buffers in enumerate(self.buffers):
            state.update({f"{i}.{name}": np.array(b) if name == "step" else to_numpy(b)
                          for name, b in buffers.items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore what ``state_dict`` returned, for the same parameters in the same order.

        Raises a ValueError naming the key at fault (missing step count, unknown buffer, a
        parameter index out of range, a wrong shape) before changing anything.
        """
        name = type(self).__name__
        if "steps" not in state or "lr" not in state:
            raise ValueError(f"{name}.load_state_dict: the state has no 'steps' or 'lr' entry")
        buffers: list[dict[str, Any]] = [{} for _ in self.params]
        for key, value in state.items():
            if key in ("steps", "lr"):
                continue
            index, _, buffer = key.partition(".")
            if not index.isdigit() or int(index) >= len(self.params) or buffer not in self.buffer_names:
                raise ValueError(f"{name}.load_state_dict: unexpected key {key!r} (this optimizer "
                                 f"has {len(self.params)} parameters and buffers {self.buffer_names})")
            p = self.params[int(index)]
            shape = () if buffer == "step" else p.shape
            if tuple(np.shape(value)) != shape:
                raise ValueError(f"{name}.load_state_dict: buffer {key} has shape "
                                 f"{tuple(np.shape(value))}, expected {shape}")
            buffers[int(index)][buffer] = int(value) if buffer == "step" else \
                to_device(np.array(value, dtype=p.dtype), p.device)
        self.steps, self.lr = int(state["steps"]), float(state["lr"])
        self.buffers = buffers


def _check_settings(owner: str, **settings: float) -> None:
    """Raise ValueError naming `owner` and the first setting that is not a finite number >= 0."""
    for name, value in settings.items():
        if not 0 <= value < math.inf:
            raise ValueError(f"{owner}: {name} must be a finite number >= 0, got {value!r}")


class SGD(Optimizer):
    """g = grad + wd·p; with momentum, b = μ·b + g (b = g at first) and g = b; then p −= lr·g.

    Example:
        >>> p = Tensor([1.0], requires_grad=True)
        >>> opt = SGD([p], lr=0.1)
        >>> p.grad = p.data * 2
        >>> opt.step()
        >>> round(p.item(), 6)
        0.8
    """

    buffer_names = ("momentum",)

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        _check_settings("SGD", momentum=momentum, weight_decay=weight_decay)
        self.momentum, self.weight_decay = momentum, weight_decay

    def _update(self, p, grad, buffers):
        if self.weight_decay:
            grad = grad + self.weight_decay * p.data
        if self.momentum:
            b = buffers.get("momentum")
            buffers["momentum"] = grad = grad.copy() if b is None else self.momentum * b + grad
        p.data -= self.lr * grad


class Adam(Optimizer):
    """m = β₁m + (1−β₁)g, v = β₂v + (1−β₂)g², p −= lr·m̂/(√v̂ + eps), hats = bias-corrected
    (computed as PyTorch does: √v̂ = √v / √(1−β₂ᵗ) and lr / (1−β₁ᵗ), so v̂ never overflows).

    `weight_decay` adds wd·p to the gradient (L2), as torch.optim.Adam does. As in PyTorch, the
    bias correction counts the updates of each parameter (a step it had no grad is not one).
    """

    decoupled = False
    buffer_names = ("m", "v", "step")

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got betas={betas}")
        _check_settings(type(self).__name__, eps=eps, weight_decay=weight_decay)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    def _update(self, p, grad, buffers):
        xp = array_module(p.data)
        beta1, beta2 = self.betas
        t = buffers["step"] = buffers.get("step", 0) + 1
        if self.weight_decay and self.decoupled:
            p.data *= 1 - self.lr * self.weight_decay
        elif self.weight_decay:
            grad = grad + self.weight_decay * p.data
        # The formulas below, each step in place on m, v or one scratch array: the same values,
        # bit for bit, as the textbook expressions with a fresh array per step, in fewer arrays.
        m, v = buffers.get("m"), buffers.get("v")
        if m is None:
            m = buffers["m"] = xp.zeros_like(grad)
        if v is None:                   # a state loaded without v starts it at 0, as m
            v = buffers["v"] = xp.zeros_like(grad)
        scratch = xp.multiply(grad, 1 - beta1, out=xp.empty_like(m))
        m *= beta1
        m += scratch                                    # m = β₁m + (1−β₁)g
        xp.multiply(grad, 1 - beta2, out=scratch)
        scratch *= grad
        v *= beta2
        v += scratch                                    # v = β₂v + (1−β₂)g², (1−β₂)g first
        # In PyTorch's order: the bias corrections are applied to √v and to lr, never to v itself,
        # so a float32 gradient of 1e20 (v ≈ 1e37) moves p by lr instead of overflowing v̂ to inf.
        denom = xp.sqrt(v, out=scratch)
        denom /= math.sqrt(1 - beta2 ** t)
        denom += self.eps                               # √v̂ + eps
        update = xp.divide(m, denom, out=denom)
        update *= self.lr / (1 - beta1 ** t)            # step size · m / (√v̂ + eps)
        p.data -= update.astype(p.dtype, copy=False)


class AdamW(Adam):
    """Adam with decoupled weight decay: p −= lr·wd·p before the Adam step (torch.optim.AdamW)."""

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm(params: Iterable[Tensor] | Tensor, max_norm: float,
                   error_if_nonfinite: bool = False) -> float:
    """Scale all gradients together so that their joint norm is at most `max_norm`.

    Each grad becomes g · min(1, max_norm / (‖g‖ + 1e-6)), ‖g‖ the norm over all of them; the
    grads are replaced, not scaled in place, because two leaves may share one gradient array.

    Args:
        params: tensors whose ``grad`` to clip (those with grad None are skipped), or one tensor.
        max_norm: the largest joint norm allowed (≥ 0).
        error_if_nonfinite: raise if ‖g‖ is NaN or infinite (as in PyTorch); otherwise such a
            norm is returned and the grads are left as they are.

    Returns:
        ‖g‖ before clipping, as a float.

    Raises:
        RuntimeError: ‖g‖ is not finite and `error_if_nonfinite` is True (grads unchanged).

    Example:
        >>> import numpy as np
        >>> a = Tensor([0.0, 0.0], requires_grad=True)
        >>> a.grad = np.array([3.0, 4.0])
        >>> clip_grad_norm([a], 1.0), a.grad.round(4).tolist()
        (5.0, [0.6, 0.8])
    """
    if not max_norm >= 0:
        raise ValueError(f"clip_grad_norm: max_norm must be >= 0, got {max_norm}")
    params = [p for p in ([params] if isinstance(params, Tensor) else params) if p.grad is not None]
    total = math.sqrt(sum(float((p.grad.astype("float64") ** 2).sum()) for p in params))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"clip_grad_norm: the total norm of the gradients is {total}, so they "
                                 f"cannot be clipped; set error_if_nonfinite=False to return it anyway")
    coef = max_norm / (total + 1e-6)
    if coef < 1.0 and math.isfinite(total):
        for p in params:
            p.grad = p.grad * p.grad.dtype.type(coef)
    return total


def warmup_cosine(step: int, base_lr: float, warmup_steps: int, total_steps: int,
                  min_lr: float = 0.0) -> float:
    """The learning rate at `step` (0-based): linear warmup to base_lr over warmup_steps, then a
    half cosine down to min_lr at total_steps (and min_lr after it).

    Set ``optimizer.lr`` to it before each step. A run shorter than the warmup never leaves it.

    Args:
        step: the number of steps taken so far.
        base_lr: the peak learning rate, reached at the last warmup step.
        warmup_steps: steps of linear warmup (0 for none).
        total_steps: the step at which the cosine reaches min_lr.
        min_lr: the final learning rate.

    Returns:
        The learning rate as a float.

    Example:
        >>> [round(warmup_cosine(s, 1.0, 2, 6), 3) for s in range(7)]
        [0.5, 1.0, 1.0, 0.854, 0.5, 0.146, 0.0]
    """
    if warmup_steps < 0 or step < 0:
        raise ValueError(f"warmup_cosine: need step >= 0 and warmup_steps >= 0, got "
                         f"step={step}, warmup_steps={warmup_steps}")
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
