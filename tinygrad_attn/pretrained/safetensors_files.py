"""Safetensors files: a folder's weights listed, checked and read one tensor at a time; and written.

A safetensors file is 8 bytes (the little-endian length N of a JSON header), N bytes of header
(each tensor's dtype, shape and byte range), then the tensors' bytes. Reading never runs code
from the file (no pickle). Every header is read and checked (names, dtypes, byte ranges inside
the file) before any tensor is: a truncated or foreign file is refused before a model is built.
The tensors are then read one at a time through a memory map, so loading holds at most one
tensor beyond the model. NumPy has no bfloat16, so safetensors' NumPy API cannot read it: the
bytes are read here as ``ml_dtypes.bfloat16`` and converted.

Writing uses ``safetensors.numpy.save`` with the metadata transformers expects, to bytes that the
caller writes atomically.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CheckpointError

__all__ = ["TensorEntry", "encode_tensors", "list_tensors", "read_tensor"]

WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"
MAX_HEADER = 100 * 2**20        # safetensors' own limit on the header


def _dtypes() -> dict[str, np.dtype]:
    import ml_dtypes

    return {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
            "BF16": np.dtype(ml_dtypes.bfloat16)}


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor's bytes are: its file, dtype, shape and byte offset in that file."""

    file: Path
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int


def _header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one safetensors file, checked against its size; CheckpointError otherwise."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < n <= min(MAX_HEADER, size - 8):
            raise CheckpointError(f"{path}: not a safetensors file (its first 8 bytes give no header "
                                  f"length that fits its {size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{path}: not a safetensors file (its header is not JSON: {e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    dtypes, start, out = _dtypes(), 8 + n, {}
    for name, info in header.items():
        try:
            dtype, (begin, end) = info["dtype"], info["data_offsets"]
            shape = tuple(int(s) for s in info["shape"])
        except (TypeError, KeyError, ValueError) as e:
            raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry ({e!r})") from None
        if dtype not in dtypes:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {dtype}; tinygrad_attn reads "
                                  f"{', '.join(dtypes)}")
        if end - begin != dtypes[dtype].itemsize * int(np.prod(shape)) or begin < 0:
            raise CheckpointError(f"{path}: tensor {name!r} of shape {shape} and dtype {dtype} claims "
                                  f"bytes {begin}..{end}, which do not hold it")
        if start + end > size:
            raise CheckpointError(f"{path}: truncated: tensor {name!r} ends at byte {start + end} but "
                                  f"the file has {size} bytes")
        out[name] = TensorEntry(path, dtypes[dtype], shape, start + begin)
    return out


def _weight_files(folder: Path) -> list[Path]:
    """model.safetensors, or the shards its index names; CheckpointError naming what is missing."""
    if (folder / WEIGHTS).is_file():
        return [folder / WEIGHTS]
    if not (folder / INDEX).is_file():
        raise CheckpointError(f"{folder}: no {WEIGHTS} and no {INDEX} (the weights); tinygrad_attn "
                              f"reads safetensors only, never pickled .bin files")
    try:
        weight_map = json.loads((folder / INDEX).read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{folder / INDEX}: not a safetensors index ({e!r})") from None
    bad = [s for s in shards if not isinstance(s, str) or Path(s).name != s]
    if bad:
        raise CheckpointError(f"{folder / INDEX}: shard names must be file names in the folder, got {bad}")
    missing = [s for s in shards if not (folder / s).is_file()]
    if missing:
        raise CheckpointError(f"{folder}: the index names shards that are missing: {', '.join(missing)}")
    return [folder / s for s in shards]


def list_tensors(folder: Path) -> dict[str, TensorEntry]:
    """Every tensor of the folder's weight files by name, each header checked."""
    out: dict[str, TensorEntry] = {}
    for path in _weight_files(folder):
        for name, entry in _header(path).items():
            if name in out:
                raise CheckpointError(f"{folder}: tensor {name!r} is in both {out[name].file.name} and "
                                      f"{path.name}")
            out[name] = entry
    return out


def read_tensor(name: str, entry: TensorEntry, dtype: np.dtype) -> np.ndarray:
    """One tensor converted to `dtype`; CheckpointError if it holds NaN or infinity."""
    raw = np.memmap(entry.file, dtype=entry.dtype, mode="r", offset=entry.offset, shape=entry.shape)
    array = np.array(raw, dtype=dtype)
    del raw
    if not np.isfinite(array).all():
        bad = int(np.size(array) - np.isfinite(array).sum())
        raise CheckpointError(f"{entry.file}: tensor {name!r} holds {bad} NaN or infinite values")
    return array


def encode_tensors(tensors: dict[str, np.ndarray]) -> bytes:
    """`tensors` as the bytes of one safetensors file, with the metadata transformers reads ("pt")."""
    from safetensors.numpy import save

    return save(tensors, metadata={"format": "pt"})
