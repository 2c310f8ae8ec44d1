"""Which module is running: calling a module pushes it here, and each node recorded meanwhile
remembers the innermost one (``Node.scope``), so steps, drawings and errors can say where an op sits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["current_scope", "module_scope"]


_running: list[Any] = []        # the modules running now, outermost first


@contextmanager
def module_scope(module: Any) -> Iterator[None]:
    """Nodes recorded inside the block remember `module` (whose ``path`` is its dotted name)."""
    _running.append(module)
    try:
        yield
    finally:
        _running.pop()


def current_scope() -> Any:
    """The innermost module running now, or None."""
    return _running[-1] if _running else None
