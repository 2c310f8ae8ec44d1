"""A training run's output folder: made writable before training, locked while in use, never mixed.

A folder holds one run: its checkpoint.npz, metrics.json and plots. The temporary files of a
save cut short (a killed process cannot remove its own) are removed when the folder is taken and
when it is let go. `RunFolder` checks before any
training that the folder can be written (its parent exists, no file is in the way, it may be
written to), refuses a folder that already holds another run unless told to overwrite it (then
that run's files are removed first, so two runs' files never sit side by side), and holds a lock
file for as long as the run lasts, so that a second run into the same folder is refused. The lock
is taken atomically (an OS file lock), also when it replaces one left by a killed run, so of
several runs started together into one folder exactly one gets it.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "run"
    >>> with RunFolder(out) as folder:
    ...     (folder.path / "lock").exists(), folder.checkpoint.name
    (True, 'checkpoint.npz')
    >>> (out / "lock").exists()
    False
"""

from __future__ import annotations

import os
from pathlib import Path

from ..files import remove_leftover_temporaries

try:
    import fcntl
except ImportError:         # Windows: no file locks, the lock file is created exclusively instead
    _FILE_LOCKS = False
else:
    _FILE_LOCKS = True

__all__ = ["CHECKPOINT", "LOCK", "RUN_FILES", "RunFolder", "RunFolderError"]

CHECKPOINT = "checkpoint.npz"       # the run's checkpoint, the one name every reader and writer uses
RUN_FILES = (CHECKPOINT, "metrics.json", "loss.png", "attention.png")
LOCK = "lock"


class RunFolderError(ValueError):
    """The output folder cannot take this run; the message says why and what to do."""


class RunFolder:
    """The output folder of one run, as a context manager that holds its lock.

    Args:
        path: the folder; its parent must exist (the folder is made if missing).
        overwrite: remove another run's files in the folder instead of refusing it.
        continues: the checkpoint a resumed run continues from; a run continuing its own
            folder's checkpoint is not "another run".
        make_parent: make a missing parent folder too (the default ``runs/``).
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool = False, continues: Path | None = None,
                 make_parent: bool = False):
        self.path = Path(path)
        self.overwrite = overwrite
        self.continues = continues
        self.make_parent = make_parent
        self.checkpoint = self.path / CHECKPOINT
        self._locked = False
        self._fd: int | None = None

    def __enter__(self) -> RunFolder:
        parent = self.path.parent
        try:
            if self.make_parent and not parent.exists():
                parent.mkdir(exist_ok=True)     # several runs may make it at once
        except OSError as e:
            raise RunFolderError(f"cannot write to {self.path}: {e.strerror or e}") from None
        for folder, what in ((parent, f"{parent} is a file, not a folder"),
                             (self.path, "it is a file, not a folder")):
            if folder.exists() and not folder.is_dir():
                raise RunFolderError(f"cannot write to {self.path}: {what}")
        if not parent.is_dir():
            raise RunFolderError(f"cannot write to {self.path}: the folder {parent} does not exist")
        try:
            self.path.mkdir(exist_ok=True)
            self._lock()
        except OSError as e:
            raise RunFolderError(f"cannot write to {self.path}: {e.strerror or e}") from None
        try:
            remove_leftover_temporaries(self.path, RUN_FILES)   # of a run killed while saving
            self._make_room()
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            remove_leftover_temporaries(self.path, RUN_FILES)   # of a save interrupted on the way out
        finally:
            self._unlock()

    def _lock(self) -> None:
        """Hold the lock file, holding our process id, for as long as the run lasts.

        Where the OS has file locks (``fcntl.flock``), the file is opened and locked exclusively
        without waiting: only one process can hold it, a dead process holds nothing, so a lock
        left by a killed run is taken over by whichever run locks it first and the others are
        refused, however many start together. A lock file that another process id still alive
        wrote is refused too (a run without file locks). Elsewhere the file is created exclusively
        (O_EXCL), and one left by a process that is gone is replaced.
        """
        lock = self.path / LOCK
        if not _FILE_LOCKS:
            self._lock_exclusive(lock)
            return
        for _ in range(100):        # again when the file was replaced between open and lock
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise self._in_use(lock, _read_pid(fd)) from None
                if not _is_file_at(fd, lock):
                    os.close(fd)
                    continue
                pid = _read_pid(fd)
                if pid is not None and _is_running(pid):
                    raise self._in_use(lock, pid)
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            except BaseException:
                os.close(fd)
                raise
            self._fd, self._locked = fd, True
            return
        raise RunFolderError(f"cannot lock {lock}: it keeps being replaced by other processes")

    def _lock_exclusive(self, lock: Path) -> None:
        """The lock without file locks: create the file exclusively; replace one whose process
        is gone (two runs replacing the same stale file at once may both get it)."""
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                pid = _lock_owner(lock)
                if pid is None or _is_running(pid):
                    raise self._in_use(lock, pid) from None
                lock.unlink(missing_ok=True)      # left behind by a run that was killed
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self._locked = True
            return
        raise self._in_use(lock, _lock_owner(lock))

    def _in_use(self, lock: Path, pid: int | None) -> RunFolderError:
        return RunFolderError(f"{self.path} is in use by another run (process {pid or 'unknown'}, see "
                              f"{lock}); wait for it, or delete {lock} if no run is using the folder")

    def _unlock(self) -> None:
        if self._locked:
            (self.path / LOCK).unlink(missing_ok=True)     # still holding the lock: nobody else has it
            self._locked = False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _make_room(self) -> None:
        """Refuse (or with `overwrite`, clear) a folder holding another run's files."""
        found = [name for name in RUN_FILES if (self.path / name).exists()]
        continuing_here = self.continues is not None and self.checkpoint.exists() \
            and self.checkpoint.resolve() == self.continues.resolve()
        if not found or continuing_here:
            return
        if not self.overwrite:
            raise RunFolderError(f"{self.path} already holds a run ({', '.join(found)}); continue it "
                                 f"with --resume {self.path}, replace it with --overwrite, or choose "
                                 f"another --out")
        for name in found:
            (self.path / name).unlink()


def _is_file_at(fd: int, path: Path) -> bool:
    """True if the open file `fd` is still the file at `path` (not removed or replaced since)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)


def _read_pid(fd: int) -> int | None:
    try:
        return _parse_pid(os.pread(fd, 64, 0).decode())
    except (OSError, UnicodeDecodeError):
        return None


def _lock_owner(lock: Path) -> int | None:
    try:
        return _parse_pid(lock.read_text())
    except (OSError, UnicodeDecodeError):
        return None


def _parse_pid(text: str) -> int | None:
    """The process id a lock file holds; None if it holds none (empty, not a number, or a number
    that no process can have, such as 0, −1 or 99999999999)."""
    try:
        pid = int(text.strip())
    except ValueError:
        return None
    return pid if 0 < pid < 2**31 else None


def _is_running(pid: int) -> bool:
    """True if process `pid` exists (always True where that cannot be checked, as on Windows)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True
