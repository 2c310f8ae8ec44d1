"""The task of a run named as ``tinygrad-attn train TASK`` names it: a toy task by its name, or
``text`` with the options only a text run takes (``OPTIONS``: its file, tokenizer, vocabulary size
and block size, their defaults here); and a resumed run's task made whole again, its text read
anew, with any option that would change the run refused.

Example:
    >>> task_for("add").max_len
    13
    >>> task_for("copy", {"block_size": 8})
    Traceback (most recent call last):
    ...
    ValueError: --block-size is for `train text` only, not the toy task copy
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..text import CharTokenizer, HuggingFaceTokenizer
from ..text.corpus import DEFAULT_CORPUS, default_corpus, read_corpus
from ..text.tokenizer import Tokenizer
from .task import Task
from .tasks import TASKS, get_task
from .text_task import TextTask

__all__ = ["BLOCK_SIZE", "BPE_VOCABULARY", "OPTIONS", "TASK_NAMES", "check_options", "task_again", "task_for"]

TASK_NAMES = (*TASKS, TextTask.name)
# The options only a text run takes, by their names (the flags are --file, --tokenizer, …).
OPTIONS = ("file", "tokenizer", "vocab_size", "block_size")
BLOCK_SIZE = 64         # tokens the model reads at once
BPE_VOCABULARY = 512    # the vocabulary a byte-level BPE tokenizer is trained to


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """ValueError when the task `name` does not take the `options` given (a toy task takes none)."""
    if name != TextTask.name and options:
        given = ", ".join(_flag(option) for option in options)
        raise ValueError(f"{given} {'is' if len(options) == 1 else 'are'} for `train text` only, not the "
                         f"toy task {name}")


def task_for(name: str, options: Mapping[str, Any] | None = None) -> Task:
    """The task called `name`, with `options` (``OPTIONS``: those given, by name) for a text: its
    file (default: the default corpus), read here, its tokenizer ("char" or "bpe", trained on the
    text) and block size. ValueError (a TokenizerError among them) for bad input."""
    options = options or {}
    check_options(name, options)
    if name != TextTask.name:
        return get_task(name)
    block_size = options.get("block_size", BLOCK_SIZE)
    _check_block_size(block_size, f"--block-size must be at least 2, got {block_size}")
    text, source = _read_text(options.get("file"))
    tokenizer: Tokenizer
    if options.get("tokenizer") == "bpe":
        tokenizer = HuggingFaceTokenizer.train_bpe(text, options.get("vocab_size", BPE_VOCABULARY))
    else:
        tokenizer = CharTokenizer.from_text(text, options.get("vocab_size"))
    return TextTask.from_text(text, tokenizer, block_size, source)


def task_again(task: Task, name: str, options: Mapping[str, Any], checkpoint: Path | None) -> Task:
    """The task of a run read from `checkpoint`, to resume it as a run of the task `name`: a toy
    task is whole; a text has its text read again (the ``file`` option, else the file it was
    trained on). ValueError for a run of another task or an option that would change the run,
    CheckpointError for another text."""
    if task.name != name:
        raise ValueError(f"{checkpoint} is a {task.name!r} checkpoint, not {name!r}")
    check_options(name, options)
    if not isinstance(task, TextTask):
        return task
    fixed = {"block_size": task.block_size,
             "tokenizer": "char" if isinstance(task.tokenizer, CharTokenizer) else "bpe",
             "vocab_size": task.tokenizer.vocab_size}
    changed = [k for k, v in fixed.items() if options.get(k, v) != v]
    if changed:
        raise ValueError(f"cannot change {', '.join(_flag(k) for k in changed)} when resuming (the "
                         f"checkpoint has " + ", ".join(f"{k.replace('_', ' ')} {fixed[k]}" for k in changed)
                         + ")")
    _check_block_size(task.block_size, f"{checkpoint} has block size {task.block_size}, which cannot be "
                                        f"resumed")
    file = options.get("file", None if task.source == DEFAULT_CORPUS else task.source)
    text, _ = _read_text(file)
    return task.with_text(text, file or DEFAULT_CORPUS)


def _check_block_size(block_size: int, refusal: str) -> None:
    """ValueError (`refusal` and why) unless a model reading `block_size` tokens can write a sample:
    it continues one token of held-out text, every --eval-every steps and at the end, so it needs
    room for two."""
    if block_size < 2:
        raise ValueError(f"{refusal}: the samples after every --eval-every steps and at the end continue "
                         f"one token of held-out text, so the model must read that token and the one it "
                         f"writes")


def _read_text(file: str | None) -> tuple[str, str]:
    """The text and where it came from, in words."""
    if file is None:
        return default_corpus(), DEFAULT_CORPUS
    return read_corpus(file), str(Path(file).resolve())
