"""Next-character (or next-token) prediction on a text: the language-modelling task.

The text is encoded once; its first 90% is the training split and the last 10% is held out for
the validation loss. A training batch is `batch_size` windows of ``block_size + 1`` tokens at
random starts inside the training split: the model reads the first ``block_size`` and every
position predicts the token after it (``targets = ids`` shifted by one), so unlike the toy tasks
every target counts. No window crosses the split: the training windows end before it, the
validation windows start after it. A model is measured by its validation loss on fixed windows.

Example:
    >>> from tinygrad_attn.text import CharTokenizer
    >>> text = "abcdefghij" * 10
    >>> task = TextTask.from_text(text, CharTokenizer.from_text(text), block_size=4)
    >>> ids, targets = task.batch(np.random.default_rng(0), 2)
    >>> ids.shape, (ids[:, 1:] == targets[:, :-1]).all()
    ((2, 4), np.True_)
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .. import functional as F
from ..engine import no_grad
from ..errors import CheckpointError
from ..nn import TinyTransformer
from ..tensor import Tensor
from ..text import CharTokenizer, tokenizer_from_json
from ..text.tokenizer import Tokenizer
from .tasks import ToyTask

__all__ = ["HELD_OUT", "TextTask", "characters_per_token", "validation_loss"]

HELD_OUT = 0.1          # the last tenth of the tokens: the validation split


class TextTask(ToyTask):
    """Language modelling on one text with a tokenizer and a block size (the model's context).

    Attributes:
        tokenizer: text ↔ ids (saved with the checkpoint, so a saved run can read prompts).
        block_size: tokens the model reads at once; its max_len.
        source: where the text came from, in words (a file's path, or the default corpus).
        digest: SHA-256 of the text; a resumed run must train on the same text.
        train_ids, val_ids: the two splits, as token ids (None for a task read back from a
            checkpoint without its text: it can sample, not train).
    """

    name = "text"
    summary = "next-token prediction on a text file (default: Python's help topics)"
    example = "'def f' → 'def f(x):'"
    max_answer = 0

    def __init__(self, tokenizer: Tokenizer, block_size: int, source: str, digest: str,
                 ids: np.ndarray | None = None):
        if block_size < 1:
            raise ValueError(f"--block-size must be at least 1, got {block_size}")
        self.tokenizer, self.block_size, self.source, self.digest = tokenizer, block_size, source, digest
        self.max_prompt = block_size
        self.train_ids = self.val_ids = None
        if ids is not None:
            self.train_ids, self.val_ids = _split(ids, block_size, tokenizer)

    @classmethod
    def from_text(cls, text: str, tokenizer: Tokenizer, block_size: int,
                  source: str = "the text") -> TextTask:
        """The task on `text`, encoded by `tokenizer` (which raises for a character it lacks)."""
        ids = np.array(tokenizer.encode(text), dtype=np.int64)
        return cls(tokenizer, block_size, source, _digest(text), ids)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def max_len(self) -> int:
        return self.block_size

    @property
    def seq_len(self) -> int:
        return self.block_size

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (size, block_size), from random windows of the training split."""
        ids = self._require_text()
        starts = rng.integers(0, len(ids) - self.block_size, size)
        windows = ids[starts[:, None] + np.arange(self.block_size + 1)]         # (size, block + 1)
        return windows[:, :-1], windows[:, 1:]

    def validation_windows(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (n, block_size): up to `count` windows evenly spaced over the
        validation split, the same every time (so validation losses compare across steps)."""
        self._require_text()
        last = len(self.val_ids) - self.block_size - 1                          # the last start
        starts = np.unique(np.linspace(0, last, num=min(count, last + 1)).round().astype(np.int64))
        windows = self.val_ids[starts[:, None] + np.arange(self.block_size + 1)]
        return windows[:, :-1], windows[:, 1:]

    def parse(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def solve(self, prompt: list[int]) -> list[int]:
        raise ValueError("a text has no single right continuation: sample one instead")

    def to_meta(self) -> dict[str, Any]:
        """What a checkpoint keeps of the task (its text is not saved, only its digest)."""
        return {"tokenizer": self.tokenizer.to_json(), "block_size": self.block_size,
                "source": self.source, "digest": self.digest}

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> TextTask:
        """The task `to_meta` described, without its text (enough to sample; `with_text` to train)."""
        return cls(tokenizer_from_json(meta["tokenizer"], "the checkpoint's tokenizer"),
                   int(meta["block_size"]), str(meta["source"]), str(meta["digest"]))

    def with_text(self, text: str, where: str) -> TextTask:
        """This task on its own text again (to resume training); CheckpointError if `text` is not
        the text the run started on."""
        if _digest(text) != self.digest:
            raise CheckpointError(f"{where} is not the text this run was trained on ({self.source}): "
                                  f"it changed since, and resuming on another text would not continue "
                                  f"the run; pass the same --file, or start a new run")
        return TextTask.from_text(text, self.tokenizer, self.block_size, self.source)

    def _require_text(self) -> np.ndarray:
        if self.train_ids is None:
            raise ValueError("this text task was read from a checkpoint without its text: "
                             "give it the text with with_text() to train or validate")
        return self.train_ids


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _split(ids: np.ndarray, block_size: int, tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The first 90% and the last 10% of `ids`; ValueError unless each holds a window."""
    split = len(ids) - int(round(HELD_OUT * len(ids)))
    train, val = ids[:split], ids[split:]
    need = block_size + 1                                   # a block and the token after it
    if min(len(train), len(val)) < need:
        unit = "characters" if isinstance(tokenizer, CharTokenizer) else "tokens"
        least = int(np.ceil(need / HELD_OUT))
        raise ValueError(
            f"the text is too short for --block-size {block_size}: it has {len(ids)} {unit}, so the "
            f"held-out last {HELD_OUT:.0%} has {len(val)}, and each split needs at least one block of "
            f"{block_size} plus the {unit[:-1]} after it; give a text of at least {least} {unit} or "
            f"a smaller --block-size (at most {max(len(val) - 1, 0)} for this text)")
    return train, val


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
