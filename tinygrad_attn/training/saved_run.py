"""What a training run's checkpoint holds, and the run read back from it: the weights, the
optimizer's state and the history as arrays; the task, the config (with the model's
``TransformerConfig``, which the model is built from), the step and the random state as metadata,
so that a run continued from it goes on exactly where it stopped (``run.Run`` saves and loads
through these)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import to_numpy, xp_for
from ..engine import no_grad
from ..errors import CheckpointError, DeviceError
from ..nn import TinyTransformer
from ..tensor import Tensor
from . import checkpoint
from .config import TrainConfig, config_from_dict
from .loop import History, TrainState
from .random_state import restore_rng_states, rng_states
from .run_folder import CHECKPOINT
from .task import Task
from .tasks import TASKS
from .text_task import TextTask

__all__ = ["TASK_KINDS", "checkpoint_file", "read_run", "run_contents", "saved_step"]

_PROBE = "probe/logits"             # the model's logits on a fixed input when saved (see _probe_logits)

# Every kind of task a checkpoint may hold, by the name it saves; each rebuilds itself from what
# the checkpoint kept of it (Task.from_meta).
TASK_KINDS: dict[str, type[Task]] = {**{name: type(task) for name, task in TASKS.items()},
                                     TextTask.name: TextTask}


def run_contents(model: TinyTransformer, state: TrainState, config: TrainConfig,
                 task: Task) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) of a run's checkpoint: copies, so they keep this step's state while training
    goes on (``checkpoint.save`` writes them)."""
    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    arrays.update({f"optim/{k}": v for k, v in state.optimizer.state_dict().items()})
    arrays.update({f"history/{k}": np.array(v, dtype=np.float64)
                   for k, v in dataclasses.asdict(state.history).items()})
    arrays[_PROBE] = _probe_logits(model, config.device)
    meta = {"task": task.to_meta(), "config": dataclasses.asdict(config), "step": state.step,
            "rng": rng_states(state)}
    return arrays, meta


def read_run(path: str | os.PathLike, device: str | None = None
             ) -> tuple[Path, TinyTransformer, TrainState, TrainConfig, Task]:
    """The checkpoint file `path` names (itself, or the run folder's), and the model, state,
    config and task it holds, on `device` (default: the device it was trained on).

    Raises:
        CheckpointError: the file is missing, truncated, not a checkpoint or of another version's
            layout, its task is unknown, its config does not describe its model, its arrays do
            not fit that model and its optimizer, the model with those weights does not give the
            logits saved with them (a config edited after saving: ``num_heads`` changes no
            weight's shape), it lacks part of the optimizer's state, or its generators' states
            cannot be restored.
        DeviceError: `device` (or the saved one) is unknown or unusable (CuPy or a GPU missing;
            the message says to load it with device "cpu").
    """
    if device is not None:
        xp_for(device)
    path = checkpoint_file(path)
    arrays, meta = checkpoint.load(path)
    part = lambda prefix: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    try:
        kind = TASK_KINDS.get(meta["task"]["name"])
        if kind is None:
            raise CheckpointError(f"{path}: a run of the task {meta['task']['name']!r}, which this version "
                                  f"of tinygrad_attn does not know (it knows {', '.join(TASK_KINDS)})")
        task = kind.from_meta(meta["task"])
        config = config_from_dict(meta["config"])
        if config.model is None:
            raise ValueError("its config holds no model")
        if device is not None:
            config = dataclasses.replace(config, device=device)
        else:
            _check_saved_device(path, config.device)
        model = TinyTransformer(config.model).to(config.device)
        model.load_state_dict(part("model/"))
        _check_config_rebuilds_model(path, model, config, arrays[_PROBE])
        state = TrainState.fresh(model, config)
        state.step = int(meta["step"])
        _check_optimizer_state(state, part("optim/"))
        state.optimizer.load_state_dict(part("optim/"))
        state.history = History(**{k: v.tolist() for k, v in part("history/").items()})
        state.history.val_step = [int(step) for step in state.history.val_step]
        restore_rng_states(state, meta["rng"])
    except CheckpointError:
        raise                               # already says what does not fit
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"{path}: a tinygrad_attn checkpoint that does not fit its own "
                              f"model or run ({type(e).__name__}: {e})") from None
    return path, model, state, config, task


def checkpoint_file(path: str | os.PathLike) -> Path:
    """The checkpoint file `path` names: itself, or the run folder's ``checkpoint.npz``."""
    path = Path(path)
    if path.is_dir():
        if not (path / CHECKPOINT).is_file():
            raise CheckpointError(f"{path} is a folder without a {CHECKPOINT}: name a checkpoint file, "
                                  f"or the folder of a run that saved one")
        return path / CHECKPOINT
    return path


def saved_step(path: str | os.PathLike) -> int | None:
    """The step of the run saved in checkpoint `path` as it is on disk now; None when there is
    no readable checkpoint there."""
    try:
        step = checkpoint.load(path)[1]["step"]
    except (CheckpointError, KeyError):
        return None
    return step if isinstance(step, int) else None


def _probe_logits(model: TinyTransformer, device: str) -> np.ndarray:
    """The model's logits, in evaluation mode, for one fixed sequence of every position (token
    ids 0, 1, 2, … wrapping around the vocabulary): what its config and weights compute together."""
    ids = np.arange(model.max_len).reshape(1, -1) % model.vocab_size
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            return to_numpy(model(Tensor(ids, device=device)).data).astype(np.float64)
    finally:
        model.train(was_training)


def _check_config_rebuilds_model(path: Path, model: TinyTransformer, config: TrainConfig,
                                 saved: np.ndarray) -> None:
    """CheckpointError unless the model the config built, with the saved weights, computes the
    logits saved beside them."""
    got = _probe_logits(model, config.device)
    if got.shape == saved.shape and np.allclose(got, saved, rtol=1e-3, atol=1e-4):
        return
    gap = f"they differ by up to {np.max(np.abs(got - saved)):.3g}" if got.shape == saved.shape \
        else f"of shape {got.shape}, not {saved.shape}"
    raise CheckpointError(f"{path}: its config (d_model={config.d_model}, num_heads={config.num_heads}, "
                          f"num_layers={config.num_layers}, arch={config.arch!r}) does not rebuild the "
                          f"model it saved: with its weights that model gives other logits than it "
                          f"did when saved ({gap}); the config was edited or the file is damaged")


def _check_saved_device(path: str | os.PathLike, device: str) -> None:
    """DeviceError, with the way out, when the device a checkpoint was trained on is unusable here."""
    try:
        xp_for(device)
    except DeviceError as e:
        raise DeviceError(f"{path} was trained on {device}, which cannot be used here ({e}); load it "
                          f"on the CPU with --device cpu (device='cpu')") from None


def _check_optimizer_state(state: TrainState, saved: dict[str, np.ndarray]) -> None:
    """ValueError unless `saved` holds the optimizer's whole state at the run's step: its step count
    and, after a step, every buffer of every parameter (a run continued without them would not
    go on as the uninterrupted one)."""
    optimizer = state.optimizer
    steps = saved.get("steps")
    if steps is None or int(steps) != state.step:
        raise ValueError(f"the optimizer state is missing or not of step {state.step} "
                         f"(its step count is {None if steps is None else int(steps)})")
    if state.step:
        missing = [f"{i}.{b}" for i in range(len(optimizer.params)) for b in optimizer.buffer_names
                   if f"{i}.{b}" not in saved]
        if missing:
            raise ValueError(f"the optimizer state lacks {len(missing)} of its buffers "
                             f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}), so the "
                             f"run cannot continue exactly")
