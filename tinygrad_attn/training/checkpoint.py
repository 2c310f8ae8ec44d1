"""Checkpoints: NumPy arrays plus JSON metadata in one .npz, written atomically, read safely.

A checkpoint is written to a temporary file in the same folder and renamed over the target
(``os.replace``), so a crash never leaves a half-written file. It is read with
``allow_pickle=False``, so loading never executes code from the file; the metadata is JSON stored
as a byte array.

The container knows nothing about what it holds: ``train.save_run`` and ``train.load_run`` put a
whole training run in one such file.

Example:
    >>> import tempfile, numpy as np
    >>> path = save(tempfile.mkdtemp() + "/c.npz", {"w": np.arange(3)}, {"step": 7})
    >>> arrays, meta = load(path)
    >>> arrays["w"].tolist(), meta["step"]
    ([0, 1, 2], 7)
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError

__all__ = ["FORMAT", "load", "save"]


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
