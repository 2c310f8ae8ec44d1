"""One key press from the terminal, for the interactive stepper.

On a terminal the key is read on its own (no Enter needed; the arrow keys work); from a pipe or
a file a whole line is read instead, so `printf 'b\\nq\\n' | tinygrad-attn step` still works.
"""

from __future__ import annotations

import sys

__all__ = ["read_key"]


NEXT, BACK, QUIT = "n", "b", "q"
_ARROWS = {"C": NEXT, "D": BACK}          # ESC [ C is →, ESC [ D is ←


def read_key(prompt: str) -> str | None:
    """NEXT, BACK or QUIT for the key pressed; None once standard input is closed."""
    if sys.stdin is None or sys.stdin.closed:
        return None
    if sys.stdin.isatty():
        return _read_single_key(prompt)
    try:
        line = input(prompt)
    except EOFError:
        return None
    return _meaning(line.strip().lower()[:1])


def _meaning(char: str) -> str:
    return {"b": BACK, "q": QUIT}.get(char, NEXT)


def _read_single_key(prompt: str) -> str | None:
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)                   # keys arrive one by one; Ctrl-C still interrupts
        print(prompt, end="", flush=True)   # after the switch: a key typed once it shows counts
        char = sys.stdin.read(1)
        if char == "\x1b":                  # an escape sequence: the arrow keys
            char = _ARROWS.get(sys.stdin.read(2)[-1:], "")
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    print()
    if char in ("", "\x04"):                # end of input, Ctrl-D
        return None if char == "" else QUIT
    return char if char in (NEXT, BACK, QUIT) else _meaning(char.lower())
