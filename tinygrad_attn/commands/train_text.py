"""``tinygrad-attn train text``: the pieces of the train command that only a text run has.

The text and its tokenizer (``--file``, ``--tokenizer``, ``--vocab-size``, ``--block-size``), the
defaults of a text run, the validation loss and a sample every ``--eval-every`` steps, and the
report at the end (metrics.json, loss.png with both curves, attention.png on held-out text).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..files import write_atomically
from ..nn import TinyTransformer
from ..nn.sampling import generate_beyond_context
from ..text import CharTokenizer, HuggingFaceTokenizer, visible
from ..text.corpus import DEFAULT_CORPUS, default_corpus, read_corpus
from ..text.tokenizer import MAX_BPE_VOCABULARY
from ..training import History, TrainConfig, TrainState, plots
from ..training.text_task import TextTask, characters_per_token, validation_loss

__all__ = ["DEFAULTS", "TEXT_FLAGS", "Evaluations", "add_arguments", "continue_text", "first_line", "flag",
           "loss_units", "report", "sample_text", "text_task", "trained_for"]

# A text run's settings where they differ from the toy tasks': the model of nanoGPT's CPU
# example (4 layers, 4 heads, width 128, context 64) trained for about 10 minutes on 2 cores.
DEFAULTS = {"steps": 4000, "batch_size": 16, "d_model": 128, "num_heads": 4, "num_layers": 4,
            "lr": 2e-3, "warmup": 100, "min_lr": 1e-4, "eval_size": 200}
BLOCK_SIZE, VOCAB_SIZE, SAMPLE_TOKENS = 64, 512, 200
ATTENTION_TOKENS = 24       # attention.png's text: few enough that each row and column keeps a readable label
# The flags only a text run takes (their dest), for the toy tasks' refusal.
TEXT_FLAGS = ("file", "tokenizer", "vocab_size", "block_size")


def flag(name: str) -> str:
    """The command-line flag of a text option's dest."""
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser, config_flag: Callable[[str], str]) -> None:
    """The text flags, in a group of their own whose text names the default corpus and the
    defaults of a text run (`config_flag` gives a TrainConfig field's flag)."""
    group = parser.add_argument_group("text (train text only)", textwrap.fill(
        f"With no --file, a text run trains on {DEFAULT_CORPUS}, which every CPython install ships: "
        f"about 465 KB of English prose and Python code. The last 10% of the text is held out for the "
        f"validation loss. Text-run defaults: " + ", ".join(f"{config_flag(k)} {v:g}"
                                                            for k, v in DEFAULTS.items()) + ".",
        width=100, initial_indent="", subsequent_indent=""))
    group.add_argument("--file", help="a UTF-8 text file to train on (default: Python's help topics)")
    group.add_argument("--tokenizer", choices=("char", "bpe"),
                       help="char: one token per character (default); bpe: byte-level byte-pair "
                            "encoding trained on the text")
    group.add_argument("--vocab-size", type=int, metavar="N",
                       help=f"bpe: the vocabulary to train (256 to {MAX_BPE_VOCABULARY:,}, default "
                            f"{VOCAB_SIZE}); char: the most distinct characters allowed (default: as many "
                            f"as the text has)")
    group.add_argument("--block-size", type=int, metavar="N",
                       help=f"tokens the model reads at once (default {BLOCK_SIZE}; from 512 on, "
                            f"attention runs as the flash kernel)")


def text_task(args: argparse.Namespace) -> TextTask:
    """The task the text flags describe; ValueError (a TokenizerError among them) for bad input."""
    block_size = args.block_size if args.block_size is not None else BLOCK_SIZE
    _check_block_size(block_size, f"--block-size must be at least 2, got {block_size}")
    text, source = _read_text(args.file)
    if args.tokenizer == "bpe":
        vocab_size = VOCAB_SIZE if args.vocab_size is None else args.vocab_size
        tokenizer = HuggingFaceTokenizer.train_bpe(text, vocab_size)
    else:
        tokenizer = CharTokenizer.from_text(text, args.vocab_size)
    return TextTask.from_text(text, tokenizer, block_size, source)


def continue_text(task: TextTask, args: argparse.Namespace, checkpoint: Path) -> TextTask:
    """A resumed run's task with its text read again (``--file``, else the file it was trained
    on); ValueError for a text flag that would change the run, CheckpointError for another text."""
    fixed = {"block_size": task.block_size,
             "tokenizer": "char" if isinstance(task.tokenizer, CharTokenizer) else "bpe",
             "vocab_size": task.tokenizer.vocab_size}
    changed = [k for k, v in fixed.items() if getattr(args, k) is not None and getattr(args, k) != v]
    if changed:
        raise ValueError(f"cannot change {', '.join(flag(k) for k in changed)} when "
                         f"resuming (the checkpoint has "
                         + ", ".join(f"{k.replace('_', ' ')} {fixed[k]}" for k in changed) + ")")
    _check_block_size(task.block_size, f"{checkpoint} has block size {task.block_size}, which cannot be "
                                        f"resumed")
    file = args.file if args.file is not None else None if task.source == DEFAULT_CORPUS else task.source
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


def first_line(task: TextTask) -> str:
    """What a text run trains on, before anything else."""
    kind = (f"{task.vocab_size} distinct characters" if isinstance(task.tokenizer, CharTokenizer)
            else f"byte-level BPE, {task.vocab_size} tokens")
    return (f"training on {task.source}: {len(task.train_ids) + len(task.val_ids):,} tokens "
            f"({kind}); the last 10% ({len(task.val_ids):,} tokens) is held out for the validation loss")


class Evaluations:
    """The validation loss and a sample every ``config.eval_every`` steps, recorded in the run's history (so a
    resumed run keeps them) and printed through `write` (the progress bar's). Nothing here draws
    from the run's random streams: samples use a generator seeded by the run's seed and the step."""

    def __init__(self, model: TinyTransformer, task: TextTask, config: TrainConfig, state: TrainState,
                 write: Callable[[str], None]):
        self.model, self.task, self.config, self.state, self.write = model, task, config, state, write

    def __call__(self, step: int) -> None:
        if step == self.config.steps:
            self.measure(step)          # kept in the last checkpoint; `report` prints it
        elif step % self.config.eval_every == 0:
            loss = self.measure(step)
            self.write(f"step {step}: validation loss {loss_units(loss, self.task, self.config.eval_size)} "
                       f"(training loss, mean of the last 50 steps: "
                       f"{np.mean(self.state.history.loss[-50:]):.4f})")
            sample = sample_text(self.model, self.task, step, self.config.seed)
            self.write(f"sample after step {step}: {sample!r}")

    def measure(self, step: int) -> float:
        """The validation loss now, appended to the history (once per step)."""
        history = self.state.history
        if history.val_step and history.val_step[-1] == step:
            return history.val_loss[-1]
        loss = validation_loss(self.model, self.task, self.config.eval_size)
        history.val_step.append(step)
        history.val_loss.append(loss)
        return loss


def sample_text(model: TinyTransformer, task: TextTask, step: int, seed: int,
                tokens: int = SAMPLE_TOKENS) -> str:
    """`tokens` tokens sampled (temperature 0.8, top-k 20) after the first token of the validation
    split, from a generator seeded by the run's seed and the step (the same text for every rerun)."""
    rng = np.random.default_rng([seed, step])
    ids = generate_beyond_context(model, task.val_ids[:1], tokens, temperature=0.8, top_k=20, rng=rng)
    return task.tokenizer.decode(ids[1:].tolist())


def loss_units(loss: float, task: TextTask, windows: int) -> str:
    """A validation loss with its unit: '1.2400 nats per character' for a character run; for a BPE
    run per token and per character, '2.9000 nats per token = 0.7250 nats per character (4.0
    characters per token)', so runs of either tokenizer compare."""
    if isinstance(task.tokenizer, CharTokenizer):
        return f"{loss:.4f} nats per character"
    chars = characters_per_token(task, windows)
    return (f"{loss:.4f} nats per token = {loss / chars:.4f} nats per character ({chars:.2f} characters "
            f"per token)")


def trained_for(seconds: float, resumed_from: int, step: int) -> str:
    """'312.4 s of training', or for a resumed run '312.4 s of training, steps 2001-4000: resumed at
    step 2000' (the time before the resume is not counted: it was spent in another process)."""
    if not resumed_from:
        return f"{seconds:.1f} s of training"
    return f"{seconds:.1f} s of training, steps {resumed_from + 1}-{step}: resumed at step {resumed_from}"


def report(task: TextTask, config: TrainConfig, model: TinyTransformer, state: TrainState, out: Path,
           seconds: float, evaluations: Evaluations, resumed_from: int = 0) -> None:
    """The final validation loss and a sample; metrics.json, loss.png (training and validation)
    and attention.png (every head on held-out text), each written whole or not at all.
    `resumed_from`: the step this process started at (0 for a fresh run); `seconds` counts only
    its steps."""
    val = evaluations.measure(state.step)
    history: History = state.history
    sample = sample_text(model, task, state.step, config.seed)
    metrics = {"task": task.name, "source": task.source, "steps": state.step,
               "train_seconds": round(seconds, 2), "resumed_from_step": resumed_from, "validation_loss": val,
               "validation_characters_per_token": characters_per_token(task, config.eval_size),
               "final_loss": float(np.mean(history.loss[-50:])), "vocab_size": task.vocab_size,
               "block_size": task.block_size, "sample": sample, "config": dataclasses.asdict(config),
               **dataclasses.asdict(history)}
    write_atomically(out / "metrics.json", json.dumps(metrics, indent=1, ensure_ascii=False).encode())
    name = "pydoc_data.topics" if task.source == DEFAULT_CORPUS else Path(task.source).name
    plots.loss_curve(history.loss, out / "loss.png", f"text: loss per token on {name}",
                     validation=(history.val_step, history.val_loss), ylabel="cross-entropy per token")
    shown = task.val_ids[:min(task.block_size, ATTENTION_TOKENS)]
    maps = [m.numpy()[0] for m in model.attention_maps(shown[None])]
    plots.attention_grid(maps, [visible(t) for t in task.tokenizer.tokens(shown.tolist())],
                         out / "attention.png",
                         "text: attention (rows: queries, columns: keys) on the start of the held-out text")
    print(f"text: validation loss {loss_units(val, task, config.eval_size)} after {state.step} steps "
          f"({trained_for(seconds, resumed_from, state.step)}; training loss {metrics['final_loss']:.4f}); "
          f"wrote {out}/")
    print(f"sample (temperature 0.8, top-k 20): {sample!r}")
