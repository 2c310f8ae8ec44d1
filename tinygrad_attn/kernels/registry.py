"""``KERNELS``, ``@kernel`` and ``textbook()``: which fast kernel serves an op on a device, and the
switch that turns kernels off.

A kernel is a subclass of a registered op that overrides its ``forward`` and/or ``backward``
with a faster computation of the same numbers; it inherits everything else (name, formula,
residuals, cases, insides), and it saves the same residuals under the same names, so that the
op's textbook ``backward`` can run on what the kernel's ``forward`` saved (the stepper and the
explorer do: what a learner sees is the textbook op). ``@kernel("cpu", "cuda", ulps=…)``
registers it for the devices it serves; ``ulps`` is how far its results may be from the textbook
op's, in units of the dtype's machine epsilon (0: bit for bit), which ``tests/ops/test_kernels.py``
checks on every case of the op, on each device.

``apply`` asks ``choose(op, xp)`` for the class to run: the kernel of that device unless the op
runs in its textbook form (``with ta.textbook():``, every op or the ones named; the environment
variable ``TINYGRAD_ATTN_TEXTBOOK=1``, or a comma-separated list of op names, does the same for a
whole process, such as a command).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..ops.base import Op
from ..ops.registry import REGISTRY

__all__ = ["ACTIVE", "DEVICES", "KERNELS", "choose", "kernel", "textbook", "textbook_ops"]

DEVICES = ("cpu", "cuda")
# op → {device: kernel class}
KERNELS: dict[type[Op], dict[str, type[Op]]] = {}

_lock = threading.Lock()
_textbook_blocks: list[frozenset[str] | None] = []   # the open `textbook()` blocks (None: every op)
# op → (cpu kernel or the op, cuda kernel or the op), for the ops that have kernels and are not
# in textbook form: what `choose` (and `apply`, inline) reads, rebuilt whenever a block opens or closes.
ACTIVE: dict[type[Op], tuple[type[Op], type[Op]]] = {}


def kernel(*devices: str, ulps: float = 0):
    """Class decorator: register a subclass of a registered op as its kernel on `devices`.

    `ulps`: the largest difference from the textbook op allowed, as a multiple of the dtype's
    machine epsilon times the size of the textbook values (0: the same bits)."""
    unknown = [d for d in devices if d not in DEVICES]
    if not devices or unknown:
        raise ValueError(f"kernel: devices must be some of {DEVICES}, got {devices}")

    def register_kernel(cls: type[Op]) -> type[Op]:
        op: type[Op] = cls.__mro__[1]
        if REGISTRY.get(op.name) is not op:
            raise ValueError(f"kernel {cls.__name__}: its base class {op.__name__} is not a registered op")
        cls.textbook = op
        cls.ulps = ulps
        for device in devices:
            if device in KERNELS.get(op, {}):
                raise ValueError(f"kernel {cls.__name__}: {op.name} has a {device} kernel already")
            KERNELS.setdefault(op, {})[device] = cls
        _rebuild()
        return cls

    return register_kernel


def choose(op: type[Op], xp: Any) -> type[Op]:
    """The class that runs `op` on arrays of module `xp`: its kernel there, or the op itself."""
    pair = ACTIVE.get(op)
    return op if pair is None else pair[xp is not np]


def textbook_ops() -> frozenset[str] | None:
    """The ops running in textbook form now: None for every op, else their names (maybe none)."""
    names: set[str] = set()
    for block in [_from_environment(), *_textbook_blocks]:
        if block is None:
            return None
        names |= block
    return frozenset(names)


@contextmanager
def textbook(*names: str) -> Iterator[None]:
    """Run every op (or the ops named) in its textbook form inside the block: the forward and
    backward of ``ops/``, as their docs pages write them, instead of the kernels beside them.

    The results agree with the kernels' to the tolerance each kernel states; the block is for
    learning what a kernel changes and for measuring what it saves. It holds for the whole
    process (all threads) while it is open.

    >>> import tinygrad_attn as ta
    >>> from tinygrad_attn import functional as F
    >>> x = ta.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    >>> F.softmax(x, dim=-1).node.op.__name__               # the class that ran: the kernel
    'FastSoftmax'
    >>> with ta.textbook():
    ...     F.softmax(x, dim=-1).node.op.__name__
    'Softmax'
    """
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise ValueError(f"textbook: no op named {', '.join(map(repr, unknown))} (see tinygrad-attn ops)")
    with _lock:
        _textbook_blocks.append(frozenset(names) if names else None)
        _rebuild()
    try:
        yield
    finally:
        with _lock:
            _textbook_blocks.pop()
            _rebuild()


def _from_environment() -> frozenset[str] | None:
    """TINYGRAD_ATTN_TEXTBOOK: '1' (or 'all') every op; op names, comma-separated; else none."""
    value = os.environ.get("TINYGRAD_ATTN_TEXTBOOK", "").strip()
    if value.lower() in ("", "0", "no", "false", "off"):
        return frozenset()
    if value.lower() in ("1", "all", "yes", "true", "on"):
        return None
    return frozenset(n.strip() for n in value.split(",") if n.strip())


def _rebuild() -> None:
    plain = textbook_ops()
    ACTIVE.clear()
    if plain is None:
        return
    for op, by_device in KERNELS.items():
        if op.name not in plain:
            ACTIVE[op] = (by_device.get("cpu", op), by_device.get("cuda", op))
