"""A training run saved to one checkpoint and read back: weights, optimizer, history, config, task
and the random state, so that a run continued from it goes on exactly where it stopped."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..backend import xp_for
from ..errors import CheckpointError
from ..nn import TinyTransformer
from . import checkpoint
from .config import TrainConfig, config_from_dict
from .loop import History, TrainState, make_model
from .random_state import restore_rng_states, rng_states
from .tasks import Task, get_task

__all__ = ["Run", "load_run", "save_run"]


class Run(NamedTuple):
    """A training run read back from a checkpoint."""

    model: TinyTransformer
    state: TrainState
    config: TrainConfig
    task: Task


def save_run(path: str | os.PathLike, model: TinyTransformer, state: TrainState,
             config: TrainConfig, task: Task) -> Path:
    """Write a run to one checkpoint, atomically: the weights, the optimizer's buffers and the
    history as arrays; the task, the config, the step and the generators' states as metadata."""
    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    arrays.update({f"optim/{k}": v for k, v in state.optimizer.state_dict().items()})
    arrays.update({f"history/{k}": np.array(v, dtype=np.float64)
                   for k, v in dataclasses.asdict(state.history).items()})
    meta = {"task": task.name, "config": dataclasses.asdict(config), "step": state.step,
            "rng": rng_states(state)}
    return checkpoint.save(path, arrays, meta)


def load_run(path: str | os.PathLike, device: str | None = None) -> Run:
    """The run `save_run` wrote, rebuilt on `device` (default: the device it was trained on).

    Raises:
        CheckpointError: the file is missing, truncated, not a checkpoint, or its arrays do not
            fit the model and optimizer its config describes.
        DeviceError: `device` (or the saved one) is unknown or unusable (CuPy or a GPU missing).
    """
    if device is not None:
        xp_for(device)
    arrays, meta = checkpoint.load(path)
    part = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    try:
        task = get_task(meta["task"])
        config = config_from_dict(meta["config"])
        if device is not None:
            config = dataclasses.replace(config, device=device)
        model = make_model(task, config)
        model.load_state_dict(part("model/"))
        state = TrainState.fresh(model, config)
        state.optimizer.load_state_dict(part("optim/"))
        state.step = int(meta["step"])
        state.history = History(**{k: v.tolist() for k, v in part("history/").items()})
        restore_rng_states(state, meta["rng"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: a tinygrad_attn checkpoint that does not fit its own "
                              f"model or run ({type(e).__name__}: {e})") from None
    return Run(model, state, config, task)
