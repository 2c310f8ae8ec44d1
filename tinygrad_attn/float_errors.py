"""NumPy's float-error state while ops run: inf or NaN without a RuntimeWarning, as PyTorch gives.

Overflow in exp, log 0 and x/0 give inf or NaN quietly; ``detect_anomaly`` still reports them.
CuPy never warns, so this only affects NumPy. Two forms:

- ``quiet_float_errors()``, a context manager (``np.errstate``), for a block;
- ``silence_float_errors()`` then ``restore_float_errors(token)``, for the per-op path
  (``apply``, the backward pass). NumPy 2 keeps the state in a context variable (per thread),
  private to it (``numpy._core._ufunc_config._extobj_contextvar``); setting that variable to a
  state derived once per caller's state instead of entering an ``np.errstate`` per op saves a
  share of every small op (``python -m benchmarks.check_costs chain --tricks``). When a NumPy has
  no such name, the token is an entered ``np.errstate``: the same effect at errstate's cost.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

__all__ = ["quiet_float_errors", "restore_float_errors", "silence_float_errors"]

_QUIET: dict[str, Any] = {"over": "ignore", "divide": "ignore", "invalid": "ignore"}
try:                            # NumPy 2's private state variable: its stubs do not list it
    from numpy._core._ufunc_config import _extobj_contextvar as _error_state  # type: ignore[attr-defined]
except ImportError:             # another NumPy: fall back to np.errstate
    _error_state = None
_quieted: tuple[Any, Any] = (None, None)   # (a caller's error state, the same with _QUIET applied)


def quiet_float_errors() -> AbstractContextManager:
    """A block in which NumPy gives inf or NaN without a RuntimeWarning (``under`` is kept)."""
    return np.errstate(**_QUIET)


def silence_float_errors() -> Any:
    """What entering ``quiet_float_errors()`` does: a token for ``restore_float_errors``. The
    caller's other settings, such as ``under``, are kept."""
    global _quieted
    if _error_state is None:
        state = np.errstate(**_QUIET)
        state.__enter__()
        return state
    current, quieted = _error_state.get(), _quieted
    if quieted[0] is not current:
        with np.errstate(**_QUIET):
            quieted = _quieted = (current, _error_state.get())  # one tuple: no thread mixes two pairs
    return _error_state.set(quieted[1])


def restore_float_errors(token: Any) -> None:
    """Put back the float-error state that ``silence_float_errors`` replaced."""
    if _error_state is None:
        token.__exit__(None, None, None)
    else:
        _error_state.reset(token)
