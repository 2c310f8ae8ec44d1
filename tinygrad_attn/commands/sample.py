"""``tinygrad-attn sample RUN "prompt"``: what a trained model writes after a prompt.

A toy-task run answers one input greedily (``sample runs/copy "3 1 2"``); a text run continues the
prompt, sampling each token from softmax(logits / temperature) over the top-k most likely ones
(``sample runs/text "def f" --max-new-tokens 300 --temperature 0.8 --top-k 20 --seed 1``; temperature
0 always takes the most likely token). A Hugging Face model folder continues a text greedily unless
given a temperature (``sample --model PATH "The capital of France is" --max-new-tokens 20``). A text
is printed as it is written: each token as soon as it is chosen (with the key/value cache, one
position's work per token), a character cut across tokens once it is whole.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from ..backend import xp_for
from ..errors import CheckpointError, DeviceError
from ..nn import TinyTransformer
from ..pretrained import load_pretrained
from ..training import Run, Task
from ..training.run_folder import CHECKPOINT
from ..training.sample_options import MAX_NEW_TOKENS, TEMPERATURE, TOP_K, SampleOptions, SamplingNote
from ..training.text_task import TextTask
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "load_model", "run"]


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.model is not None:              # `sample --model PATH "text"`: the one positional is the text
        if args.checkpoint is None:
            return _fail(f'with --model, give the text to continue: sample --model {args.model} "text"')
        if args.input is not None:
            return _fail(f"with --model, give only the text to continue, got {args.checkpoint!r} and "
                         f"{args.input!r}")
        args.input, args.checkpoint = args.checkpoint, None
    elif args.checkpoint is None or args.input is None:
        return _fail('give a run folder (or --model PATH) and the text to continue: sample RUN "text"')
    try:
        model, task = load_model(args)
    except (CheckpointError, DeviceError) as e:
        return _fail(str(e))
    options = SampleOptions(args.max_new_tokens, args.temperature, args.top_k, args.seed)
    if args.model is not None and args.temperature is None:
        options = replace(options, temperature=0.0)     # a Hugging Face model continues greedily unless told
    terminal = _Terminal()
    try:
        with _notes_on_stderr():
            task.reply(model, args.input, options, terminal.write)
    except ValueError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        terminal.end_line()             # the text so far ends its line before "interrupted"
        raise
    terminal.end_line()
    return 0


class _Terminal:
    """Where a reply is shown: each piece on stdout at once (a token as soon as it is chosen), after
    the threads line, which the first piece brings (so an error in the prompt or a flag comes alone)."""

    def __init__(self) -> None:
        self.started = False

    def write(self, piece: str) -> None:
        if not self.started:
            say_threads()
            self.started = True
        if piece:
            sys.stdout.write(piece)
            sys.stdout.flush()

    def end_line(self) -> None:
        """End the reply's last line, once it has begun."""
        if self.started:
            print()


@contextmanager
def _notes_on_stderr() -> Iterator[None]:
    """Inside it, each SamplingNote a task warns of is a "note: …" line on stderr; other warnings
    are shown as they would be."""
    with warnings.catch_warnings():
        show = warnings.showwarning

        def note(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if issubclass(category, SamplingNote):
                print(f"note: {message}", file=sys.stderr)
            else:
                show(message, category, filename, lineno, file, line)
        warnings.simplefilter("always", SamplingNote)
        warnings.showwarning = note
        yield


def load_model(args: argparse.Namespace) -> tuple[TinyTransformer, Task]:
    """The model to sample from and its task (a text run's holds its tokenizer): the one place
    that decides what a `sample` command loads. A Hugging Face folder (``--model PATH``, or a
    folder with config.json) is a text task over its tokenizer.json, read max_len tokens at a time."""
    path = Path(args.model or args.checkpoint)
    if args.model is None and not (path / "config.json").is_file():
        saved = Run.load(path, args.device)
        return saved.model, saved.task
    if args.device is not None:
        xp_for(args.device)             # an unusable device is refused before the weights are read
    model, tokenizer = load_pretrained(path)
    if args.device is not None:
        model.to(args.device)
    if tokenizer is None:
        raise CheckpointError(f"{path}: no tokenizer.json, so the prompt cannot be made into tokens")
    return model, TextTask(tokenizer, model.max_len, str(path), digest="")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sample", help="what a trained model writes after a prompt",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?",
                        help=f"a run folder or {CHECKPOINT} written by `tinygrad-attn train` (none with "
                             "--model)")
    parser.add_argument("input", nargs="?",
                        help="a text run: the text to continue; a toy task: digits like \"3 1 2\" "
                             "(copy, reverse, sort) or \"42 + 199\" (add)")
    parser.add_argument("--device", help="cpu or cuda (default: the device it was trained on)")
    parser.add_argument("--model", metavar="PATH",
                        help="a Hugging Face model folder (config.json, model.safetensors, tokenizer.json) "
                             "instead of a run; then give only the text; greedy unless --temperature")
    text = parser.add_argument_group("text runs")
    text.add_argument("--max-new-tokens", type=int, metavar="N",
                      help=f"tokens to write after the prompt (default {MAX_NEW_TOKENS})")
    text.add_argument("--temperature", type=float, metavar="T",
                      help=f"divides the logits before the softmax: 0 always takes the most likely token, "
                           f"1 samples the model's own distribution (default {TEMPERATURE})")
    text.add_argument("--top-k", type=int, metavar="K",
                      help=f"sample among the K most likely tokens only (default {TOP_K})")
    text.add_argument("--seed", type=int, help="seeds the sampling: the same seed writes the same text "
                                               "(default: a different text each time)")
    add_threads_option(parser, "--model", lambda args: args.model is not None)
    parser.set_defaults(run=run)
