"""``tinygrad-attn train TASK``: train a TinyTransformer on a toy task and report what it learned.

Writes to the output folder: checkpoint.npz (weights, optimizer state, step, losses, config and
the random generators' states), metrics.json, loss.png and attention.png (a layer × head grid of
attention heatmaps for one held-out example).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..backend import xp_for
from ..errors import CheckpointError, DeviceError, SaveError
from ..files import write_atomically
from ..nn import TinyTransformer
from ..training import (
    DivergedError,
    History,
    InterruptedMidStep,
    StepOutOfMemory,
    TrainConfig,
    TrainState,
    accuracy,
    checkpoint,
    load_run,
    make_model,
    plots,
    run_contents,
    train,
)
from ..training.config import ConfigError
from ..training.interrupts import Terminated, termination_as_interrupt
from ..training.run_folder import RunFolder
from ..training.saved_run import checkpoint_file, saved_step
from ..training.tasks import TASKS, VOCAB, Task, decode, get_task
from ..training.text_task import TextTask
from . import train_text
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "flag", "run"]


# Every TrainConfig field is a flag: --batch-size for batch_size, except these two.
_RENAMED = {"num_heads": "--heads", "num_layers": "--layers"}
# A resumed run keeps the model, the random streams and the optimizer it was started with.
_FIXED_ON_RESUME = ("seed", "d_model", "num_heads", "num_layers", "dropout", "batch_size", "weight_decay",
                    "arch")


def flag(field: str) -> str:
    """The command-line flag of a TrainConfig field."""
    return _RENAMED.get(field, "--" + field.replace("_", "-"))


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    """Train as the flags say. Exit code 0 when done (or stopped by ``--stop-after``), 2 for a bad
    flag, folder or checkpoint, 1 when training diverged, ran out of memory or a file could not
    be written, 130 on Ctrl-C, 128 + the signal's number on SIGTERM or SIGHUP (handled as Ctrl-C:
    the last completed step is saved). (``train`` sets the process's malloc to keep freed memory
    for the next step's arrays: ``host_memory.keep_freed_memory``.)"""
    with termination_as_interrupt():
        try:
            return _run(args)
        except KeyboardInterrupt as stop:       # before the output folder was taken: nothing written
            print(f"{_stopped(stop)} before training started; nothing was written", file=sys.stderr)
            return _exit_code(stop)


def _stopped(stop: KeyboardInterrupt) -> str:
    return f"terminated by {stop}" if isinstance(stop, Terminated) else "interrupted"


def _exit_code(stop: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (SIGINT is 2), 128 + the signal's number for the others, as shells report."""
    return 128 + stop.signum if isinstance(stop, Terminated) else 130


def _on_disk(path: Path) -> str:
    """What checkpoint `path` holds now, read from the disk, for a message."""
    step = saved_step(path)
    return f"{path} holds step {step}" if step is not None else "nothing was saved"


def _run(args: argparse.Namespace) -> int:
    config = None
    try:
        _check_saving_flags(args)
        overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
                     if getattr(args, f.name) is not None}
        source = checkpoint_file(args.resume) if args.resume else None
        if source is not None:
            model, state, config, task = _continue_run(source, args.task, overrides)
            if isinstance(task, TextTask):
                task = train_text.continue_text(task, args, source)
        else:
            task = train_text.text_task(args) if args.task == TextTask.name else get_task(args.task)
            defaults = train_text.DEFAULTS if isinstance(task, TextTask) else {"steps": task.steps}
            config = TrainConfig(**_min_lr_at_most_lr({**defaults, **overrides}, TrainConfig.min_lr))
            xp_for(config.device)
        held_out = None if isinstance(task, TextTask) else task.held_out(config.eval_size)
        with _output_folder(args, task, source) as folder:
            try:
                if source is None:
                    model = make_model(task, config)
                    state = TrainState.fresh(model, config)
                say_threads()
                if isinstance(task, TextTask):
                    print(train_text.first_line(task), flush=True)
                return _train_and_report(args, task, config, model, state, held_out, folder)
            except KeyboardInterrupt as stop:   # one more while handling the first (saving, reporting)
                resume = f"; resume with: tinygrad-attn train {task.name} --resume {folder.path}" \
                    if saved_step(folder.checkpoint) is not None else ""
                print(f"{_stopped(stop)}; {_on_disk(folder.checkpoint)}{resume}", file=sys.stderr)
                return _exit_code(stop)
    except ConfigError as e:                    # a flag's value: named by its flag
        return _fail(f"{flag(e.field)} {e.problem}")
    except (CheckpointError, DeviceError, ValueError) as e:
        return _fail(str(e))
    except MemoryError as e:
        size = f" (d_model={config.d_model}, {config.num_layers} layers)" if config else ""
        return _fail(f"the model{size} does not fit in memory ({e or 'MemoryError'})")


def _min_lr_at_most_lr(overrides: dict[str, object], min_lr: float) -> dict[str, object]:
    """An --lr below the min_lr in force (the default, or the resumed run's) lowers min_lr to it,
    unless --min-lr was given too (then TrainConfig refuses a min_lr above lr)."""
    if "lr" in overrides and "min_lr" not in overrides and overrides["lr"] < min_lr:
        return {**overrides, "min_lr": overrides["lr"]}
    return overrides


def _check_saving_flags(args: argparse.Namespace) -> None:
    if args.stop_after is not None and args.stop_after < 1:
        raise ValueError(f"--stop-after must be at least 1, got {args.stop_after}")
    if args.save_every < 0:
        raise ValueError(f"--save-every must be 0 (only at the end) or more, got {args.save_every}")
    if args.out is not None and not args.out.strip():
        raise ValueError("--out is empty: name a folder, or leave --out out to write to runs/TASK")
    if args.task != TextTask.name:
        given = [train_text.flag(name) for name in train_text.TEXT_FLAGS if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for `train text` "
                             f"only, not the toy task {args.task}")


def _continue_run(source: Path, task_name: str, overrides: dict[str, object]
                  ) -> tuple[TinyTransformer, TrainState, TrainConfig, Task]:
    """The run saved in `source` with the flags given applied, and its task; ValueError for a
    flag that may not change or for a run of another task."""
    model, state, config, task = load_run(source, overrides.get("device"))
    if task.name != task_name:
        raise ValueError(f"{source} is a {task.name!r} checkpoint, not {task_name!r}")
    changed = [f for f in _FIXED_ON_RESUME if f in overrides and overrides[f] != getattr(config, f)]
    if changed:
        raise ValueError(f"cannot change {', '.join(changed)} when resuming (the checkpoint has "
                         + ", ".join(f"{f}={getattr(config, f)}" for f in changed) + ")")
    config = dataclasses.replace(config, **_min_lr_at_most_lr(overrides, config.min_lr))
    if "steps" in overrides and config.steps <= state.step:
        raise ValueError(f"{source} has done {state.step} steps already, so --steps {config.steps} "
                         f"leaves none to do; pass --steps above {state.step} to train further")
    return model, state, config, task


def _output_folder(args: argparse.Namespace, task: Task, source: Path | None) -> RunFolder:
    """``--out``, else the resumed run's own folder, else runs/TASK (making runs/ if needed)."""
    if args.out is not None:
        return RunFolder(args.out, overwrite=args.overwrite, continues=source)
    if source is not None:
        return RunFolder(source.parent, overwrite=args.overwrite, continues=source)
    return RunFolder(Path("runs", task.name), overwrite=args.overwrite, make_parent=True)


def _train_and_report(args: argparse.Namespace, task: Task, config: TrainConfig, model: TinyTransformer,
                      state: TrainState, held_out: list[list[int]] | None, folder: RunFolder) -> int:
    """Train with a progress bar and checkpoints (a text run: with the validation loss and a
    sample every --eval-every steps); evaluate when all steps are done."""
    resume_hint = f"tinygrad-attn train {task.name} --resume {folder.path}"
    evaluations = None
    if isinstance(task, TextTask):
        evaluations = train_text.Evaluations(model, task, config, state, _progress_write)
    resumed_from = state.step
    if resumed_from:
        print(f"resuming {folder.continues} at step {resumed_from} of {config.steps}: training steps "
              f"{resumed_from + 1} to {config.steps}", flush=True)
    start = time.perf_counter()
    code = _train_saving(args, task, config, model, state, folder, resume_hint, evaluations)
    if code is not None:
        return code
    seconds = time.perf_counter() - start
    if state.step < config.steps:
        print(f"stopped at step {state.step} of {config.steps}; resume with: {resume_hint}")
        return 0
    try:
        if evaluations is not None:
            train_text.report(task, config, model, state, folder.path, seconds, evaluations, resumed_from)
        else:
            _evaluate(task, config, model, state, held_out, folder.path, seconds, resumed_from)
    except KeyboardInterrupt as stop:
        print(f"{_stopped(stop)} during evaluation; {_kept(folder.checkpoint)}; evaluate it with: "
              f"{resume_hint}", file=sys.stderr)
        return _exit_code(stop)
    except SaveError as e:
        return _fail(f"{e}; {_kept(folder.checkpoint)}; evaluate it again with: {resume_hint}", code=1)
    except MemoryError as e:
        fewer = max(1, config.eval_size // 4)
        what = "validation windows" if isinstance(task, TextTask) else "held-out prompts"
        return _fail(f"out of memory while evaluating on {config.eval_size} {what} "
                     f"({e or 'MemoryError'}); {_kept(folder.checkpoint)}; evaluate it with fewer: "
                     f"{resume_hint} "
                     f"--eval-size {fewer}",
                     code=1)
    return 0


def _kept(path: Path) -> str:
    """The trained model's checkpoint as the disk has it, for a message after training."""
    step = saved_step(path)
    return f"the trained model (step {step}) is saved in {path}" if step is not None else _on_disk(path)


# A state is kept as a checkpoint once the step after it trained from it sanely: a finite loss
# and gradient norm, the loss below this many times that of guessing uniformly (ln 15 ≈ 2.7).
_SANE_LOSS = 10 * math.log(len(VOCAB))


class _Checkpoints:
    """The run's checkpoint file: written every ``--save-every`` steps, at the end and on Ctrl-C.

    A periodic save keeps the state in memory and writes it once the next step, trained from its
    weights, had a sane loss: so after a diverged run the file holds the last state that trained,
    never the weights that gave the first NaN (resuming from those gives the NaN again, whatever
    the learning rate).
    """

    def __init__(self, path: Path, model: TinyTransformer, state: TrainState, config: TrainConfig,
                 task: Task, save_every: int):
        self.path, self.model, self.state, self.config, self.task = path, model, state, config, task
        self.save_every = save_every
        self.pending: tuple[int, dict, dict] | None = None

    def after_step(self, step: int) -> None:
        if self.pending is not None:
            kept_step, arrays, meta = self.pending
            self.pending = None
            if kept_step == step - 1 and self.state.history.loss[-1] <= _SANE_LOSS:
                checkpoint.save(self.path, arrays, meta)
        if self.save_every and step % self.save_every == 0 and _is_finite(self.model):
            self.pending = (step, *run_contents(self.model, self.state, self.config, self.task))

    def save_now(self) -> None:
        """Write the current state (at the end, or when interrupted between steps)."""
        self.pending = None
        checkpoint.save(self.path, *run_contents(self.model, self.state, self.config, self.task))

    @property
    def saved_step(self) -> int | None:
        """The step the file holds, read from the disk (None: no checkpoint there)."""
        return saved_step(self.path)

    def kept(self) -> str:
        """What the file holds, for a message."""
        return _on_disk(self.path)


def _progress_write(line: str) -> None:
    """Print a line above the progress bar."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stdout)


def _train_saving(args: argparse.Namespace, task: Task, config: TrainConfig, model: TinyTransformer,
                  state: TrainState, folder: RunFolder, resume_hint: str,
                  after_step: Callable[[int], None] | None = None) -> int | None:
    """Train from `state`, saving to the folder's checkpoint every ``--save-every`` steps, at the
    end and on Ctrl-C; `after_step(step)` runs after each step, before its checkpoint is taken.

    Returns None once training stopped normally (saved), else the exit code of an interrupted or
    diverged run, or one whose checkpoint could not be written, having said why on stderr.
    """
    from tqdm import tqdm

    saves = _Checkpoints(folder.checkpoint, model, state, config, task, args.save_every)
    bar = tqdm(total=config.steps, initial=state.step, desc=f"train {task.name}", unit="step",
               file=sys.stderr, mininterval=0.5)

    def on_step(step: int, history: History) -> None:
        bar.update(1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(history.loss[-50:]):.4f}")
        if after_step is not None:
            after_step(step)
        saves.after_step(step)

    try:
        try:
            with bar:
                train(model, task, config, on_step=on_step, state=state, stop_after=args.stop_after)
        except InterruptedMidStep:
            print(f"interrupted twice: stopped inside step {state.step + 1} without saving; {saves.kept()}",
                  file=sys.stderr)
            return 130
        except KeyboardInterrupt as stop:
            try:
                saves.save_now()
            except SaveError as e:
                print(f"{_stopped(stop)} after step {state.step}; could not save it: {e}; {saves.kept()}",
                      file=sys.stderr)
                return _exit_code(stop)
            saved = "saved it" if saves.saved_step == state.step else saves.kept()
            print(f"{_stopped(stop)} after step {state.step}; {saved}; resume with: {resume_hint}",
                  file=sys.stderr)
            return _exit_code(stop)
        except DivergedError as e:
            return _fail(f"{e}. {_after_divergence(saves, task, config, folder, resume_hint)}", code=1)
        except StepOutOfMemory as e:
            saves.save_now()        # the step changed nothing: the state is the last completed step's
            return _fail(f"{e}: a batch of {config.batch_size} sequences with d_model={config.d_model} and "
                         f"{config.num_layers} layers needs more memory than is free; {saves.kept()} "
                         f"(resume it where more memory is free: {resume_hint}, or start afresh with a "
                         f"smaller --batch-size)", code=1)
        saves.save_now()
    except SaveError as e:
        return _fail(f"{e}; {saves.kept()}" + (f"; resume with: {resume_hint}" if saves.saved_step else ""),
                     code=1)
    return None


def _after_divergence(saves: _Checkpoints, task: Task, config: TrainConfig, folder: RunFolder,
                      resume_hint: str) -> str:
    """What a diverged run kept, and the run to try next with a lower learning rate."""
    lower = min(config.lr / 10, TrainConfig.lr)
    saved = saves.saved_step
    if saved is not None and saved < saves.state.step:
        return (f"{saves.path} holds step {saved}, the last state that trained sanely; "
                f"resume from it with a lower learning rate, e.g. {resume_hint} --lr {lower:g}")
    if saved is not None:
        what = (f"{saves.path} holds step {saved}, whose weights gave that loss, so resuming "
                "cannot help")
    else:
        what = "no state of this run trained sanely, so none was kept"
    again = f"tinygrad-attn train {task.name} --out {folder.path} --lr {lower:g}" + \
        (" --overwrite" if saved is not None else "")
    return f"{what}; start afresh with a lower learning rate, e.g. {again}"


def _is_finite(model: TinyTransformer) -> bool:
    return all(bool(np.isfinite(p.numpy()).all()) for p in model.parameters())


def _evaluate(task: Task, config: TrainConfig, model: TinyTransformer, state: TrainState,
              held_out: list[list[int]], out: Path, seconds: float, resumed_from: int) -> None:
    """Held-out accuracy, metrics.json, the loss curve and the attention grid, each file written
    whole or not at all (SaveError); `seconds` trained steps `resumed_from` + 1 on."""
    acc = accuracy(model, task, held_out)
    losses = state.history.loss
    metrics = {"task": task.name, "steps": state.step, "train_seconds": round(seconds, 2),
               "resumed_from_step": resumed_from,
               "held_out_exact_match": acc, "held_out_size": len(held_out),
               "final_loss": float(np.mean(losses[-50:])), "config": dataclasses.asdict(config),
               **dataclasses.asdict(state.history)}
    write_atomically(out / "metrics.json", json.dumps(metrics, indent=1).encode())
    plots.loss_curve(losses, out / "loss.png", f"{task.name}: training loss")
    shown = max(held_out, key=len)
    example = shown + task.solve(shown)       # the model reads all but the last token
    maps = [m.numpy()[0] for m in model.attention_maps(np.array([example[:-1]]))]
    gloss = task.gloss(shown, task.solve(shown))            # add: "92 + 214 = 306"
    plots.attention_grid(maps, decode(example[:-1]).split(), out / "attention.png",
                         f"{task.name}: attention (rows: queries, columns: keys) on held-out "
                         f"'{decode(shown)}'" + (f" ({gloss})" if gloss else ""))
    print(f"{task.name}: held-out exact-match accuracy {acc:.2%} on {len(held_out)} sequences "
          f"after {state.step} steps ({train_text.trained_for(seconds, resumed_from, state.step)}); "
          f"wrote {out}/")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = "\n".join(
        f"  {t.name:8s} {t.summary};\n"
        f"           prompt ≤ {t.max_prompt} tokens, answer ≤ {t.max_answer} (with its '.'), "
        f"e.g. {t.example}" for t in TASKS.values())
    parser = subparsers.add_parser(
        "train", help="train a tiny transformer on a toy task",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"tasks (vocabulary of {len(VOCAB)} tokens: digits 0-9, '+', '=', '|' ends a list, "
               f"'.' ends an answer, '_' pads):\n{tasks}\n\n"
               "The loss counts only answer tokens. Exact-match accuracy is measured by greedy "
               "decoding (token by token)\non held-out prompts: a fixed 5% of all prompts that "
               "training never sees.")
    parser.add_argument("task", choices=sorted([*TASKS, TextTask.name]),
                        help="a toy task, or text: a language model on a text file")
    defaults = {field.name: str(field.default) for field in dataclasses.fields(TrainConfig)}
    defaults["steps"] = "the task's: " + ", ".join(f"{t.name} {t.steps}" for t in TASKS.values())
    for field in dataclasses.fields(TrainConfig):     # None: not given, the default applies
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
                             + ", ".join(flag(f) for f in _FIXED_ON_RESUME) + " may change")
    parser.add_argument("--save-every", type=int, default=500, metavar="N",
                        help="write the checkpoint every N steps, once the step after it trained sanely "
                             "(so a diverged run keeps weights that can train; default 500; 0: only at "
                             "the end)")
    parser.add_argument("--stop-after", type=int, metavar="N",
                        help="stop after N (≥ 1) steps of this run and save (continue later with --resume)")
    add_threads_option(parser, "train text", lambda args: args.task == TextTask.name)
    train_text.add_arguments(parser, flag)
    parser.set_defaults(run=run)
