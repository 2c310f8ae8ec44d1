"""Training a TinyTransformer on a toy task: config, state, the loop and held-out accuracy.

Nothing here prints: the loop reports each step through a callback, and the ``train`` command
turns that into a progress bar, plots and checkpoints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import functional as F
from .creation import generator, manual_seed
from .nn import TinyTransformer
from .optim import AdamW, clip_grad_norm, warmup_cosine
from .tasks import END, IGNORE, VOCAB, Task, get_task
from .tensor import Tensor


@dataclass
class TrainConfig:
    """Everything that decides a run; the defaults reach the targets in README.md."""

    task: str = "reverse"
    steps: int = 2000
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 100
    min_lr: float = 1e-4
    weight_decay: float = 0.01
    clip: float = 1.0
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    dropout: float = 0.0
    seed: int = 0
    device: str = "cpu"
    eval_size: int = 500


@dataclass
class TrainState:
    """A run in progress: what a checkpoint must hold to continue exactly."""

    model: TinyTransformer
    optimizer: AdamW
    data_rng: np.random.Generator
    step: int = 0
    losses: list[float] = field(default_factory=list)


def build(config: TrainConfig) -> TrainState:
    """A fresh model, optimizer and data stream, all seeded by ``config.seed``."""
    task = get_task(config.task)
    manual_seed(config.seed)
    model = TinyTransformer(len(VOCAB), config.d_model, config.num_heads, config.num_layers,
                            max_len=task.max_prompt + task.max_answer, dropout=config.dropout)
    model.to(config.device)
    optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return TrainState(model, optimizer, np.random.default_rng(config.seed))


def train(state: TrainState, config: TrainConfig,
          on_step: Callable[[int, float], Any] | None = None, stop_after: int | None = None) -> TrainState:
    """Run AdamW steps (warmup + cosine learning rate, gradient clipping) up to ``config.steps``.

    Continues from ``state.step``; with `stop_after`, returns after that many steps of this call.
    Calls ``on_step(step, loss)`` after every step.
    """
    task = get_task(config.task)
    model, optimizer = state.model, state.optimizer
    model.train()
    end = config.steps if stop_after is None else min(config.steps, state.step + stop_after)
    while state.step < end:
        optimizer.lr = warmup_cosine(state.step, config.lr, config.warmup, config.steps, config.min_lr)
        ids, targets = task.batch(state.data_rng, config.batch_size)
        logits = model(Tensor(ids, device=config.device))                   # (B, T, V)
        loss = F.cross_entropy(logits, Tensor(targets, device=config.device), ignore_index=IGNORE)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(optimizer.params, config.clip)
        optimizer.step()
        state.step += 1
        state.losses.append(loss.item())
        if on_step is not None:
            on_step(state.step, state.losses[-1])
    return state


def answer(model: TinyTransformer, task: Task, prompts: list[list[int]]) -> list[list[int]]:
    """Greedy answers (through the end token, when the model writes one) for prompts of any lengths."""
    answers: list[list[int] | None] = [None] * len(prompts)
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt), []).append(i)
    for length, rows in by_length.items():
        out = model.generate(np.array([prompts[i] for i in rows]), task.max_answer).numpy()
        for i, tokens in zip(rows, out[:, length:].tolist()):
            answers[i] = tokens[:tokens.index(END) + 1] if END in tokens else tokens
    return answers  # type: ignore[return-value]


def accuracy(model: TinyTransformer, task: Task, prompts: list[list[int]]) -> float:
    """Exact-match accuracy: the share of prompts whose whole greedy answer is right."""
    predicted = answer(model, task, prompts)
    return float(np.mean([p == task.solve(q) for p, q in zip(predicted, prompts)]))


def config_from_dict(values: dict[str, Any]) -> TrainConfig:
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in values.items() if k in known})


def rng_states(state: TrainState) -> dict[str, Any]:
    """The data stream's and the library generator's states (JSON-serialisable)."""
    return {"data": state.data_rng.bit_generator.state, "library": generator().bit_generator.state}


def restore_rng_states(state: TrainState, states: dict[str, Any]) -> None:
    state.data_rng.bit_generator.state = states["data"]
    generator().bit_generator.state = states["library"]
