"""Next-character (or next-token) prediction on a text: the language-modelling task.

The text is encoded once; its first 90% is the training split and the last 10% is held out for
the validation loss. A training batch is `batch_size` windows of ``block_size + 1`` tokens at
random starts inside the training split: the model reads the first ``block_size`` and every
position predicts the token after it (``targets = ids`` shifted by one), so unlike the toy tasks
every target counts. No window crosses the split: the training windows end before it, the
validation windows start after it.

As a ``Task``: its held-out set is fixed windows of the validation split; every
``config.eval_every`` steps, and at the end, the model is measured by its validation loss there
and writes a sample (``text_evaluation.py``); the defaults are those of a small language model;
a model replies to a prompt by continuing it, token by token (``reply``).

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
import warnings
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CheckpointError
from ..nn import TinyTransformer
from ..nn.sampling import GREEDY_BELOW, check_sampling, generate_beyond_context
from ..text import CharTokenizer, TextStream, tokenizer_from_json, visible
from ..text.corpus import DEFAULT_CORPUS
from ..text.tokenizer import Tokenizer
from . import plots
from .sample_options import MAX_NEW_TOKENS, TEMPERATURE, TOP_K, SampleOptions, SamplingNote
from .task import Evaluation, Task
from .text_evaluation import characters_per_token, loss_units, sample_text, validation_loss

if TYPE_CHECKING:
    from .config import TrainConfig
    from .loop import History

__all__ = ["HELD_OUT", "TextTask"]

HELD_OUT = 0.1          # the last tenth of the tokens: the validation split
ATTENTION_TOKENS = 24   # attention.png's text: few enough that each row and column keeps a readable label


class TextTask(Task):
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
    # The model of nanoGPT's CPU example (4 layers, 4 heads, width 128, context 64) trained for
    # about 10 minutes on 2 cores.
    defaults = MappingProxyType({"steps": 4000, "batch_size": 16, "d_model": 128, "num_heads": 4,
                                 "num_layers": 4, "lr": 2e-3, "warmup": 100, "min_lr": 1e-4,
                                 "eval_size": 200})
    held_out_name = "validation windows"

    def __init__(self, tokenizer: Tokenizer, block_size: int, source: str, digest: str,
                 ids: np.ndarray | None = None):
        if block_size < 1:
            raise ValueError(f"--block-size must be at least 1, got {block_size}")
        self.tokenizer, self.block_size, self.source, self.digest = tokenizer, block_size, source, digest
        self.train_ids: np.ndarray | None = None
        self.val_ids: np.ndarray | None = None
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
    def introduction(self) -> str:
        kind = (f"{self.vocab_size} distinct characters" if isinstance(self.tokenizer, CharTokenizer)
                else f"byte-level BPE, {self.vocab_size} tokens")
        ids, val = self.split_ids()
        return (f"training on {self.source}: {len(ids) + len(val):,} tokens ({kind}); the last 10% "
                f"({len(val):,} tokens) is held out for the validation loss")

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (size, block_size), from random windows of the training split."""
        ids, _ = self.split_ids()
        starts = rng.integers(0, len(ids) - self.block_size, size)
        windows = ids[starts[:, None] + np.arange(self.block_size + 1)]         # (size, block + 1)
        return windows[:, :-1], windows[:, 1:]

    def held_out(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (n, block_size): up to `count` windows evenly spaced over the
        validation split, the same every time (so validation losses compare across steps)."""
        _, val = self.split_ids()
        last = len(val) - self.block_size - 1                                   # the last start
        starts = np.unique(np.linspace(0, last, num=min(count, last + 1)).round().astype(np.int64))
        windows = val[starts[:, None] + np.arange(self.block_size + 1)]
        return windows[:, :-1], windows[:, 1:]

    def after_step(self, model: TinyTransformer, config: TrainConfig, history: History,
                   step: int) -> list[str]:
        """Every ``config.eval_every`` steps: the validation loss (kept in `history`) and a sample;
        after the last step the validation loss alone, which the report then prints."""
        if step == config.steps:
            self._measure(model, config, history, step)
        elif step % config.eval_every == 0:
            loss = self._measure(model, config, history, step)
            return [f"step {step}: validation loss {loss_units(loss, self, config.eval_size)} (training "
                    f"loss, mean of the last 50 steps: {np.mean(history.loss[-50:]):.4f})",
                    f"sample after step {step}: {sample_text(model, self, step, config.seed)!r}"]
        return []

    def _measure(self, model: TinyTransformer, config: TrainConfig, history: History, step: int) -> float:
        """The validation loss after `step`, appended to the history once."""
        if history.val_step and history.val_step[-1] == step:
            return history.val_loss[-1]
        loss = validation_loss(model, self, config.eval_size)
        history.val_step.append(step)
        history.val_loss.append(loss)
        return loss

    def evaluate(self, model: TinyTransformer, config: TrainConfig, history: History,
                 held_out: tuple[np.ndarray, np.ndarray]) -> Evaluation:
        """The validation loss (per token and per character) and a sample."""
        step = len(history.loss)
        loss = self._measure(model, config, history, step)
        sample = sample_text(model, self, step, config.seed)
        metrics = {"source": self.source, "validation_loss": loss,
                   "validation_characters_per_token": characters_per_token(self, config.eval_size),
                   "vocab_size": self.vocab_size, "block_size": self.block_size, "sample": sample}
        return Evaluation(metrics, f"validation loss {loss_units(loss, self, config.eval_size)}",
                          f"; training loss {np.mean(history.loss[-50:]):.4f}",
                          [f"sample (temperature {TEMPERATURE}, top-k {TOP_K}): {sample!r}"])

    def draw_figures(self, model: TinyTransformer, history: History, held_out: tuple[np.ndarray, np.ndarray],
                     folder: Path) -> None:
        """Both losses, and every head's attention on the start of the held-out text."""
        shown = self.split_ids()[1][:min(self.block_size, ATTENTION_TOKENS)]   # before drawing anything
        name = "pydoc_data.topics" if self.source == DEFAULT_CORPUS else Path(self.source).name
        plots.loss_curve(history.loss, folder / "loss.png", f"text: loss per token on {name}",
                         validation=(history.val_step, history.val_loss), ylabel="cross-entropy per token")
        maps = [m.numpy()[0] for m in model.attention_maps(shown[None])]
        labels = [visible(t) for t in self.tokenizer.tokens(shown.tolist())]
        title = "text: attention (rows: queries, columns: keys) on the start of the held-out text"
        plots.attention_grid(maps, labels, folder / "attention.png", title)

    def reply(self, model: TinyTransformer, prompt: str, options: SampleOptions,
              write: Callable[[str], None]) -> None:
        """`prompt`, then what `model` writes after it, sampling each token from softmax(logits /
        temperature) over the top-k (``SampleOptions``; its defaults where left out): each token
        handed to `write` as soon as it is chosen (with the key/value cache, one position's work
        per token), a character cut across tokens once it is whole. On Ctrl-C the text written so
        far is handed over whole before the KeyboardInterrupt goes on. ValueError for a bad prompt
        or option, TokenizerError for a character the tokenizer lacks."""
        temperature = TEMPERATURE if options.temperature is None else options.temperature
        top_k = TOP_K if options.top_k is None else options.top_k
        new = MAX_NEW_TOKENS if options.max_new_tokens is None else options.max_new_tokens
        check_sampling(temperature, top_k)
        if new < 0:
            raise ValueError(f"--max-new-tokens must be 0 or more, got {new}")
        if options.seed is not None and options.seed < 0:
            raise ValueError(f"--seed must be 0 or more, got {options.seed}")
        if 0 < temperature < GREEDY_BELOW:
            warnings.warn(f"--temperature {temperature} is below {GREEDY_BELOW:.3g}, too small to divide the "
                          f"logits by, so each token is the most likely one (as with --temperature 0)",
                          SamplingNote, stacklevel=2)
        if not prompt:
            raise ValueError('the prompt is empty: give at least one character to continue, e.g. "\\n"')
        ids = self.tokenizer.encode(prompt)
        if len(ids) >= self.block_size:
            raise ValueError(f"the prompt is {len(ids)} tokens; this model reads {self.block_size} at "
                             f"once, so give at most {self.block_size - 1}")
        rng = np.random.default_rng(options.seed)
        stream = TextStream(self.tokenizer)
        write(stream.add(ids))
        try:
            generate_beyond_context(model, np.array(ids), new, temperature, top_k, rng,
                                    on_token=lambda token: write(stream.add([token])))
        except KeyboardInterrupt:
            write(stream.finish())          # the text so far, whole, before the interruption goes on
            raise
        write(stream.finish())

    def to_meta(self) -> dict[str, Any]:
        """What a checkpoint keeps of the task (its text is not saved, only its digest)."""
        return {"name": self.name, "tokenizer": self.tokenizer.to_json(), "block_size": self.block_size,
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

    def split_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(training ids, validation ids); ValueError for a task read from a checkpoint without its
        text."""
        if self.train_ids is None or self.val_ids is None:
            raise ValueError("this text task was read from a checkpoint without its text: "
                             "give it the text with with_text() to train or validate")
        return self.train_ids, self.val_ids


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
