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
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from .configs import shown

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
    """The tensors of one safetensors file, checked as safetensors checks them: each entry a dtype
    name, a shape of integers and two integer offsets that hold exactly that many bytes; the
    tensors side by side, without gaps or overlaps, covering the data to the file's end.
    CheckpointError otherwise."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < n <= min(MAX_HEADER, size - 8):
            raise CheckpointError(f"{path}: not a safetensors file (its first 8 bytes give no header "
                                  f"length that fits its {size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise CheckpointError(f"{path}: not a safetensors file (its header is not JSON: {e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    dtypes, start, out = _dtypes(), 8 + n, {}
    for name, info in header.items():
        dtype, shape, offsets = _entry(path, name, info, dtypes)
        out[name] = TensorEntry(path, dtypes[dtype], shape, start + offsets[0])
    _check_layout(path, {name: info["data_offsets"] for name, info in header.items()}, start, size)
    return out


def _entry(path: Path, name: str, info: object, dtypes: dict[str, np.dtype]) -> tuple[str, tuple, list]:
    """(dtype name, shape, [begin, end]) of one header entry; CheckpointError naming what is wrong."""
    whole = lambda value: type(value) is int and value >= 0            # JSON's integers, not bools
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
        raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry {shown(info)} "
                              f"(it needs dtype, shape and data_offsets)")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in dtypes:
        raise CheckpointError(f"{path}: tensor {name!r} has dtype {shown(dtype)}; tinygrad_attn reads "
                              f"{', '.join(dtypes)}")
    if not isinstance(shape, list) or not all(whole(s) for s in shape):
        raise CheckpointError(f"{path}: tensor {name!r} has shape {shown(shape)}; a shape is a list of "
                              f"integers ≥ 0")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(whole(o) for o in offsets):
        raise CheckpointError(f"{path}: tensor {name!r} has data_offsets {shown(offsets)}; they are two "
                              f"integers ≥ 0, its first byte and the byte after its last")
    begin, end = offsets
    if end - begin != dtypes[dtype].itemsize * math.prod(shape):
        raise CheckpointError(f"{path}: tensor {name!r} of shape {tuple(shape)} and dtype {dtype} claims "
                              f"bytes {begin}..{end}, which do not hold it")
    return dtype, tuple(shape), offsets


def _check_layout(path: Path, offsets: dict[str, list[int]], start: int, size: int) -> None:
    """The byte ranges (from the data's `start`) follow each other from 0, without gaps or
    overlaps, up to the file's `size`."""
    at, previous = 0, None
    for name, (begin, end) in sorted(offsets.items(), key=lambda item: (item[1], item[0])):
        if begin != at:
            where = f"tensor {previous!r} ends at byte {at}" if previous else "the data starts at byte 0"
            raise CheckpointError(f"{path}: tensor {name!r} starts at byte {begin} but {where}: "
                                  f"tensors must lie side by side, without "
                                  f"{'overlaps' if begin < at else 'gaps'} (safetensors refuses them too)")
        at, previous = end, name
    if start + at > size:
        raise CheckpointError(f"{path}: truncated: tensor {previous!r} ends at byte {start + at} but the "
                              f"file has {size} bytes")
    if start + at < size:
        raise CheckpointError(f"{path}: the last {size - start - at} bytes belong to no tensor "
                              f"(safetensors refuses them too)")


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
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
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
    """One tensor converted to `dtype`; CheckpointError if it holds NaN or infinity, or values
    too large for `dtype` (a float64 file read as float32)."""
    raw = np.memmap(entry.file, dtype=entry.dtype, mode="r", offset=entry.offset, shape=entry.shape)
    with np.errstate(over="ignore"):
        array = np.array(raw, dtype=dtype)
    if not np.isfinite(array).all():
        stored = np.isfinite(raw)
        if not stored.all():
            raise CheckpointError(f"{entry.file}: tensor {name!r} holds {int(stored.size - stored.sum())} "
                                  f"NaN or infinite values")
        largest, limit = float(np.abs(raw).max()), float(np.finfo(dtype).max)
        raise CheckpointError(f"{entry.file}: tensor {name!r} holds values up to {largest:.3g} in "
                              f"{entry.dtype}, beyond {np.dtype(dtype)}'s largest ({limit:.3g}); read it "
                              f"with ta.set_default_dtype(np.float64)")
    del raw
    return array


def encode_tensors(tensors: dict[str, np.ndarray]) -> bytes:
    """`tensors` as the bytes of one safetensors file, with the metadata transformers reads ("pt")."""
    from safetensors.numpy import save

    return save(tensors, metadata={"format": "pt"})
