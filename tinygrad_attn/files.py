"""Writing a file so that it is whole or not there: a temporary file in the same folder, flushed to
disk, then renamed over the target (``os.replace``, atomic on one filesystem).

A write that fails (a full disk, a file-size limit, no permission) removes the temporary file and
leaves any earlier file at the target as it was, and raises ``SaveError``: an OSError whose one-line
message names the file, the reason and how much space the file needs.

Example:
    >>> import tempfile
    >>> path = write_atomically(tempfile.mkdtemp() + "/a.txt", b"hello")
    >>> path.read_bytes()
    b'hello'
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from .errors import SaveError

_TMP = ".tmp"                               # a file being written: .NAME.<32 hex digits>.tmp
_HEX = re.compile("[0-9a-f]{32}")

__all__ = ["remove_leftover_temporaries", "save_error", "write_atomically", "write_together"]


def write_atomically(path: str | os.PathLike, content: bytes | Callable[[BinaryIO], None],
                     size: int | None = None) -> Path:
    """Write `content` (bytes, or a function writing to a binary file) to `path` atomically.

    The file gets the mode of any other new file (0666 less the umask), not a temporary file's
    0600. `size` is what the file needs, for the message of a failed write (the length of bytes
    by default).

    Raises:
        SaveError: the file could not be written; `path` is unchanged.
    """
    return write_together(Path(path).parent, {Path(path).name: content}, {Path(path).name: size})[0]


def write_together(folder: str | os.PathLike, contents: Mapping[str, bytes | Callable[[BinaryIO], None]],
                   sizes: dict[str, int | None] | None = None) -> list[Path]:
    """Write several files into `folder`, each as `write_atomically` does, so that none changes
    unless every one was written: all the temporary files first, then each renamed over its name
    in the order given (a rename needs no space, so a full disk stops the writing before any), and
    a model's files are never half old, half new. Returns the paths written.

    Raises:
        SaveError: a file could not be written (every file in `folder` is unchanged), or, rarely,
            renamed (the files before it in `contents` are the new ones).
    """
    folder, sizes = Path(folder), sizes or {}
    written: list[tuple[Path, Path]] = []
    try:
        for name, content in contents.items():
            written.append((folder / name, _write_temporary(folder / name, content, sizes.get(name))))
    except BaseException:
        for _, tmp in written:
            tmp.unlink(missing_ok=True)
        raise
    for i, (path, tmp) in enumerate(written):
        try:
            os.replace(tmp, path)
        except BaseException as error:
            for _, left in written[i:]:
                left.unlink(missing_ok=True)
            if isinstance(error, OSError):
                raise save_error(path, error, None) from None
            raise
    return [path for path, _ in written]


def _write_temporary(path: Path, content: bytes | Callable[[BinaryIO], None], size: int | None) -> Path:
    """`content` written and flushed to disk in a new temporary file beside `path`; SaveError for
    `path` (the temporary file removed) if it cannot be."""
    exact = isinstance(content, bytes)
    size = len(content) if isinstance(content, bytes) else size
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}{_TMP}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as error:
        raise save_error(path, error, size, exact) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, SaveError):
            raise save_error(path, error, size, exact) from None
        raise
    return tmp


def remove_leftover_temporaries(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove the temporary files that writes of `names` in `folder` left behind (a process
    killed mid-write cannot remove its own); returns them. Call it only while no other process
    can be writing there (a run folder's lock held)."""
    removed = []
    for name in names:
        for tmp in folder.glob(f".{glob.escape(name)}.*{_TMP}"):
            if _HEX.fullmatch(tmp.name[len(name) + 2:-len(_TMP)]):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
    return removed


def save_error(path: Path, error: OSError, size: int | None, exact: bool = False) -> SaveError:
    """A SaveError for `path`: its reason in words and, for a full disk or a file-size limit,
    the space the file needs (`size`, "about" unless `exact`) and what is free."""
    reason = error.strerror or str(error)
    needs = f"it needs {'' if exact else 'about '}{_amount(size)}" if size is not None else ""
    if error.errno == errno.ENOSPC:
        free = _free_space(path.parent)
        needs = ", ".join(p for p in (needs, f"{_amount(free)} free" if free is not None else "") if p)
        reason += f" ({needs}; free some space or write elsewhere)" if needs else ""
    elif error.errno == errno.EFBIG:
        reason += f" ({needs + ', ' if needs else ''}above the file-size limit, see ulimit -f)"
    elif error.errno == errno.EDQUOT:
        reason += f" ({needs + ', ' if needs else ''}above your disk quota)"
    saved = SaveError(f"cannot write {path}: {reason}")
    saved.errno, saved.reason = error.errno, reason
    return saved


def _free_space(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _amount(size: int) -> str:
    """A byte count in words: 912 bytes, 3.4 kB, 1.2 MB, 2.5 GB (powers of 1000)."""
    if size < 1000:
        return f"{size} bytes"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if size < 1000 * scale or unit == "GB":
            return f"{size / scale:.1f} {unit}"
    raise AssertionError("unreachable")
