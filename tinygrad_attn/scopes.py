"""Which module is running: calling a module pushes it here, and each node recorded meanwhile
remembers the innermost one (``Node.scope``), so steps, drawings and errors can say where an op sits."""

from __future__ import annotations

from typing import Any

__all__ = ["current_scope", "module_scope"]


_running: list[Any] = []        # the modules running now, outermost first


class module_scope:  # noqa: N801 -- used as a function: ``with module_scope(model):``
    """Nodes recorded inside the block remember `module` (whose ``path`` is its dotted name).

    A class rather than a generator context manager: every module call enters one, and this
    costs a third as much.
    """

    __slots__ = ("module",)

    def __init__(self, module: Any):
        self.module = module

    def __enter__(self) -> None:
        _running.append(self.module)

    def __exit__(self, *exc_info: object) -> None:
        _running.pop()


def current_scope() -> Any:
    """The innermost module running now, or None."""
    return _running[-1] if _running else None
