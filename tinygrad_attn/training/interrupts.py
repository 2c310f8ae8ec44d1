"""Ctrl-C during training: deferred to the end of the running step, so a run stops at a step boundary."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["InterruptedMidStep", "interrupts_between_steps"]


class InterruptedMidStep(KeyboardInterrupt):
    """A second Ctrl-C stopped a step half-way: the weights may be half-updated, so do not save."""


@contextmanager
def interrupts_between_steps() -> Iterator[threading.Event]:
    """Defer Ctrl-C to the end of the running step, so that a run stops only at a step boundary.

    Yields an Event that is set when Ctrl-C was pressed; the loop raises KeyboardInterrupt when it
    sees it. A second Ctrl-C within the same step raises InterruptedMidStep at once. Outside the
    main thread, or when someone else handles SIGINT, nothing changes.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield interrupted
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise InterruptedMidStep
        interrupted.set()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
