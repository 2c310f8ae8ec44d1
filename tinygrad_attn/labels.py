"""How messages, steps and drawings name things: a tensor, an op's input, a module, an op's place,
and how they print a text that may hold control characters (a token).

Every name here reads public attributes only (``Tensor.name``, ``.op``, ``.requires_grad``, a
module's ``path``), so the stepper, the graph drawing and the engine's errors agree on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tensor import Tensor


__all__ = ["input_label", "named", "op_location", "printable", "scope_name", "tensor_label"]


def named(t: Tensor, name: str) -> Tensor:
    """`t`, given the name that steps and drawings show for it (S, P, logits, …)."""
    t.name = name
    return t


def printable(text: str) -> str:
    r"""`text` safe to print on a terminal: each character that is not printable (a control
    character such as ESC, which can clear the screen; a newline, a tab) written as Python
    escapes it, every other character as it is.

    >>> print(printable("bold\x1b[1m\n é"))
    bold\x1b[1m\n é
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def tensor_label(t: Tensor) -> str:
    """A tensor's name: its parameter name, else the op that made it ('output of matmul'),
    else 'leaf' (requires grad) or 'const'."""
    return t.name or (f"output of {t.op}" if t.op else "leaf" if t.requires_grad else "const")


def input_label(index: int, t: Tensor) -> str:
    """'input 1 (blocks.0.attn.q_proj.weight)', 'input 0 (output of matmul)', 'input 0 (leaf)'."""
    return f"input {index} ({tensor_label(t)})"


def scope_name(scope: Any) -> str | None:
    """A node's module: its dotted path, or its class name for the root module (None: no module)."""
    return None if scope is None else getattr(scope, "path", None) or type(scope).__name__


def op_location(scope: Any, inputs: tuple, site: tuple[str, int] | None) -> str:
    """Where an op sits, for error messages: ' (in module attn.q_proj (Linear), named inputs
    attn.q_proj.weight, created at train.py:12)', or '' when nothing is known."""
    parts = []
    if scope is not None:
        path, kind = getattr(scope, "path", None), type(scope).__name__
        parts.append(f"in module {path} ({kind})" if path else f"in module {kind}")
    names = [t.name for t in inputs if t is not None and t.name]
    if names:
        parts.append(f"named inputs {', '.join(names)}")
    if site is not None:
        parts.append(f"created at {site[0]}:{site[1]}")
    return f" ({', '.join(parts)})" if parts else ""
