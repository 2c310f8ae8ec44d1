"""Ctrl-C, and SIGTERM or SIGHUP where asked for, during training: deferred to the end of the
running step, so a run stops at a step boundary."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["InterruptedMidStep", "PendingStop", "Terminated", "interrupts_between_steps",
           "termination_as_interrupt"]


class InterruptedMidStep(KeyboardInterrupt):
    """A second Ctrl-C stopped a step half-way: the weights may be half-updated, so do not save."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a job scheduler, a shutdown) or SIGHUP (a closed terminal), raised as
    Ctrl-C raises KeyboardInterrupt, so that whatever saves on Ctrl-C saves on it too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# The signals `termination_as_interrupt` turns into Terminated (SIGHUP only where there is one).
_TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextmanager
def termination_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise ``Terminated`` (a KeyboardInterrupt) instead of
    ending the process at once; ``interrupts_between_steps`` then defers them as it defers Ctrl-C.

    A signal someone else handles or ignores is left alone; outside the main thread nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced = [s for s in _TERMINATING if signal.getsignal(s) is signal.SIG_DFL]
    for s in replaced:
        signal.signal(s, _raise_terminated)
    try:
        yield
    finally:
        for s in replaced:
            signal.signal(s, signal.SIG_DFL)


class PendingStop:
    """The stop asked for during the running step (Ctrl-C, or a signal ``termination_as_interrupt``
    turned into one), raised by the loop once the step is done."""

    def __init__(self) -> None:
        self.error: KeyboardInterrupt | None = None

    def raise_if_asked(self) -> None:
        if self.error is not None:
            raise self.error


@contextmanager
def interrupts_between_steps() -> Iterator[PendingStop]:
    """Defer Ctrl-C to the end of the running step, so that a run stops only at a step boundary;
    inside ``termination_as_interrupt``, SIGTERM and SIGHUP too.

    Yields a PendingStop; the loop calls its ``raise_if_asked`` after every step, which raises
    KeyboardInterrupt (``Terminated`` for SIGTERM or SIGHUP) if one came. A second signal within
    the same step raises InterruptedMidStep at once. Outside the main thread, or when someone
    else handles SIGINT, Ctrl-C is left alone.
    """
    pending = PendingStop()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, *_TERMINATING)}
    deferred = [s for s, h in handlers.items()
                if h is (signal.default_int_handler if s == signal.SIGINT else _raise_terminated)]

    def defer(signum: int, frame: Any) -> None:
        if pending.error is not None:
            raise InterruptedMidStep
        pending.error = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)

    for s in deferred:
        signal.signal(s, defer)
    try:
        yield pending
    finally:
        for s in deferred:
            signal.signal(s, handlers[s])
