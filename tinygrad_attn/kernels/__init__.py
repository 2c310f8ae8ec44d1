"""The kernels: fast paths that compute an op's numbers faster than its textbook form in ``ops/``,
one file per family, each registered for the op and the devices it serves (``registry.py``).

The textbook op is the reference: gradchecked, stepped and drawn. A kernel subclasses it, keeps
its residuals, and is proven equal to it by ``tests/ops/test_kernels.py`` to the tolerance it states.
``ta.textbook()`` turns kernels off. Importing this package imports every module in it, so
``KERNELS`` is complete whoever imports it first. The shared pieces: ``parallel.py`` (the batch cut
among threads), ``threads.py`` (how many threads run) and ``reductions.py`` (row sums and maxima
made fast).
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import KERNELS, kernel, textbook

__all__ = ["KERNELS", "kernel", "textbook"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
