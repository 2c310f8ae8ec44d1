"""Toy sequence tasks for a decoder-only transformer: copy, reverse, sort, add.

Every task shares one vocabulary of 15 tokens: the digits 0-9 (ids 0-9), "+" (10), "=" (11),
"|" (12, ends a list prompt), "." (13, ends an answer) and "_" (14, padding). A sequence is a
prompt followed by its answer; the model learns next-token prediction, and the loss counts only
the answer tokens (every other target is ``IGNORE``). Each task's class docstring shows its
encoding on one example. A fixed 5% of all prompts (chosen by the CRC32 of their tokens,
``held_out.py``) is held out: training batches never contain them, and accuracy is measured on
them: a greedy answer, decoded token by token, right whole through its ".".

A training pair is the whole sequence shifted by one: ``ids = seq[:-1]``, ``targets = seq[1:]``
with every target before the answer (and every padding target) set to ``IGNORE``.

Example:
    >>> task = get_task("reverse")
    >>> prompt = task.parse("3 1 4")
    >>> prompt, task.solve(prompt)
    ([3, 1, 4, 12], [4, 1, 3, 13])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..nn import TinyTransformer
from . import plots
from .held_out import family_held_out_count, family_held_out_prompts, is_held_out
from .sample_options import SampleOptions
from .task import Evaluation, Task

if TYPE_CHECKING:
    from .config import TrainConfig
    from .loop import History

__all__ = ["ADD_DIGITS", "Add", "Copy", "IGNORE", "LIST_LEN", "Reverse", "Sort", "TASKS", "ToyTask", "VOCAB",
           "accuracy", "answer", "decode", "get_task"]


VOCAB = tuple("0123456789") + ("+", "=", "|", ".", "_")
PLUS, EQUALS, SEP, END, PAD = range(10, 15)
IGNORE = -100


class ToyTask(Task):
    """A prompt generator and its solver; subclasses document their encoding on one example.

    As a ``Task``: its held-out set is prompts of the fixed split, a trained model is measured by
    exact-match accuracy on them (``accuracy``), the default run is TrainConfig's own (``add``
    takes more steps), and a model replies with its greedy answer, checked.

    Attributes:
        name: the task's name on the command line.
        summary: one line for ``--help``.
        example: the docstring's example as text (prompt → answer).
        max_prompt, max_answer: the longest prompt and answer, in tokens (the answer ends in ".").
        defaults: the TrainConfig settings where this task's run differs from TrainConfig's.
    """

    name: str
    summary: str
    example: str
    max_prompt: int
    max_answer: int
    defaults: Mapping[str, Any] = MappingProxyType({})
    held_out_name = "held-out prompts"

    def draw(self, rng: np.random.Generator) -> list[int]:
        """One random prompt (held out or not)."""
        raise NotImplementedError

    def families(self) -> list[tuple[Sequence[int], ...]]:
        """Every possible prompt, as families of one length: the tokens allowed at each position."""
        raise NotImplementedError

    def solve(self, prompt: list[int]) -> list[int]:
        """The answer tokens for `prompt`, ending with END."""
        raise NotImplementedError

    def parse(self, text: str) -> list[int]:
        """The prompt for a human-written input such as "3 1 2"; ValueError if it is not one."""
        raise NotImplementedError

    def gloss(self, prompt: list[int], answer: list[int]) -> str:
        """The prompt and an answer as a person writes them, where the tokens differ from that
        (add's numbers are written backwards); "" otherwise."""
        return ""

    @property
    def vocab_size(self) -> int:
        """Token ids the model needs: the shared vocabulary of the toy tasks."""
        return len(VOCAB)

    @property
    def max_len(self) -> int:
        """The longest sequence the model reads: a prompt and its answer."""
        return self.max_prompt + self.max_answer

    @property
    def seq_len(self) -> int:
        """Length of the model input: prompt + answer − 1 (the last token is only a target)."""
        return self.max_prompt + self.max_answer - 1

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (size, seq_len): training sequences, never a held-out prompt."""
        prompts = []
        for _ in range(100 * size + 100):   # 19 draws in 20 are training prompts
            prompt = self.draw(rng)
            if not is_held_out(prompt):
                prompts.append(prompt)
                if len(prompts) == size:
                    return self.encode(prompts)
        raise RuntimeError(f"{self.name}: drew only {len(prompts)} training prompts of {size}")

    def encode(self, prompts: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets for teacher forcing, padded; targets are IGNORE except answers.

        Example:
            >>> ids, targets = get_task("copy").encode([[7, SEP]])
            >>> decode(ids[0, :4]), targets[0, :4].tolist()
            ('7 | 7 .', [-100, 7, 13, -100])
        """
        ids = np.full((len(prompts), self.seq_len + 1), PAD)
        targets = np.full((len(prompts), self.seq_len), IGNORE)
        for row, prompt in enumerate(prompts):
            seq = prompt + self.solve(prompt)
            ids[row, :len(seq)] = seq
            targets[row, len(prompt) - 1:len(seq) - 1] = seq[len(prompt):]
        return ids[:, :-1], targets

    def held_out(self, size: int, seed: int = 2024) -> list[list[int]]:
        """`size` distinct held-out prompts, the same for every run with the same seed.

        Raises:
            ValueError: there are fewer than `size` held-out prompts (the message gives how many).
        """
        pool = self.count_held_out(stop_at=4 * size)       # exact when below 4 * size
        if size > pool:
            raise ValueError(f"{self.name}: asked for {size} held-out prompts, but only {pool} exist "
                             f"(1 prompt in 20 is held out); ask for at most {pool}")
        rng = np.random.default_rng(seed)
        if 4 * size > pool:
            # A quarter of the pool or more: drawing until `size` distinct ones turn up would take
            # ~20·pool·log(pool) draws near the whole pool, so list the pool and choose from it.
            every = [prompt for family in self.families() for prompt in family_held_out_prompts(family)]
            return [every[i] for i in rng.choice(len(every), size, replace=False).tolist()]
        prompts: dict[tuple[int, ...], None] = {}
        draws = 1000 * (size + 100)     # ~20 per prompt, more when size is near the pool's size
        for _ in range(draws):
            prompt = self.draw(rng)
            if is_held_out(prompt):
                prompts.setdefault(tuple(prompt))
                if len(prompts) == size:
                    return [list(p) for p in prompts]
        raise RuntimeError(f"{self.name}: found only {len(prompts)} distinct held-out prompts of {size} "
                           f"in {draws} draws; ask for fewer")

    def count_held_out(self, stop_at: int | None = None) -> int:
        """How many held-out prompts exist: exact, or once it reaches `stop_at`, some count ≥ stop_at.

        Example:
            >>> get_task("add").count_held_out()
            49607
        """
        total = 0
        for family in self.families():
            total += family_held_out_count(family)
            if stop_at is not None and total >= stop_at:
                break
        return total

    def evaluate(self, model: TinyTransformer, config: TrainConfig, history: History,
                 held_out: list[list[int]]) -> Evaluation:
        """Exact-match accuracy of greedy answers on the held-out prompts."""
        acc = accuracy(model, self, held_out)
        return Evaluation({"held_out_exact_match": acc, "held_out_size": len(held_out)},
                          f"held-out exact-match accuracy {acc:.2%} on {len(held_out)} sequences")

    def draw_figures(self, model: TinyTransformer, history: History, held_out: list[list[int]],
                     folder: Path) -> None:
        """The training loss, and every head's attention on the longest held-out prompt and its answer."""
        plots.loss_curve(history.loss, folder / "loss.png", f"{self.name}: training loss")
        shown = max(held_out, key=len)
        example = shown + self.solve(shown)       # the model reads all but the last token
        maps = [m.numpy()[0] for m in model.attention_maps(np.array([example[:-1]]))]
        gloss = self.gloss(shown, self.solve(shown))            # add: "92 + 214 = 306"
        plots.attention_grid(maps, decode(example[:-1]).split(), folder / "attention.png",
                             f"{self.name}: attention (rows: queries, columns: keys) on held-out "
                             f"'{decode(shown)}'" + (f" ({gloss})" if gloss else ""))

    def reply(self, model: TinyTransformer, prompt: str, options: SampleOptions,
              write: Callable[[str], None]) -> None:
        """The prompt `prompt` reads as (``parse``), the model's greedy answer and its gloss on one
        line, and the right answer on the next when the model's is wrong. ValueError for a prompt
        that is not one, or any option (they are for text runs).

        Example:
            >>> copy, model, lines = get_task("copy"), TinyTransformer(len(VOCAB), 16, 2, 1, 18), []
            >>> copy.reply(model, "1 2", SampleOptions(), lines.append)
            >>> lines[0].startswith("1 2 |  →  ")
            True
        """
        given = options.given()
        if given:
            raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for text runs; "
                             f"a {self.name} run answers greedily")
        tokens = self.parse(prompt)
        predicted, expected = answer(model, self, [tokens])[0], self.solve(tokens)
        gloss = self.gloss(tokens, predicted)
        write(f"{decode(tokens)}  →  {decode(predicted)}" + (f"  (read as {gloss})" if gloss else ""))
        if predicted != expected:
            right = self.gloss(tokens, expected)
            write(f"\n(the right answer is {decode(expected)}" + (f", read as {right})" if right else ")"))

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> ToyTask:
        return get_task(meta["name"])


def decode(ids: list[int] | np.ndarray) -> str:
    """Token ids as text, space-separated."""
    return " ".join(VOCAB[int(i)] for i in ids)


LIST_LEN = 8
ADD_DIGITS = 3
_DIGITS = frozenset("0123456789")


class _ListTask(ToyTask):
    """A list of 1 to LIST_LEN digits, then "|"; the answer is a list of digits, then "."."""

    max_prompt = max_answer = LIST_LEN + 1

    def transform(self, digits: list[int]) -> list[int]:
        raise NotImplementedError

    def families(self) -> list[tuple[Sequence[int], ...]]:
        return [(range(10),) * length + ((SEP,),) for length in range(1, LIST_LEN + 1)]

    def draw(self, rng: np.random.Generator) -> list[int]:
        return rng.integers(0, 10, rng.integers(1, LIST_LEN + 1)).tolist() + [SEP]

    def solve(self, prompt: list[int]) -> list[int]:
        return self.transform(prompt[:-1]) + [END]

    def parse(self, text: str) -> list[int]:
        tokens = text.replace(",", " ").rstrip(" |").split()
        if not tokens or not all(t in _DIGITS for t in tokens):      # "²".isdigit() is True
            raise ValueError(f"{self.name}: expected single digits separated by spaces, like '3 1 2', "
                             f"got {text!r}")
        if len(tokens) > LIST_LEN:
            raise ValueError(f"{self.name}: at most {LIST_LEN} digits, got {len(tokens)}")
        return [int(t) for t in tokens] + [SEP]


class Copy(_ListTask):
    """copy: repeat a list of 1-8 digits.

    ``3 1 4 |`` → ``3 1 4 .``, i.e. ids ``[3, 1, 4, 12]`` → ``[3, 1, 4, 13]``; the model reads
    ``3 1 4 | 3 1 4`` and is scored on the targets ``3 1 4 .`` after the ``|``.

        >>> Copy().solve([3, 1, 4, SEP])
        [3, 1, 4, 13]
    """

    name, summary, example = "copy", f"repeat a list of 1-{LIST_LEN} digits", "3 1 4 1 5 |  →  3 1 4 1 5 ."

    def transform(self, digits: list[int]) -> list[int]:
        return list(digits)


class Reverse(_ListTask):
    """reverse: a list of 1-8 digits backwards.

    ``3 1 4 |`` → ``4 1 3 .``, i.e. ids ``[3, 1, 4, 12]`` → ``[4, 1, 3, 13]``.

        >>> Reverse().solve([3, 1, 4, SEP])
        [4, 1, 3, 13]
    """

    name, summary, example = ("reverse", f"reverse a list of 1-{LIST_LEN} digits",
                              "3 1 4 1 5 |  →  5 1 4 1 3 .")

    def transform(self, digits: list[int]) -> list[int]:
        return digits[::-1]


class Sort(_ListTask):
    """sort: a list of 1-8 digits in ascending order (repeats kept).

    ``3 1 4 1 |`` → ``1 1 3 4 .``, i.e. ids ``[3, 1, 4, 1, 12]`` → ``[1, 1, 3, 4, 13]``.

        >>> Sort().solve([3, 1, 4, 1, SEP])
        [1, 1, 3, 4, 13]
    """

    name, summary, example = ("sort", f"sort a list of 1-{LIST_LEN} digits ascending",
                              "3 1 4 1 5 |  →  1 1 3 4 5 .")

    def transform(self, digits: list[int]) -> list[int]:
        return sorted(digits)


class Add(ToyTask):
    """add: two numbers of up to 3 digits; both numbers and their sum least significant digit first.

    Every number is written the way it is added by hand, right to left: ones, tens, hundreds. The
    numbers are zero-padded to 3 digits and the sum to 4, so 42 + 199 = 241 is the prompt
    ``2 4 0 + 9 9 1 =`` and the answer ``1 4 2 0 .``, i.e. ids ``[2, 4, 0, 10, 9, 9, 1, 11]`` →
    ``[1, 4, 2, 0, 13]``. Answer digit i is predicted at position 7 + i from the two digits i at
    positions i and 4 + i, always 7 and 3 tokens back, and the carry from the digits before them:
    fixed distances, which a learned position table and RoPE (which sees only distances) can
    both find. It is the hardest of the four tasks, so ``train`` gives it 3000 steps: with 2000
    the default model reached 100% held-out on 5 of seeds 0 to 5 and stopped at 8.8% on seed 0
    (its loss flat at 0.46 from step 1400), and a change in the last bits of one backward
    (cross-entropy's, written as one pass) was enough to move seed 0 from one side to the other;
    with 3000 it reached 100% on each of seeds 0 to 11, and ``--arch llama`` on seeds 0 to 3.

        >>> add = Add()
        >>> add.parse("42 + 199")
        [2, 4, 0, 10, 9, 9, 1, 11]
        >>> add.solve(add.parse("42 + 199"))
        [1, 4, 2, 0, 13]
        >>> add.gloss(add.parse("42 + 199"), [1, 4, 2, 0, END])
        '42 + 199 = 241'
    """

    name = "add"
    summary = (f"add two numbers of up to {ADD_DIGITS} digits; the numbers and their "
               f"{ADD_DIGITS + 1}-digit sum are written least significant digit first")
    example = "2 4 0 + 9 9 1 =  →  1 4 2 0 .  (42 + 199 = 241)"
    max_prompt, max_answer = 2 * ADD_DIGITS + 2, ADD_DIGITS + 2
    defaults = MappingProxyType({"steps": 3000})

    def families(self) -> list[tuple[Sequence[int], ...]]:
        return [(range(10),) * ADD_DIGITS + ((PLUS,),) + (range(10),) * ADD_DIGITS + ((EQUALS,),)]

    def draw(self, rng: np.random.Generator) -> list[int]:
        a, b = rng.integers(0, 10**ADD_DIGITS, 2)
        return self._prompt(int(a), int(b))

    def solve(self, prompt: list[int]) -> list[int]:
        a, b = self._operands(prompt)
        return self._digits(a + b, ADD_DIGITS + 1) + [END]

    def parse(self, text: str) -> list[int]:
        """'a + b' (or 'a + b ='), a and b whole numbers of 1 to 3 digits 0-9 written as usual
        (most significant first); anything else, such as '1 + 2 = 3' or '1 2 + 3', is refused
        rather than read as another sum."""
        number = rf"([0-9]{{1,{ADD_DIGITS}}})"
        match = re.fullmatch(rf"\s*{number}\s*\+\s*{number}\s*(=\s*)?", text)
        if match is None:
            raise ValueError(f"add: expected 'a + b' (optionally ending in '='), a and b whole numbers "
                             f"of 1 to {ADD_DIGITS} digits 0-9, like '42 + 199'; got {text!r}")
        return self._prompt(int(match.group(1)), int(match.group(2)))

    def gloss(self, prompt: list[int], answer: list[int]) -> str:
        """'a + b = s' in the usual order, s read from `answer`; "" if the answer is not digits then END."""
        if not answer or answer[-1] != END or not all(0 <= d <= 9 for d in answer[:-1]):
            return ""
        a, b = self._operands(prompt)
        return f"{a} + {b} = {self.value(answer[:-1])}"

    @staticmethod
    def value(digits: Sequence[int]) -> int:
        """The number that digits written least significant first stand for: [1, 4, 2, 0] → 241."""
        return sum(d * 10**i for i, d in enumerate(digits))

    @classmethod
    def _operands(cls, prompt: list[int]) -> tuple[int, int]:
        """The two numbers of a prompt: 2 4 0 + 9 9 1 = → (42, 199)."""
        return cls.value(prompt[:ADD_DIGITS]), cls.value(prompt[ADD_DIGITS + 1:2 * ADD_DIGITS + 1])

    @classmethod
    def _prompt(cls, a: int, b: int) -> list[int]:
        return cls._digits(a, ADD_DIGITS) + [PLUS] + cls._digits(b, ADD_DIGITS) + [EQUALS]

    @staticmethod
    def _digits(n: int, width: int) -> list[int]:
        """n's `width` digits, least significant first: 42, 3 → [2, 4, 0]."""
        return [n // 10**i % 10 for i in range(width)]


TASKS: dict[str, ToyTask] = {task.name: task for task in (Copy(), Reverse(), Sort(), Add())}


_T = TypeVar("_T", bound=Task)


def get_task(name: str | _T) -> ToyTask | _T:
    """The toy task called `name` (a Task passes through); raises ValueError naming the known tasks.

    Example:
        >>> get_task("sort").max_prompt, get_task("add").max_answer
        (9, 5)
    """
    if not isinstance(name, str):
        return name
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: choose one of {', '.join(TASKS)}")
    return TASKS[name]


def answer(model: TinyTransformer, task: str | ToyTask, prompts: list[list[int]]) -> list[list[int]]:
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


def accuracy(model: TinyTransformer, task: str | ToyTask, prompts: list[list[int]]) -> float:
    """Exact match: the share of prompts whose whole greedy answer (through ".") is right."""
    task = get_task(task)
    predicted = answer(model, task, prompts)
    return float(np.mean([p == task.solve(q) for p, q in zip(predicted, prompts)]))
