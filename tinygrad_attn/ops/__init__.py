"""The ops: one class per differentiable op, each registered by name in ``REGISTRY``.

Importing this package imports every module in it, so ``REGISTRY`` is complete whoever imports
it first, and a new op module needs no line here: an op is one class with ``@register`` (from
``.registry``) in any module of this folder.
"""

from __future__ import annotations

import importlib
import pkgutil

from .registry import REGISTRY, register

__all__ = ["REGISTRY", "register"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
