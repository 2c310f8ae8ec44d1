"""A training run's output folder: made writable before training, locked while in use, never mixed.

A folder holds one run: its checkpoint.npz, metrics.json and plots. `RunFolder` checks before any
training that the folder can be written (its parent exists, no file is in the way, it may be
written to), refuses a folder that already holds another run unless told to overwrite it (then
that run's files are removed first, so two runs' files never sit side by side), and holds a lock
file for as long as the run lasts, so that a second run into the same folder is refused.

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

__all__ = ["LOCK", "RUN_FILES", "RunFolder", "RunFolderError"]


RUN_FILES = ("checkpoint.npz", "metrics.json", "loss.png", "attention.png")
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
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool = False, continues: Path | None = None):
        self.path = Path(path)
        self.overwrite = overwrite
        self.continues = continues
        self.checkpoint = self.path / "checkpoint.npz"
        self._locked = False

    def __enter__(self) -> RunFolder:
        if not self.path.parent.is_dir():
            raise RunFolderError(f"cannot write to {self.path}: the folder {self.path.parent} does not "
                                 f"exist")
        if self.path.exists() and not self.path.is_dir():
            raise RunFolderError(f"cannot write to {self.path}: it is a file, not a folder")
        try:
            self.path.mkdir(exist_ok=True)
            self._lock()
        except OSError as e:
            raise RunFolderError(f"cannot write to {self.path}: {e.strerror or e}") from None
        try:
            self._make_room()
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._unlock()

    def _lock(self) -> None:
        """Create the lock file holding our process id; take over one whose process is gone."""
        lock = self.path / LOCK
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                pid = _lock_owner(lock)
                if pid is None or _is_running(pid):
                    raise RunFolderError(
                        f"{self.path} is in use by another run (process {pid or 'unknown'}, see "
                        f"{lock}); wait for it, or delete {lock} if no run is using the folder") from None
                lock.unlink(missing_ok=True)      # left behind by a run that was killed
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self._locked = True
            return

    def _unlock(self) -> None:
        if self._locked:
            (self.path / LOCK).unlink(missing_ok=True)
            self._locked = False

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


def _lock_owner(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip())
    except (OSError, ValueError):
        return None


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
    return True
