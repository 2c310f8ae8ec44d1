"""The training loop: a TinyTransformer trained on a task with AdamW, warmup then cosine decay and
gradient clipping.

Nothing here prints: `train` reports each step through a callback; a run (``run.Run``) adds
checkpoints and evaluation, and the ``train`` command a progress bar. A run is deterministic given its seed:
the seed makes the initial weights (`make_model`) and the stream of training batches
(`TrainState.data_rng`); ``saved_run.py`` writes both generators' states into every checkpoint,
so a run continued from one goes on exactly where it stopped.

Example:
    >>> config = TrainConfig(steps=3, d_model=16, num_layers=1)
    >>> model = make_model("copy", config)
    >>> history = train(model, "copy", config)
    >>> len(history.loss), history.lr[0] < history.lr[1]
    (3, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import functional as F
from ..creation import manual_seed
from ..kernels.threads import check_idle_cores
from ..nn import TinyTransformer
from ..optim import AdamW, clip_grad_norm, warmup_cosine
from ..tensor import Tensor
from .config import TrainConfig
from .host_memory import keep_freed_memory
from .interrupts import interrupts_between_steps
from .random_state import restore_rng_states, rng_states
from .task import Task
from .tasks import IGNORE, get_task

__all__ = ["DivergedError", "History", "StepOutOfMemory", "TrainState", "make_model", "train"]


class DivergedError(FloatingPointError):
    """The loss or the gradient norm of a step is NaN or infinite; the run's state is that of the
    last completed step (the failing step changed nothing, its random draws included)."""


class StepOutOfMemory(MemoryError):
    """A step ran out of memory before it changed anything (the forward or backward pass): the
    run's state is that of the last completed step, its random draws included, so it can be saved."""


@dataclass
class History:
    """Per-step records of a run: loss on the answer tokens, learning rate, gradient norm; and the
    validation losses measured so far (text runs), with the step each was measured after."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)


@dataclass
class TrainState:
    """What, besides the weights, a checkpoint must hold to continue a run exactly."""

    optimizer: AdamW
    data_rng: np.random.Generator
    step: int = 0
    history: History = field(default_factory=History)

    @classmethod
    def fresh(cls, model: TinyTransformer, config: TrainConfig) -> TrainState:
        """AdamW on the model's parameters and a data stream seeded by ``config.seed``."""
        optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        return cls(optimizer, np.random.default_rng(config.seed))


def make_model(task: str | Task, config: TrainConfig) -> TinyTransformer:
    """The TinyTransformer of `config` for `task` (``config.for_task(task).model``), initialised
    from ``config.seed``, on ``config.device``.

    Example:
        >>> make_model("add", TrainConfig(d_model=16)).max_len      # 8 prompt + 5 answer tokens
        13
        >>> make_model("add", TrainConfig(d_model=16, arch="llama")).blocks[0].attn.n_kv_heads
        2
        >>> make_model("add", TrainConfig(d_model=16, arch="llama")).head.bias is None
        True
    """
    task = get_task(task)
    model = config.model if config.model is not None else config.model_for(task.vocab_size, task.max_len)
    manual_seed(config.seed)
    return TinyTransformer(model).to(config.device)


def train(model: TinyTransformer, task: str | Task, config: TrainConfig,
          on_step: Callable[[int, History], Any] | None = None, state: TrainState | None = None,
          stop_after: int | None = None) -> History:
    """Train with AdamW, linear warmup then cosine decay, and gradient clipping, to ``config.steps``.

    Every step frees and remakes the same large arrays, so this sets glibc's malloc, for the rest
    of the process, to keep freed memory for reuse (``host_memory.keep_freed_memory``) instead of
    mapping fresh pages each step: a TinyTransformer step otherwise takes up to a third longer,
    by process. The engine and the optimizers never change it; a loop of your own can call it.
    After each step it calls ``kernels.threads.check_idle_cores`` (which does something only
    inside ``thread_settings(follow_idle_cores=True)``, as ``train text`` runs).

    Args:
        model: a TinyTransformer, e.g. from `make_model`.
        task: a Task or a toy task's name; batches are drawn from its training split.
        config: the hyperparameters.
        on_step: called as ``on_step(step, history)`` after every step (step counts from 1).
        state: a run to continue (from a checkpoint); a fresh one seeded by ``config.seed`` if None.
        stop_after: return after this many steps of this call (≥ 1), even before ``config.steps``.

    Returns:
        The run's History (``state.history``), including the steps of earlier calls.

    Raises:
        DivergedError: a step's loss or gradient norm is NaN or infinite; `state` is left as it
            was after the last completed step, whose weights gave that loss (so resuming from them
            repeats it: the train command keeps an earlier checkpoint instead).
        StepOutOfMemory: a step ran out of memory before changing anything; `state` is that of the
            last completed step.
        KeyboardInterrupt: Ctrl-C (or ``Terminated``: SIGTERM or SIGHUP inside
            ``termination_as_interrupt``); it takes effect after the running step (and its
            ``on_step``), so `state` is that of a completed step. InterruptedMidStep (a
            KeyboardInterrupt) if a second one comes within one step; then `state` may be half-updated.
    """
    task = get_task(task)
    if stop_after is not None and stop_after < 1:
        raise ValueError(f"train: stop_after must be at least 1, got {stop_after}")
    state = state or TrainState.fresh(model, config)
    keep_freed_memory()
    model.train()
    end = config.steps if stop_after is None else min(config.steps, state.step + stop_after)
    with interrupts_between_steps() as stop:
        while state.step < end:
            _step(model, task, config, state)
            check_idle_cores()          # inside thread_settings(follow_idle_cores=True) only
            if on_step is not None:
                on_step(state.step, state.history)
            stop.raise_if_asked()
    return state.history


def _step(model: TinyTransformer, task: Task, config: TrainConfig, state: TrainState) -> None:
    """One optimizer step; raises DivergedError, with `state` as it was, if it cannot be taken."""
    rngs = rng_states(state)
    lr = warmup_cosine(state.step, config.lr, config.warmup, config.steps, config.min_lr)
    try:
        ids, targets = task.batch(state.data_rng, config.batch_size)
        logits = model(Tensor(ids, device=config.device))                   # (B, T, V)
        loss = F.cross_entropy(logits, Tensor(targets, device=config.device), ignore_index=IGNORE)
        state.optimizer.zero_grad()
        loss.backward()
        norm = clip_grad_norm(state.optimizer.params, config.clip)
    except BaseException as error:      # nothing changed but the generators: put them back
        restore_rng_states(state, rngs)
        if isinstance(error, MemoryError):
            raise StepOutOfMemory(f"step {state.step + 1} ran out of memory ({error or 'MemoryError'})") \
                from error
        raise
    state.optimizer.lr = lr
    if not (math.isfinite(loss.item()) and math.isfinite(norm)):
        restore_rng_states(state, rngs)
        last = state.history.loss
        raise DivergedError(
            f"training diverged at step {state.step + 1}: the loss is {loss.item()} and the gradient "
            f"norm {norm} " + (f"(last finite loss {last[-1]:.4g}, at step {state.step}); " if last
                               else "(no step before it); ")
            + f"try a lower learning rate (lr={config.lr:g}), a longer warmup (warmup={config.warmup}) "
              f"or a smaller clip (clip={config.clip:g})")
    state.optimizer.step()
    state.step += 1
    state.history.loss.append(loss.item())
    state.history.lr.append(lr)
    state.history.grad_norm.append(norm)
