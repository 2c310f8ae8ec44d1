"""``tinygrad-attn train TASK``: train a TinyTransformer on a toy task (or a text) and report what it learned.

Writes to the output folder: checkpoint.npz (weights, optimizer state, step, losses, config and
the random generators' states), metrics.json, loss.png and attention.png (a layer × head grid of
attention heatmaps for one held-out example).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..errors import CheckpointError, DeviceError, SaveError
from ..training import DivergedError, History, InterruptedMidStep, Run, StepOutOfMemory, TrainConfig
from ..training.config import ConfigError
from ..training.interrupts import Terminated, termination_as_interrupt
from ..training.run_folder import RunFolder
from ..training.saved_run import saved_step
from ..training.task_options import task_again, task_for
from .thread_count import add_threads_option, say_threads
from .train_flags import EPILOG, add_arguments, check, flag

__all__ = ["add_parser", "run"]


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
            return _stopped(stop, " before training started; nothing was written")


def _stopped(stop: KeyboardInterrupt, then: str) -> int:
    """Say on stderr that Ctrl-C (or a signal) stopped the run, and `then` what it left; the exit
    code: 130 for Ctrl-C (SIGINT is 2), 128 + the signal's number for the others, as shells report."""
    if isinstance(stop, Terminated):
        print(f"terminated by {stop}{then}", file=sys.stderr)
        return 128 + stop.signum
    print(f"interrupted{then}", file=sys.stderr)
    return 130


def _on_disk(path: Path) -> str:
    """What checkpoint `path` holds now, read from the disk, for a message."""
    step = saved_step(path)
    return f"{path} holds step {step}" if step is not None else "nothing was saved"


def _kept(path: Path) -> str:
    """The trained model's checkpoint as the disk has it, for a message after training."""
    step = saved_step(path)
    return f"the trained model (step {step}) is saved in {path}" if step is not None else _on_disk(path)


def _run(args: argparse.Namespace) -> int:
    config = None
    try:
        settings, options = check(args)
        if args.resume:
            saved = Run.load(args.resume, settings.get("device"))
            config = saved.config
            training = saved.resumed(settings, task_again(saved.task, args.task, options, saved.source))
        else:
            task = task_for(args.task, options)
            config = TrainConfig.for_task(task, **settings)
            training = Run.start(task, config)
        if training.task.introduction:
            print(training.task.introduction, flush=True)
        with training.folder(args.out, args.overwrite) as folder:
            hint = f"tinygrad-attn train {args.task} --resume {folder.path}"
            try:
                say_threads()
                return _train_and_report(args, training, folder, hint)
            except KeyboardInterrupt as stop:   # one more while handling the first (saving, reporting)
                resume = f"; resume with: {hint}" if saved_step(folder.checkpoint) is not None else ""
                return _stopped(stop, f"; {_on_disk(folder.checkpoint)}{resume}")
    except ConfigError as e:                    # a flag's value: named by its flag
        return _fail(f"{flag(e.field)} {e.problem}")
    except (CheckpointError, DeviceError, ValueError) as e:
        return _fail(str(e))
    except MemoryError as e:
        size = f" (d_model={config.d_model}, {config.num_layers} layers)" if config else ""
        return _fail(f"the model{size} does not fit in memory ({e or 'MemoryError'})")


def _train_and_report(args: argparse.Namespace, training: Run, folder: RunFolder, hint: str) -> int:
    """Train with a progress bar and checkpoints; evaluate when all steps are done."""
    config, resumed_from = training.config, training.resumed_from
    if resumed_from:
        print(f"resuming {folder.continues} at step {resumed_from} of {config.steps}: training steps "
              f"{resumed_from + 1} to {config.steps}", flush=True)
    code = _train(args, training, folder, hint)
    if code is not None:
        return code
    if training.state.step < config.steps:
        print(f"stopped at step {training.state.step} of {config.steps}; resume with: {hint}")
        return 0
    try:
        for line in training.evaluate(folder.path):
            print(line)
    except KeyboardInterrupt as stop:
        return _stopped(stop, f" during evaluation; {_kept(folder.checkpoint)}; evaluate it with: {hint}")
    except SaveError as e:
        return _fail(f"{e}; {_kept(folder.checkpoint)}; evaluate it again with: {hint}", code=1)
    except MemoryError as e:
        return _fail(f"out of memory while evaluating on {config.eval_size} {training.task.held_out_name} "
                     f"({e or 'MemoryError'}); {_kept(folder.checkpoint)}; evaluate it with fewer: {hint} "
                     f"--eval-size {max(1, config.eval_size // 4)}", code=1)
    return 0


def _train(args: argparse.Namespace, training: Run, folder: RunFolder, hint: str) -> int | None:
    """Train, saving as the run does; None once it stopped normally, else the exit code of an
    interrupted or diverged run, or one whose checkpoint could not be written, said on stderr."""
    from tqdm import tqdm

    config, state, path = training.config, training.state, folder.checkpoint
    bar = tqdm(total=config.steps, initial=state.step, desc=f"train {training.task.name}", unit="step",
               file=sys.stderr, mininterval=0.5)

    def on_step(step: int, history: History) -> None:
        bar.update(1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(history.loss[-50:]):.4f}")

    try:
        with bar:
            training.train(path, args.save_every, args.stop_after, on_step,
                           lambda line: tqdm.write(line, file=sys.stdout))
    except InterruptedMidStep:
        print(f"interrupted twice: stopped inside step {state.step + 1} without saving; {_on_disk(path)}",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt as stop:
        if stop.__context__ is not None:        # one more while the run saved after the first: see _run
            raise
        saved = "saved it" if saved_step(path) == state.step else _on_disk(path)
        return _stopped(stop, f" after step {state.step}; {saved}; resume with: {hint}")
    except DivergedError as e:
        return _fail(f"{e}. {_after_divergence(training, folder, hint)}", code=1)
    except StepOutOfMemory as e:
        return _fail(f"{e}: a batch of {config.batch_size} sequences with d_model={config.d_model} and "
                     f"{config.num_layers} layers needs more memory than is free; {_on_disk(path)} (resume "
                     f"it where more memory is free: {hint}, or start afresh with a smaller --batch-size)",
                     code=1)
    except SaveError as e:
        if isinstance(e.__cause__, KeyboardInterrupt):      # stopped, then that step could not be saved
            return _stopped(e.__cause__,
                            f" after step {state.step}; could not save it: {e}; {_on_disk(path)}")
        resume = f"; resume with: {hint}" if saved_step(path) else ""
        return _fail(f"{e}; {_on_disk(path)}{resume}", code=1)
    return None


def _after_divergence(training: Run, folder: RunFolder, hint: str) -> str:
    """What a diverged run kept, and the run to try next with a lower learning rate."""
    lower = min(training.config.lr / 10, TrainConfig.lr)
    saved = saved_step(folder.checkpoint)
    if saved is not None and saved < training.state.step:
        return (f"{folder.checkpoint} holds step {saved}, the last state that trained sanely; "
                f"resume from it with a lower learning rate, e.g. {hint} --lr {lower:g}")
    if saved is not None:
        what = f"{folder.checkpoint} holds step {saved}, whose weights gave that loss, so resuming cannot " \
               "help"
    else:
        what = "no state of this run trained sanely, so none was kept"
    again = f"tinygrad-attn train {training.task.name} --out {folder.path} --lr {lower:g}" + \
        (" --overwrite" if saved is not None else "")
    return f"{what}; start afresh with a lower learning rate, e.g. {again}"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train a tiny transformer on a toy task (or a text)",
                                   description=__doc__, epilog=EPILOG,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_threads_option(parser, "train text", lambda args: args.task == "text")
    parser.set_defaults(run=run)
