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
from pathlib import Path

import numpy as np

from ..backend import xp_for
from ..errors import CheckpointError, DeviceError
from ..nn import TinyTransformer
from ..nn.sampling import GREEDY_BELOW, check_sampling, generate_beyond_context
from ..pretrained import load_pretrained
from ..text import TextStream
from ..training import Run, Task, answer
from ..training.run_folder import CHECKPOINT
from ..training.tasks import ToyTask, decode
from ..training.text_task import TextTask
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "load_model", "run"]

# A text run's sampling, when the flags leave it out.
MAX_NEW_TOKENS, TEMPERATURE, TOP_K = 300, 0.8, 20
_TEXT_FLAGS = ("max_new_tokens", "temperature", "top_k", "seed")


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
    try:
        if isinstance(task, TextTask):
            return _continue_text(model, task, args)
        assert isinstance(task, ToyTask), task      # a run's task is text or a toy task (TASK_KINDS)
        given = [f"--{f.replace('_', '-')}" for f in _TEXT_FLAGS if getattr(args, f) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for text runs; "
                             f"a {task.name} run answers greedily")
        prompt = task.parse(args.input)
    except ValueError as e:
        return _fail(str(e))
    say_threads()
    predicted = answer(model, task, [prompt])[0]
    expected = task.solve(prompt)
    gloss = task.gloss(prompt, predicted)
    print(f"{decode(prompt)}  →  {decode(predicted)}" + (f"  (read as {gloss})" if gloss else ""))
    if predicted != expected:
        right = task.gloss(prompt, expected)
        print(f"(the right answer is {decode(expected)}" + (f", read as {right})" if right else ")"))
    return 0


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


def _continue_text(model: TinyTransformer, task: TextTask, args: argparse.Namespace) -> int:
    """Print the prompt and what the model writes after it; ValueError for a bad prompt or flag."""
    temperature = (0.0 if args.model else TEMPERATURE) if args.temperature is None else args.temperature
    top_k = TOP_K if args.top_k is None else args.top_k
    new = MAX_NEW_TOKENS if args.max_new_tokens is None else args.max_new_tokens
    check_sampling(temperature, top_k)
    if new < 0:
        raise ValueError(f"--max-new-tokens must be 0 or more, got {new}")
    if args.seed is not None and args.seed < 0:
        raise ValueError(f"--seed must be 0 or more, got {args.seed}")
    if 0 < temperature < GREEDY_BELOW:
        print(f"note: --temperature {temperature} is below {GREEDY_BELOW:.3g}, too small to divide the "
              f"logits by, so each token is the most likely one (as with --temperature 0)", file=sys.stderr)
    if not args.input:
        raise ValueError('the prompt is empty: give at least one character to continue, e.g. "\\n"')
    prompt = task.tokenizer.encode(args.input)          # TokenizerError names a character it lacks
    if len(prompt) >= task.block_size:
        raise ValueError(f"the prompt is {len(prompt)} tokens; this model reads {task.block_size} at "
                         f"once, so give at most {task.block_size - 1}")
    rng = np.random.default_rng(args.seed)
    stream = TextStream(task.tokenizer)
    say_threads()
    _write_now(stream.add(prompt))
    try:
        generate_beyond_context(model, np.array(prompt), new, temperature, top_k, rng,
                                on_token=lambda token: _write_now(stream.add([token])))
    except KeyboardInterrupt:
        print(stream.finish())          # the text so far ends its line before "interrupted"
        raise
    print(stream.finish())
    return 0


def _write_now(text: str) -> None:
    """Print `text` without a newline and show it at once (a token as soon as it is chosen)."""
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


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
