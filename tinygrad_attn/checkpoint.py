"""Checkpoints: NumPy arrays plus JSON metadata in one .npz, written atomically, read safely.

A checkpoint is written to a temporary file in the same folder and renamed over the target
(``os.replace``), so a crash never leaves a half-written file. It is read with
``allow_pickle=False``, so loading never executes code from the file; the metadata is JSON stored
as a byte array.

`save_run` and `load_run` store a whole training run in one such file: the model's weights, the
optimizer's buffers, the losses so far, and as metadata the task, the config, the step and the
states of the random generators, so that ``--resume`` continues exactly.

Example:
    >>> import tempfile, numpy as np
    >>> path = save(tempfile.mkdtemp() + "/c.npz", {"w": np.arange(3)}, {"step": 7})
    >>> arrays, meta = load(path)
    >>> arrays["w"].tolist(), meta["step"]
    ([0, 1, 2], 7)
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .errors import CheckpointError

if TYPE_CHECKING:
    from .nn import TinyTransformer
    from .tasks import Task
    from .train import TrainConfig, TrainState

FORMAT = "tinygrad_attn-checkpoint-1"
_META = "__meta__"


def save(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write `arrays` and the JSON-serialisable `meta` to `path` atomically; returns the path.

    The file is written to a temporary name in the same folder, flushed to disk, then renamed
    over `path`; on any error the temporary file is removed and `path` is left as it was. It gets
    the file mode of any other new file (0666 less the umask), not a temporary file's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = np.frombuffer(json.dumps({"format": FORMAT, **meta}).encode(), dtype=np.uint8)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays, **{_META: blob})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) from a checkpoint; CheckpointError if it is missing, truncated or foreign."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError(f"a single {'.npy array' if isinstance(data, np.ndarray) else 'text file'}, "
                             f"not an .npz archive")
        with data:
            arrays = {key: data[key] for key in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"{path}: not a readable tinygrad_attn checkpoint ({e})") from None
    try:
        meta = json.loads(arrays.pop(_META).tobytes().decode())
    except (KeyError, ValueError, UnicodeDecodeError):
        meta = {}
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a tinygrad_attn checkpoint (no {FORMAT} metadata)")
    return arrays, meta


class Run(NamedTuple):
    """A training run read back from a checkpoint."""

    model: TinyTransformer
    state: TrainState
    config: TrainConfig
    task: Task


def save_run(path: str | os.PathLike, model: TinyTransformer, state: TrainState,
             config: TrainConfig, task: Task) -> Path:
    """Write a run (weights, optimizer, history, task, config, step, RNG states) atomically."""
    from .train import rng_states

    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    arrays.update({f"optim/{k}": v for k, v in state.optimizer.state_dict().items()})
    arrays.update({f"history/{k}": np.array(v, dtype=np.float64)
                   for k, v in dataclasses.asdict(state.history).items()})
    meta = {"task": task.name, "config": dataclasses.asdict(config), "step": state.step,
            "rng": rng_states(state)}
    return save(path, arrays, meta)


def load_run(path: str | os.PathLike, device: str | None = None) -> Run:
    """The run `save_run` wrote, rebuilt on `device` (default: the device it was trained on).

    Raises:
        CheckpointError: the file is missing, truncated, not a checkpoint, or its arrays do not
            fit the model and optimizer its config describes.
        DeviceError: `device` (or the saved one) is unknown or unusable (CuPy or a GPU missing).
    """
    from .backend import xp_for
    from .tasks import get_task
    from .train import History, TrainState, config_from_dict, make_model, restore_rng_states

    if device is not None:
        xp_for(device)
    arrays, meta = load(path)
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
