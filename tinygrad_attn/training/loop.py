"""Training a TinyTransformer on a toy task: the config, the loop, held-out accuracy, and a run
saved to and read back from a checkpoint.

Nothing here prints: `train` reports each step through a callback, and the ``train`` command
turns that into a progress bar, plots and checkpoints. A run is deterministic given its seed:
the seed makes the initial weights (`make_model`) and the stream of training batches
(`TrainState.data_rng`), and the state of both generators goes into every checkpoint
(`save_run`), so a run continued from one (`load_run`) goes on exactly where it stopped.

Example:
    >>> config = TrainConfig(steps=3, d_model=16, num_layers=1)
    >>> model = make_model("copy", config)
    >>> history = train(model, "copy", config)
    >>> len(history.loss), history.lr[0] < history.lr[1]
    (3, True)
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import functional as F
from ..backend import DEVICES, xp_for
from ..creation import generator, manual_seed
from ..errors import CheckpointError
from ..nn import TinyTransformer
from ..optim import AdamW, clip_grad_norm, warmup_cosine
from ..tensor import Tensor
from . import checkpoint
from .tasks import END, IGNORE, VOCAB, Task, get_task

# The TinyTransformer options of each architecture; "llama" also halves the key/value heads.
ARCHS: dict[str, dict[str, str]] = {
    "default": {},
    "llama": {"norm": "rms", "mlp": "swiglu", "positions": "rope"},
}


def _setting(default: Any, meaning: str) -> Any:
    """A TrainConfig field: its default, and what it means (the help of its command-line flag)."""
    return field(default=default, metadata={"help": meaning})


@dataclass
class TrainConfig:
    """Everything that decides a run besides the task; checked when made (see `validate`).

    The defaults reach the README's accuracy targets on every task in under 30 seconds on a
    2-core CPU. Each field says what it means in its metadata; the ``train`` command makes one
    flag of each field (``--batch-size``), with that text as its help.

    Example:
        >>> TrainConfig(steps=10).steps
        10
        >>> dataclasses.fields(TrainConfig)[0].metadata["help"]
        'optimizer steps in all'
    """

    steps: int = _setting(1000, "optimizer steps in all")
    batch_size: int = _setting(64, "sequences per step")
    lr: float = _setting(3e-3, "peak learning rate (linear warmup, then cosine decay)")
    warmup: int = _setting(100, "warmup steps")
    min_lr: float = _setting(1e-4, "learning rate at the end of the cosine decay")
    weight_decay: float = _setting(0.01, "AdamW's decoupled weight decay")
    clip: float = _setting(1.0, "largest gradient norm; a larger gradient is scaled down to it")
    d_model: int = _setting(64, "model width")
    num_heads: int = _setting(4, "attention heads per layer")
    num_layers: int = _setting(2, "transformer blocks")
    dropout: float = _setting(0.0, "dropout probability")
    seed: int = _setting(0, "seeds the initial weights and the training batches")
    device: str = _setting("cpu", "cpu (NumPy) or cuda (CuPy)")
    eval_size: int = _setting(500, "held-out prompts for the final accuracy")
    arch: str = _setting("default", "default (LayerNorm, GELU MLP, learned positions) or llama (RMSNorm, "
                                    "SwiGLU, RoPE, half as many key/value heads as query heads)")

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first field that cannot work."""
        for name in ("steps", "batch_size", "d_model", "num_heads", "num_layers", "eval_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig: {name} must be at least 1, got {getattr(self, name)}")
        if self.d_model % self.num_heads:
            raise ValueError(f"TrainConfig: d_model {self.d_model} is not divisible by num_heads "
                             f"{self.num_heads}")
        for name in ("lr", "min_lr", "weight_decay", "clip", "dropout"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"TrainConfig: {name} must be a finite number, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0 or self.lr <= 0 or self.warmup < 0 or self.clip <= 0 \
                or self.min_lr < 0 or self.weight_decay < 0 or self.seed < 0:
            raise ValueError(f"TrainConfig: need 0 <= dropout < 1, lr > 0, warmup >= 0, clip > 0, "
                             f"min_lr >= 0, weight_decay >= 0 and seed >= 0, got dropout={self.dropout}, "
                             f"lr={self.lr}, warmup={self.warmup}, clip={self.clip}, min_lr={self.min_lr}, "
                             f"weight_decay={self.weight_decay}, seed={self.seed}")
        if self.device not in DEVICES:
            raise ValueError(f"TrainConfig: unknown device {self.device!r}: expected one of {DEVICES}")
        if self.arch not in ARCHS:
            raise ValueError(f"TrainConfig: unknown arch {self.arch!r}: expected one of {tuple(ARCHS)}")


class DivergedError(FloatingPointError):
    """The loss or the gradient norm of a step is NaN or infinite; the run's state is that of the
    last completed step (the failing step changed nothing, its random draws included)."""


class InterruptedMidStep(KeyboardInterrupt):
    """A second Ctrl-C stopped a step half-way: the weights may be half-updated, so do not save."""


@dataclass
class History:
    """Per-step records of a run: loss on the answer tokens, learning rate, gradient norm."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)


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
    """A TinyTransformer sized by `config` for `task`, initialised from ``config.seed``.

    With ``arch="llama"`` the model has RMSNorm, a SwiGLU MLP, rotary positions, and
    grouped-query attention with half as many key/value heads as query heads (one for an odd
    number of heads).

    Example:
        >>> make_model("add", TrainConfig(d_model=16)).max_len      # 8 prompt + 5 answer tokens
        13
        >>> make_model("add", TrainConfig(d_model=16, arch="llama")).blocks[0].attn.n_kv_heads
        2
    """
    task = get_task(task)
    manual_seed(config.seed)
    options: dict[str, Any] = dict(ARCHS[config.arch])
    if config.arch == "llama":
        options["n_kv_heads"] = config.num_heads // 2 if config.num_heads % 2 == 0 else 1
    model = TinyTransformer(len(VOCAB), config.d_model, config.num_heads, config.num_layers,
                            max_len=task.max_prompt + task.max_answer, dropout=config.dropout, **options)
    return model.to(config.device)


def train(model: TinyTransformer, task: str | Task, config: TrainConfig,
          on_step: Callable[[int, History], Any] | None = None, state: TrainState | None = None,
          stop_after: int | None = None) -> History:
    """Train with AdamW, linear warmup then cosine decay, and gradient clipping, to ``config.steps``.

    Args:
        model: a TinyTransformer, e.g. from `make_model`.
        task: a Task or its name; batches are drawn from its training split.
        config: the hyperparameters.
        on_step: called as ``on_step(step, history)`` after every step (step counts from 1).
        state: a run to continue (from a checkpoint); a fresh one seeded by ``config.seed`` if None.
        stop_after: return after this many steps of this call (≥ 1), even before ``config.steps``.

    Returns:
        The run's History (``state.history``), including the steps of earlier calls.

    Raises:
        DivergedError: a step's loss or gradient norm is NaN or infinite; `state` is left as it
            was after the last completed step, so it can be saved and resumed with other settings.
        KeyboardInterrupt: Ctrl-C; it takes effect after the running step (and its ``on_step``),
            so `state` is that of a completed step. InterruptedMidStep (a KeyboardInterrupt) if
            Ctrl-C is pressed twice within one step; then `state` may be half-updated.
    """
    task = get_task(task)
    if stop_after is not None and stop_after < 1:
        raise ValueError(f"train: stop_after must be at least 1, got {stop_after}")
    state = state or TrainState.fresh(model, config)
    model.train()
    end = config.steps if stop_after is None else min(config.steps, state.step + stop_after)
    with _interrupts_between_steps() as interrupted:
        while state.step < end:
            _step(model, task, config, state)
            if on_step is not None:
                on_step(state.step, state.history)
            if interrupted.is_set():
                raise KeyboardInterrupt
    return state.history


def _step(model: TinyTransformer, task: Task, config: TrainConfig, state: TrainState) -> None:
    """One optimizer step; raises DivergedError, with `state` as it was, if it cannot be taken."""
    rngs = rng_states(state)
    lr = warmup_cosine(state.step, config.lr, config.warmup, config.steps, config.min_lr)
    state.optimizer.lr = lr
    ids, targets = task.batch(state.data_rng, config.batch_size)
    logits = model(Tensor(ids, device=config.device))                       # (B, T, V)
    loss = F.cross_entropy(logits, Tensor(targets, device=config.device), ignore_index=IGNORE)
    state.optimizer.zero_grad()
    loss.backward()
    norm = clip_grad_norm(state.optimizer.params, config.clip)
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


@contextmanager
def _interrupts_between_steps() -> Iterator[threading.Event]:
    """Defer Ctrl-C to the end of the running step, so that a run stops only at a step boundary.

    Yields an Event that is set when Ctrl-C was pressed; the loop raises KeyboardInterrupt when it
    sees it. A second Ctrl-C within the same step raises InterruptedMidStep at once. Outside the
    main thread, or when someone else handles SIGINT, nothing changes.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield interrupted
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise InterruptedMidStep
        interrupted.set()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def answer(model: TinyTransformer, task: str | Task, prompts: list[list[int]]) -> list[list[int]]:
    """Greedy answers, decoded token by token with ``model.generate`` (not teacher-forced).

    Each answer runs through the end token when the model writes one; prompts may differ in length.
    """
    task = get_task(task)
    answers: list[list[int]] = [[] for _ in prompts]
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for length, rows in by_length.items():
        out = model.generate(np.array([prompts[i] for i in rows]), task.max_answer).numpy()
        for i, tokens in zip(rows, out[:, length:].tolist()):
            answers[i] = tokens[:tokens.index(END) + 1] if END in tokens else tokens
    return answers


def accuracy(model: TinyTransformer, task: str | Task, prompts: list[list[int]]) -> float:
    """Exact match: the share of prompts whose whole greedy answer (through ".") is right."""
    task = get_task(task)
    predicted = answer(model, task, prompts)
    return float(np.mean([p == task.solve(q) for p, q in zip(predicted, prompts)]))


def config_from_dict(values: dict[str, Any]) -> TrainConfig:
    """A TrainConfig from a dict such as ``dataclasses.asdict(config)``; unknown keys raise."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    if set(values) - known:
        raise ValueError(f"TrainConfig: unknown fields {sorted(set(values) - known)}")
    return TrainConfig(**values)


def rng_states(state: TrainState) -> dict[str, Any]:
    """The data stream's and the library generator's (dropout's) states, JSON-serialisable."""
    return {"data": state.data_rng.bit_generator.state, "library": generator().bit_generator.state}


def restore_rng_states(state: TrainState, states: dict[str, Any]) -> None:
    """Put back the generator states that `rng_states` returned."""
    state.data_rng.bit_generator.state = states["data"]
    generator().bit_generator.state = states["library"]


class Run(NamedTuple):
    """A training run read back from a checkpoint."""

    model: TinyTransformer
    state: TrainState
    config: TrainConfig
    task: Task


def save_run(path: str | os.PathLike, model: TinyTransformer, state: TrainState,
             config: TrainConfig, task: Task) -> Path:
    """Write a run to one checkpoint, atomically: the weights, the optimizer's buffers and the
    history as arrays; the task, the config, the step and the generators' states as metadata."""
    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    arrays.update({f"optim/{k}": v for k, v in state.optimizer.state_dict().items()})
    arrays.update({f"history/{k}": np.array(v, dtype=np.float64)
                   for k, v in dataclasses.asdict(state.history).items()})
    meta = {"task": task.name, "config": dataclasses.asdict(config), "step": state.step,
            "rng": rng_states(state)}
    return checkpoint.save(path, arrays, meta)


def load_run(path: str | os.PathLike, device: str | None = None) -> Run:
    """The run `save_run` wrote, rebuilt on `device` (default: the device it was trained on).

    Raises:
        CheckpointError: the file is missing, truncated, not a checkpoint, or its arrays do not
            fit the model and optimizer its config describes.
        DeviceError: `device` (or the saved one) is unknown or unusable (CuPy or a GPU missing).
    """
    if device is not None:
        xp_for(device)
    arrays, meta = checkpoint.load(path)
    part = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    try:
        task = get_task(meta["task"])
        config = config_from_dict(meta["config"])
        if device is not None:
            config = dataclasses.replace(config, device=device)
        model = make_model(task, config)
        model.load_state_dict(part("model/"))
        state = TrainState.fresh(model, config)
        state.optimizer.load_state_dict(part("optim/"))
        state.step = int(meta["step"])
        state.history = History(**{k: v.tolist() for k, v in part("history/").items()})
        restore_rng_states(state, meta["rng"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: a tinygrad_attn checkpoint that does not fit its own "
                              f"model or run ({type(e).__name__}: {e})") from None
    return Run(model, state, config, task)
