"""Toy sequence tasks for a decoder-only transformer: copy, reverse, sort, add.

Every task shares one vocabulary: the digits 0-9 (ids 0-9), "+" (10), "=" (11), "|" (12, ends a
list prompt), "." (13, ends an answer) and "_" (14, padding). A sequence is a prompt followed by
its answer; the model learns next-token prediction, and the loss counts only the answer tokens
(every other target is ``IGNORE``). A fixed 5% of all prompts (chosen by a CRC32 hash) is held
out: training batches never contain them, and accuracy is measured on them.

The four tasks, each with one encoded example (prompt → answer, then the ids):

- ``copy``: a list of 1-8 digits, repeated: ``3 1 4 |  →  3 1 4 .`` is ids
  ``[3, 1, 4, 12] → [3, 1, 4, 13]``.
- ``reverse``: the list backwards: ``3 1 4 |  →  4 1 3 .`` is ``[3, 1, 4, 12] → [4, 1, 3, 13]``.
- ``sort``: the list in ascending order: ``3 1 4 |  →  1 3 4 .`` is
  ``[3, 1, 4, 12] → [1, 3, 4, 13]``.
- ``add``: two zero-padded 3-digit numbers and their 4-digit sum, least significant digit first:
  42 + 199 = 241 is ``0 4 2 + 1 9 9 =  →  1 4 2 0 .``, ids
  ``[0, 4, 2, 10, 1, 9, 9, 11] → [1, 4, 2, 0, 13]``.

A training pair is the whole sequence shifted by one: ``ids = seq[:-1]``, ``targets = seq[1:]``
with every target before the answer (and every padding target) set to ``IGNORE``.

Example:
    >>> task = get_task("reverse")
    >>> prompt = task.parse("3 1 4")
    >>> prompt, task.solve(prompt)
    ([3, 1, 4, 12], [4, 1, 3, 13])
    >>> get_task("add").solve(get_task("add").parse("42 + 199"))
    [1, 4, 2, 0, 13]
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

VOCAB = tuple("0123456789") + ("+", "=", "|", ".", "_")
PLUS, EQUALS, SEP, END, PAD = range(10, 15)
IGNORE = -100


@dataclass(frozen=True)
class Task:
    """A prompt generator and its solver, with the encoding shown in `example`."""

    name: str
    summary: str
    example: str
    max_prompt: int
    max_answer: int
    draw: Callable[[np.random.Generator], list[int]]
    solve: Callable[[list[int]], list[int]]
    parse: Callable[[str], list[int]]

    @property
    def seq_len(self) -> int:
        """Length of the model input: prompt + answer − 1 (the last token is only a target)."""
        return self.max_prompt + self.max_answer - 1

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (size, seq_len): training sequences, never a held-out prompt."""
        prompts = []
        while len(prompts) < size:
            prompt = self.draw(rng)
            if not is_held_out(prompt):
                prompts.append(prompt)
        return self.encode(prompts)

    def encode(self, prompts: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets for teacher forcing, padded; targets are IGNORE except answers."""
        ids = np.full((len(prompts), self.seq_len + 1), PAD)
        targets = np.full((len(prompts), self.seq_len), IGNORE)
        for row, prompt in enumerate(prompts):
            seq = prompt + self.solve(prompt)
            ids[row, :len(seq)] = seq
            targets[row, len(prompt) - 1:len(seq) - 1] = seq[len(prompt):]
        return ids[:, :-1], targets

    def held_out(self, size: int, seed: int = 2024) -> list[list[int]]:
        """`size` distinct held-out prompts, the same for every run with the same seed."""
        rng = np.random.default_rng(seed)
        prompts: dict[tuple[int, ...], None] = {}
        for _ in range(10_000 * size):
            prompt = self.draw(rng)
            if is_held_out(prompt):
                prompts.setdefault(tuple(prompt))
                if len(prompts) == size:
                    break
        return [list(p) for p in prompts]


def is_held_out(prompt: list[int]) -> bool:
    """The fixed held-out split: 1 prompt in 20, by the CRC32 of its tokens."""
    return zlib.crc32(bytes(prompt)) % 20 == 0


def decode(ids: list[int] | np.ndarray) -> str:
    """Token ids as text, space-separated."""
    return " ".join(VOCAB[int(i)] for i in ids)


def _digits(text: str) -> list[int]:
    tokens = text.replace(",", " ").split()
    if not tokens or not all(t.isdigit() and len(t) == 1 for t in tokens):
        raise ValueError(f"expected single digits separated by spaces, like '3 1 2', got {text!r}")
    return [int(t) for t in tokens]


def _list_task(name: str, summary: str, example: str, solve: Callable[[list[int]], list[int]],
               max_len: int) -> Task:
    def draw(rng: np.random.Generator) -> list[int]:
        return rng.integers(0, 10, rng.integers(1, max_len + 1)).tolist() + [SEP]

    def parse(text: str) -> list[int]:
        digits = _digits(text.rstrip(" |"))
        if len(digits) > max_len:
            raise ValueError(f"{name}: at most {max_len} digits, got {len(digits)}")
        return digits + [SEP]

    return Task(name, summary, example, max_len + 1, max_len + 1, draw,
                lambda prompt: solve(prompt[:-1]) + [END], parse)


LIST_LEN = 8
ADD_DIGITS = 3


def _draw_add(rng: np.random.Generator) -> list[int]:
    a, b = rng.integers(0, 10**ADD_DIGITS, 2)
    return _add_prompt(int(a), int(b))


def _add_prompt(a: int, b: int) -> list[int]:
    digits = lambda n: [int(c) for c in f"{n:0{ADD_DIGITS}d}"]
    return digits(a) + [PLUS] + digits(b) + [EQUALS]


def _solve_add(prompt: list[int]) -> list[int]:
    a = int("".join(map(str, prompt[:ADD_DIGITS])))
    b = int("".join(map(str, prompt[ADD_DIGITS + 1:2 * ADD_DIGITS + 1])))
    return [int(c) for c in reversed(f"{a + b:0{ADD_DIGITS + 1}d}")] + [END]


def _parse_add(text: str) -> list[int]:
    parts = text.replace("=", " ").replace(" ", "").split("+")
    if len(parts) != 2 or not all(p.isdigit() and len(p) <= ADD_DIGITS for p in parts):
        raise ValueError(f"add: expected 'a + b' with numbers of at most {ADD_DIGITS} digits, got {text!r}")
    return _add_prompt(int(parts[0]), int(parts[1]))


TASKS: dict[str, Task] = {
    "copy": _list_task(
        "copy", f"repeat a list of 1-{LIST_LEN} digits",
        "3 1 4 1 5 |  →  3 1 4 1 5 .", lambda d: list(d), LIST_LEN),
    "reverse": _list_task(
        "reverse", f"reverse a list of 1-{LIST_LEN} digits",
        "3 1 4 1 5 |  →  5 1 4 1 3 .", lambda d: d[::-1], LIST_LEN),
    "sort": _list_task(
        "sort", f"sort a list of 1-{LIST_LEN} digits ascending",
        "3 1 4 1 5 |  →  1 1 3 4 5 .", sorted, LIST_LEN),
    "add": Task(
        "add", f"add two numbers of up to {ADD_DIGITS} digits; the sum is written least significant "
        "digit first (as minGPT's adder), so each digit needs only the carry from the one before",
        "0 4 2 + 1 9 9 =  →  1 4 2 0 .  (42 + 199 = 241)",
        2 * ADD_DIGITS + 2, ADD_DIGITS + 2, _draw_add, _solve_add, _parse_add),
}


def get_task(name: str) -> Task:
    """The task called `name`; raises ValueError naming the known tasks."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: choose one of {', '.join(TASKS)}")
    return TASKS[name]
