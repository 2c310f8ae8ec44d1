"""The flags of ``tinygrad-attn train TASK``: one for every TrainConfig setting (``--batch-size``),
the run's own (``--out``, ``--overwrite``, ``--resume``, ``--save-every``, ``--stop-after``), and the
task's: a toy task by its name, or ``text`` with the options only a text run takes, its text and
tokenizer (``--file``, ``--tokenizer``, ``--vocab-size``, ``--block-size``). The task they name is
made by ``training.task_options``; everything else a run does is the run's (``training.Run``)."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from typing import Any

from ..text.corpus import DEFAULT_CORPUS
from ..text.tokenizer import MAX_BPE_VOCABULARY
from ..training import TextTask, TrainConfig
from ..training.run import FIXED_ON_RESUME
from ..training.task_options import BLOCK_SIZE, BPE_VOCABULARY, OPTIONS, TASK_NAMES, check_options
from ..training.tasks import TASKS, VOCAB

__all__ = ["EPILOG", "SETTINGS", "add_arguments", "check", "flag"]

# Every TrainConfig setting is a flag: --batch-size for batch_size, except these two.
_RENAMED = {"num_heads": "--heads", "num_layers": "--layers"}
SETTINGS = [field for field in dataclasses.fields(TrainConfig) if "help" in field.metadata]
EPILOG = (f"tasks (vocabulary of {len(VOCAB)} tokens: digits 0-9, '+', '=', '|' ends a list, '.' ends an "
          f"answer, '_' pads):\n" + "\n".join(
              f"  {t.name:8s} {t.summary};\n"
              f"           prompt ≤ {t.max_prompt} tokens, answer ≤ {t.max_answer} (with its '.'), "
              f"e.g. {t.example}" for t in TASKS.values())
          + "\n\nThe loss counts only answer tokens. Exact-match accuracy is measured by greedy decoding "
            "(token by token)\non held-out prompts: a fixed 5% of all prompts that training never sees.")


def flag(name: str) -> str:
    """The command-line flag of a TrainConfig setting or a text option (its dest)."""
    return _RENAMED.get(name, "--" + name.replace("_", "-"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every flag of the train command."""
    parser.add_argument("task", choices=sorted(TASK_NAMES),
                        help="a toy task, or text: a language model on a text file")
    defaults = {field.name: str(field.default) for field in SETTINGS}
    defaults["steps"] = "the task's: " + ", ".join(f"{t.name} {TrainConfig(**t.defaults).steps}"
                                                   for t in TASKS.values())
    for field in SETTINGS:     # None: not given, the default applies
        parser.add_argument(flag(field.name), dest=field.name, type=type(field.default), default=None,
                            metavar=field.name.upper(),
                            help=f"{field.metadata['help']} (default {defaults[field.name]})")
    parser.add_argument("--out", help="output folder, whose parent must exist (default runs/TASK, or "
                                      "the resumed run's own folder); locked while the run lasts")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run already in the output folder (refused without it)")
    parser.add_argument("--resume", metavar="CHECKPOINT",
                        help="continue from a checkpoint file or run folder with the same losses "
                             "as an uninterrupted run, also after Ctrl-C (which stops at the end of "
                             "the running step and saves it); every flag above but "
                             + ", ".join(flag(f) for f in FIXED_ON_RESUME) + " may change")
    parser.add_argument("--save-every", type=int, default=500, metavar="N",
                        help="write the checkpoint every N steps, once the step after it trained sanely "
                             "(so a diverged run keeps weights that can train; default 500; 0: only at "
                             "the end)")
    parser.add_argument("--stop-after", type=int, metavar="N",
                        help="stop after N (≥ 1) steps of this run and save (continue later with --resume)")
    group = parser.add_argument_group("text (train text only)", textwrap.fill(
        f"With no --file, a text run trains on {DEFAULT_CORPUS}, which every CPython install ships: "
        f"about 465 KB of English prose and Python code. The last 10% of the text is held out for the "
        f"validation loss. Text-run defaults: " + ", ".join(f"{flag(k)} {v:g}"
                                                            for k, v in TextTask.defaults.items()) + ".",
        width=100, initial_indent="", subsequent_indent=""))
    group.add_argument("--file", help="a UTF-8 text file to train on (default: Python's help topics)")
    group.add_argument("--tokenizer", choices=("char", "bpe"),
                       help="char: one token per character (default); bpe: byte-level byte-pair "
                            "encoding trained on the text")
    group.add_argument("--vocab-size", type=int, metavar="N",
                       help=f"bpe: the vocabulary to train (256 to {MAX_BPE_VOCABULARY:,}, default "
                            f"{BPE_VOCABULARY}); char: the most distinct characters allowed (default: as "
                            f"many as the text has)")
    group.add_argument("--block-size", type=int, metavar="N",
                       help=f"tokens the model reads at once (default {BLOCK_SIZE}; from 512 on, "
                            f"attention runs as the flash kernel)")


def check(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The TrainConfig settings given, and the task's options (``task_options.OPTIONS``) given;
    ValueError for a flag that cannot work, a text flag given to a toy task among them."""
    if args.stop_after is not None and args.stop_after < 1:
        raise ValueError(f"--stop-after must be at least 1, got {args.stop_after}")
    if args.save_every < 0:
        raise ValueError(f"--save-every must be 0 (only at the end) or more, got {args.save_every}")
    if args.out is not None and not args.out.strip():
        raise ValueError("--out is empty: name a folder, or leave --out out to write to runs/TASK")
    options = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    check_options(args.task, options)
    return {f.name: getattr(args, f.name) for f in SETTINGS if getattr(args, f.name) is not None}, options
