"""``Task``: what a training run needs of its task. The toy tasks (``tasks.ToyTask``) and the text
task (``text_task.TextTask``) both implement it, so the run (``run.Run``) never asks which kind of
task it has: each says what its defaults are, what it holds out, how a trained model is measured
and shown, and what a sane loss is.

A task used by a run implements every member below; those with a body here (``sane_loss``,
``after_step``, ``introduction``) are shared by inheriting from ``Task``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..nn import TinyTransformer
    from .config import TrainConfig
    from .loop import History
    from .sample_options import SampleOptions

__all__ = ["Evaluation", "Task"]


@dataclass
class Evaluation:
    """What measuring a trained model found: `metrics` for metrics.json, `headline` for the
    report's first line ("held-out exact-match accuracy 98.50% on 200 sequences"), `aside` for
    its parentheses, after the time trained ("; training loss 1.2345"), `notes` for the lines
    after it."""

    metrics: dict[str, Any]
    headline: str
    aside: str = ""
    notes: list[str] = field(default_factory=list)


class Task(Protocol):
    """A task a model is trained on.

    Attributes:
        name: its name on the command line and in checkpoints.
        defaults: the TrainConfig settings where this task's differ from TrainConfig's own
            defaults (``TrainConfig.for_task`` applies them).
        held_out_name: what its held-out set is, in words ("held-out prompts").
    """

    name: str
    defaults: Mapping[str, Any]
    held_out_name: str

    @property
    def vocab_size(self) -> int:
        """Token ids the model needs."""
        ...

    @property
    def max_len(self) -> int:
        """The longest sequence the model reads."""
        ...

    @property
    def introduction(self) -> str:
        """What a run trains on, said before anything else ("" when the name says it all)."""
        return ""

    @property
    def sane_loss(self) -> float:
        """The largest loss of a step after which the state it trained from is still kept as a
        checkpoint: ten times the loss of guessing uniformly among the task's tokens (a finite
        loss above it means the weights blew up, and resuming from them diverges again)."""
        return 10 * math.log(self.vocab_size)

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, targets), both (size, length): a training batch drawn with `rng`, never held out."""
        ...

    def held_out(self, size: int) -> Any:
        """`size` held-out examples, the same every time (ValueError when there are not that many)."""
        ...

    def after_step(self, model: TinyTransformer, config: TrainConfig, history: History,
                   step: int) -> list[str]:
        """Whatever the task measures while training, after `step`, recorded in `history` (so a
        checkpoint keeps it); the lines to show. It must draw nothing from the run's random
        streams, so that a run with it gives the same losses as one without."""
        return []

    def evaluate(self, model: TinyTransformer, config: TrainConfig, history: History,
                 held_out: Any) -> Evaluation:
        """The trained model measured on `held_out` (from ``held_out(config.eval_size)``)."""
        ...

    def draw_figures(self, model: TinyTransformer, history: History, held_out: Any, folder: Path) -> None:
        """loss.png and attention.png in `folder`, each written whole or not at all (SaveError)."""
        ...

    def reply(self, model: TinyTransformer, prompt: str, options: SampleOptions,
              write: Callable[[str], None]) -> None:
        """What `model` writes for `prompt`, a person's text, handed to `write` piece by piece as
        it is made: one text whose last line the caller ends (as print does). ValueError for a bad
        prompt or option, before any piece (and a ``SamplingNote`` warning for an option that
        does something other than it seems)."""
        ...

    def to_meta(self) -> dict[str, Any]:
        """What a checkpoint keeps of the task, as JSON: its name, and what ``from_meta`` needs."""
        ...

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Task:
        """The task `to_meta` described."""
        ...
