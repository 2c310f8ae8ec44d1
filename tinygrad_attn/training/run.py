"""``Run``: one training run, from its start (or its checkpoint) to its report.

A run holds the model, its optimizer state and history (``TrainState``), its config and its task,
and keeps the rules every run keeps, whatever its task (``Task``):

- checkpoints: every ``save_every`` steps, but only once the step after it trained sanely (a
  finite loss at most the task's ``sane_loss``): after a diverged run the file holds the last
  state that trained, never the weights that gave the first NaN (resuming from those gives the NaN
  again, whatever the learning rate); and at the end, and when stopped by Ctrl-C (SIGTERM, SIGHUP)
  or by a step that ran out of memory, whose state is that of the last completed step. A second
  Ctrl-C inside a step stops it half-way, and nothing is saved;
- resume: a saved run goes on exactly where it stopped (``Run.load`` then ``resumed``), with
  the settings that may change changed and the others refused;
- evaluation: the task's measure of the trained model, metrics.json, loss.png and attention.png.

Nothing here prints or parses: the ``train`` command reports, and a script does what it does:

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> run = Run.start("copy", TrainConfig(steps=4, d_model=16, num_heads=2, num_layers=1, eval_size=8))
    >>> run.train(f"{folder}/checkpoint.npz", save_every=2, stop_after=2)
    >>> run = Run.load(folder).resumed({})
    >>> run.train(f"{folder}/checkpoint.npz")
    >>> run.evaluate(folder)[0].startswith("copy: held-out exact-match")
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import xp_for
from ..errors import SaveError
from ..files import write_atomically
from ..nn import TinyTransformer
from . import checkpoint
from .config import TrainConfig
from .interrupts import InterruptedMidStep
from .loop import History, StepOutOfMemory, TrainState, make_model, train
from .run_folder import RunFolder
from .saved_run import read_run, run_contents
from .task import Task
from .tasks import get_task

__all__ = ["FIXED_ON_RESUME", "Run", "trained_for"]

# A resumed run keeps the model, the random streams and the optimizer it was started with.
FIXED_ON_RESUME = ("seed", "d_model", "num_heads", "num_layers", "dropout", "batch_size", "weight_decay",
                   "arch")


class Run:
    """A training run: `model`, `state` (optimizer, step, history, data stream), `config`, `task`;
    `source`, the checkpoint it was read from (None for a fresh run); `resumed_from`, the step it
    was made at (0 for a fresh run); `seconds`, the time ``train`` has taken in this process, for the
    report. Make one with ``start`` or ``load``."""

    def __init__(self, model: TinyTransformer, state: TrainState, config: TrainConfig, task: Task,
                 source: Path | None = None):
        self.model, self.state, self.config, self.task, self.source = model, state, config, task, source
        self.resumed_from, self.seconds = state.step, 0.0
        self._held_out: Any = None

    @classmethod
    def start(cls, task: str | Task, config: TrainConfig) -> Run:
        """A fresh run of `task` (a Task, or a toy task's name) with `config` (its model made for the
        task when it has none: ``TrainConfig.for_task`` gives the task's defaults too). The
        held-out set and the model are made at once, so an impossible ``eval_size``, device or
        model size is refused before anything is written."""
        task = get_task(task)
        if config.model is None:
            config = config.with_model_for(task)
        xp_for(config.device)
        model = make_model(task, config)
        run = cls(model, TrainState.fresh(model, config), config, task)
        run.held_out()
        return run

    @classmethod
    def load(cls, path: str | os.PathLike, device: str | None = None) -> Run:
        """The run saved in checkpoint `path` (or in the run folder `path`), on `device` (default:
        the one it was trained on); CheckpointError or DeviceError as ``saved_run.read_run``
        says. To train it further, see ``resumed``."""
        source, model, state, config, task = read_run(path, device)
        return cls(model, state, config, task, source)

    def resumed(self, changes: dict[str, Any], task: Task | None = None) -> Run:
        """This run made ready to train further, with the settings in `changes` changed, and, for a
        task whose checkpoint does not keep all of it (a text's text), `task`: that task whole
        again. ValueError for a setting that may not change (``FIXED_ON_RESUME``) or a number of
        steps that leaves none to do; the held-out set is made at once."""
        changed = [f for f in FIXED_ON_RESUME if f in changes and changes[f] != getattr(self.config, f)]
        if changed:
            raise ValueError(f"cannot change {', '.join(changed)} when resuming (the checkpoint has "
                             + ", ".join(f"{f}={getattr(self.config, f)}" for f in changed) + ")")
        config = self.config.changed(**changes)
        if "steps" in changes and config.steps <= self.state.step:
            raise ValueError(f"{self.source} has done {self.state.step} steps already, so --steps "
                             f"{config.steps} leaves none to do; pass --steps above {self.state.step} to "
                             f"train further")
        run = Run(self.model, self.state, config, task or self.task, self.source)
        run.held_out()
        return run

    def held_out(self) -> Any:
        """The task's held-out set of ``config.eval_size`` examples (made once)."""
        if self._held_out is None:
            self._held_out = self.task.held_out(self.config.eval_size)
        return self._held_out

    def folder(self, out: str | os.PathLike | None = None, overwrite: bool = False) -> RunFolder:
        """The folder the run writes to (a ``RunFolder``, to enter): `out`, else the folder of the
        checkpoint it was read from, else runs/TASK (making runs/ if needed). `overwrite`: replace
        another run found there instead of refusing it."""
        if out is not None:
            return RunFolder(out, overwrite=overwrite, continues=self.source)
        if self.source is not None:
            return RunFolder(self.source.parent, overwrite=overwrite, continues=self.source)
        return RunFolder(Path("runs", self.task.name), overwrite=overwrite, make_parent=True)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the run to checkpoint `path` atomically; SaveError (an earlier file unchanged) if
        it cannot be written."""
        return checkpoint.save(path, *run_contents(self.model, self.state, self.config, self.task))

    def train(self, path: str | os.PathLike, save_every: int = 0, stop_after: int | None = None,
              on_step: Callable[[int, History], object] | None = None,
              say: Callable[[str], object] = lambda line: None) -> None:
        """Train to ``config.steps`` (or `stop_after` more steps), saving to checkpoint `path`
        as the module's docstring says. `on_step(step, history)` runs after each step, then the
        task's ``after_step``, whose lines go to `say`.

        Raises (as ``loop.train``): DivergedError (the file keeps the last sane state, if any);
        StepOutOfMemory and KeyboardInterrupt, after saving the last completed step (a SaveError
        then, whose ``__cause__`` is the interrupt, if that save failed); InterruptedMidStep,
        without saving; SaveError.
        """
        saves, start = _Checkpoints(Path(path), self, save_every), time.perf_counter()

        def step_done(step: int, history: History) -> None:
            if on_step is not None:
                on_step(step, history)
            for line in self.task.after_step(self.model, self.config, history, step):
                say(line)
            saves.after_step(step)

        try:
            train(self.model, self.task, self.config, on_step=step_done, state=self.state,
                  stop_after=stop_after)
        except InterruptedMidStep:
            raise
        except (KeyboardInterrupt, StepOutOfMemory) as stop:
            try:
                saves.save_now()
            except SaveError as error:
                raise error from stop
            raise
        else:
            saves.save_now()
        finally:
            self.seconds += time.perf_counter() - start

    def evaluate(self, folder: str | os.PathLike) -> list[str]:
        """Measure the trained model on the held-out set and write metrics.json, loss.png and
        attention.png to `folder`, each whole or not at all (SaveError); the report's lines, which
        give the steps trained from `resumed_from` on and the `seconds` they took."""
        folder, history, step = Path(folder), self.state.history, self.state.step
        seconds, resumed_from = self.seconds, self.resumed_from
        evaluation = self.task.evaluate(self.model, self.config, history, self.held_out())
        final = float(np.mean(history.loss[-50:]))
        metrics = {"task": self.task.name, "steps": step, "train_seconds": round(seconds, 2),
                   "resumed_from_step": resumed_from, **evaluation.metrics, "final_loss": final,
                   "config": dataclasses.asdict(self.config), **dataclasses.asdict(history)}
        write_atomically(folder / "metrics.json", json.dumps(metrics, indent=1, ensure_ascii=False).encode())
        self.task.draw_figures(self.model, history, self.held_out(), folder)
        return [f"{self.task.name}: {evaluation.headline} after {step} steps "
                f"({trained_for(seconds, resumed_from, step)}{evaluation.aside}); wrote {folder}/",
                *evaluation.notes]


def trained_for(seconds: float, resumed_from: int, step: int) -> str:
    """'312.4 s of training', or for a resumed run '312.4 s of training, steps 2001-4000: resumed at
    step 2000' (the time before the resume is not counted: it was spent in another process)."""
    if not resumed_from:
        return f"{seconds:.1f} s of training"
    return f"{seconds:.1f} s of training, steps {resumed_from + 1}-{step}: resumed at step {resumed_from}"


class _Checkpoints:
    """A run's checkpoint file as training goes: a periodic save keeps the state in memory and
    writes it once the next step, trained from its weights, had a sane loss."""

    def __init__(self, path: Path, run: Run, save_every: int):
        self.path, self.run, self.save_every = path, run, save_every
        self.pending: tuple[int, dict, dict] | None = None

    def after_step(self, step: int) -> None:
        run = self.run
        if self.pending is not None:
            kept_step, arrays, meta = self.pending
            self.pending = None
            if kept_step == step - 1 and run.state.history.loss[-1] <= run.task.sane_loss:
                checkpoint.save(self.path, arrays, meta)
        if self.save_every and step % self.save_every == 0 and _is_finite(run.model):
            self.pending = (step, *run_contents(run.model, run.state, run.config, run.task))

    def save_now(self) -> None:
        """Write the current state (at the end, or when stopped between steps)."""
        self.pending = None
        self.run.save(self.path)


def _is_finite(model: TinyTransformer) -> bool:
    return all(bool(np.isfinite(p.numpy()).all()) for p in model.parameters())
