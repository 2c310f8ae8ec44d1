"""Keeping freed host memory for reuse: one process-wide setting of glibc's malloc.

A training step makes and frees the same large arrays (activations, gradients) at every step. By
default glibc gives blocks of a few MiB back to the operating system when they are freed, so the
next step's arrays are fresh pages that the kernel must map and zero on first touch, a large
share of a TinyTransformer step (benchmarks/README.md: "The train step and glibc's malloc").
``keep_freed_memory`` asks malloc to serve blocks up to 32 MiB from its heap and to keep up to
256 MiB of freed memory there, so each step reuses the pages of the one before; the process's
resident size stays near its peak instead of shrinking between steps.

It changes the whole process, so the engine and the optimizers never call it: ``training.train``
(the training loop that the ``train`` command runs) does, as it takes the process over for a run,
and a loop of your own may. Where the C library is not glibc (macOS, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]


_M_TRIM_THRESHOLD = -1      # mallopt's parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20     # blocks below this come from the heap (glibc's largest allowed value)
TRIM_THRESHOLD = 256 * 2**20    # free memory at the heap's top kept, up to this much


def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for the next allocations (see the module's text).

    Returns:
        True when glibc took both settings; False where there is no ``mallopt`` (not glibc).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt     # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):     # no such function, or no C library by that name
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    heap_serves = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return bool(heap_serves) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
