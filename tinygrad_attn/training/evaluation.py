"""Held-out accuracy: greedy answers decoded token by token, compared whole with the task's."""

from __future__ import annotations

import numpy as np

from ..nn import TinyTransformer
from .tasks import END, Task, get_task

__all__ = ["accuracy", "answer"]


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
