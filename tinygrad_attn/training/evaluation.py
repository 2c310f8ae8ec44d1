"""Held-out accuracy: greedy answers decoded token by token, compared whole with the task's; and a
text's validation loss: the mean cross-entropy of every next token of fixed held-out windows."""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..engine import no_grad
from ..nn import TinyTransformer
from ..tensor import Tensor
from .tasks import END, Task, get_task
from .text_task import TextTask

__all__ = ["accuracy", "answer", "characters_per_token", "validation_loss"]


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


def validation_loss(model: TinyTransformer, task: TextTask, windows: int, batch_size: int = 32) -> float:
    """Mean cross-entropy (nats per token) over `windows` fixed windows of the validation split,
    without grad and without dropout (the model's training mode is restored); it draws nothing
    random, so a run's random streams are the same with or without it."""
    ids, targets = task.validation_windows(windows)
    device = model.head.weight.device
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        with no_grad():
            for i in range(0, len(ids), batch_size):
                logits = model(Tensor(ids[i:i + batch_size], device=device))          # (b, T, V)
                loss = F.cross_entropy(logits, Tensor(targets[i:i + batch_size], device=device))
                total += loss.item() * len(ids[i:i + batch_size])
    finally:
        model.train(was_training)
    return total / len(ids)


def characters_per_token(task: TextTask, windows: int) -> float:
    """How many characters of text each predicted token of ``validation_loss``'s windows holds on
    average: the loss in nats per token divided by this is the loss in nats per character (every
    window predicts the same number of tokens, so the ratio is exact). Each window's targets are
    decoded whole, so a character split over two byte-level tokens counts once."""
    _, targets = task.validation_windows(windows)
    return sum(len(task.tokenizer.decode(row.tolist())) for row in targets) / targets.size
