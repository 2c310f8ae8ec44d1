"""A per-thread on/off setting, as grad mode and anomaly mode are (one thread's block never switches
it for another), with a count of the blocks open in all threads: while that count is 0 a hot path
knows every thread has the default without the per-thread read (which costs several times a global's)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ThreadSwitch"]


class _PerThread(threading.local):
    def __init__(self, default: bool):
        self.value = default        # each thread starts with the default


class ThreadSwitch:
    """``value()`` is this thread's setting; ``set_to(v)`` is a block that sets it in this thread
    and restores it on exit; ``open_blocks`` counts the blocks open in all threads.

    Example:
        >>> switch = ThreadSwitch(default=True)
        >>> with switch.set_to(False):
        ...     switch.value(), switch.open_blocks
        (False, 1)
        >>> switch.value(), switch.open_blocks
        (True, 0)
    """

    def __init__(self, default: bool):
        self._thread = _PerThread(default)
        self._lock = threading.Lock()
        self.open_blocks = 0        # changed only by set_to, under the lock

    def value(self) -> bool:
        return self._thread.value

    @contextmanager
    def set_to(self, value: bool) -> Iterator[None]:
        with self._lock:
            self.open_blocks += 1
        previous, self._thread.value = self._thread.value, value
        try:
            yield
        finally:
            self._thread.value = previous
            with self._lock:
                self.open_blocks -= 1
