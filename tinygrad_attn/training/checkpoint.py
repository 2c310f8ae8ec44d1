"""Checkpoints: NumPy arrays plus JSON metadata in one .npz, written atomically, read safely.

A checkpoint is written to a temporary file in the same folder and renamed over the target
(``os.replace``), so a crash never leaves a half-written file. It is read with
``allow_pickle=False``, so loading never executes code from the file; the metadata is JSON stored
as a byte array.

The container knows nothing about what it holds: ``saved_run.py`` puts a whole training run in
one such file. ``FORMAT`` names the layout of that run; a file of another layout (written by another
version of tinygrad_attn) is refused whole, with the advice to train again, so no code anywhere
reads older layouts.

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
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..files import save_error, write_atomically
from .run_folder import CHECKPOINT

__all__ = ["FORMAT", "load", "save"]


FORMAT = "tinygrad_attn-checkpoint-2"      # 2: the config holds the model's TransformerConfig
_FAMILY = FORMAT.rsplit("-", 1)[0]
_META = "__meta__"


def save(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write `arrays` and the JSON-serialisable `meta` to `path` atomically; returns the path.

    The file is written to a temporary name in the same folder, flushed to disk, then renamed
    over `path` (``files.write_atomically``); on any error the temporary file is removed and `path`
    is left as it was. It gets the file mode of any other new file (0666 less the umask).

    Raises:
        SaveError: the file could not be written (a full disk, a file-size limit): the message
            names it and about how much space it needs.
    """
    path = Path(path)
    blob = np.frombuffer(json.dumps({"format": FORMAT, **meta}).encode(), dtype=np.uint8)
    entries = {**arrays, _META: blob}
    # The .npz is the arrays' bytes plus a zip entry and a .npy header (~250 bytes) for each.
    size = sum(np.asarray(a).nbytes + 256 + 2 * len(name) for name, a in entries.items())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise save_error(path, error, size) from None
    # Every name has a prefix ("model/", "optim/", …), so none is taken for savez's own allow_pickle.
    return write_atomically(path, lambda f: np.savez(f, **entries), size=size)  # type: ignore[arg-type]


def load(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) from a checkpoint; CheckpointError if it is missing, truncated, foreign, or
    of another version's layout."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    kind = _kind(path)
    if kind is not None:        # not a zip: say what it is, never NumPy's advice about pickles
        beside = path.with_name(CHECKPOINT)
        hint = f"; the checkpoint of this run is {beside}" if beside != path and beside.is_file() else ""
        raise CheckpointError(f"{path}: not a readable tinygrad_attn checkpoint ({kind}, not an .npz "
                              f"archive){hint}")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive")
        with data:
            arrays = {key: data[key] for key in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"{path}: not a readable tinygrad_attn checkpoint ({e})") from None
    try:
        meta = json.loads(arrays.pop(_META).tobytes().decode())
    except (KeyError, ValueError, UnicodeDecodeError):
        meta = {}
    saved = meta.get("format")
    if isinstance(saved, str) and saved.startswith(_FAMILY) and saved != FORMAT:
        raise CheckpointError(f"{path}: saved by another version of tinygrad_attn ({saved}; this version "
                              f"reads {FORMAT}), whose runs it does not read: train it again")
    if saved != FORMAT:
        raise CheckpointError(f"{path}: not a tinygrad_attn checkpoint (no {FORMAT} metadata)")
    return arrays, meta


def _kind(path: Path) -> str | None:
    """None for a zip archive (an .npz), else what the file is in words, from its first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as error:
        raise CheckpointError(f"{path}: cannot read it ({error.strerror or error})") from None
    if head.startswith(b"PK\x03\x04"):
        return None
    if head.startswith(b"\x93NUMPY"):
        return "a single .npy array"
    if not head:
        return "an empty file"
    text = head.lstrip()[:1]
    if text in (b"{", b"["):
        return "a JSON file"
    if text and all(32 <= c < 127 or c in b"\t\r\n" for c in head):
        return "a text file"
    return "a file of another format"
