"""One key press from the terminal, for the interactive stepper.

On a terminal the key is read on its own (no Enter needed; the arrow keys work); from a pipe or
a file a whole line is read instead, so `printf 'b\\nq\\n' | tinygrad-attn step` still works. A key
that means nothing here (↑, ↓, a lone Esc, a letter) answers HELP: the stepper shows the keys
again and waits, it never quits on it.
"""

from __future__ import annotations

import os
import select
import sys

__all__ = ["BACK", "HELP", "KEYS_HELP", "NEXT", "QUIT", "meaning", "read_escape", "read_key"]

NEXT, BACK, QUIT, HELP = "n", "b", "q", "?"
KEYS_HELP = "keys: Enter, space, n or → next; b or ← back; q quit"
_ARROWS = {b"C": NEXT, b"D": BACK}          # ESC [ C is →, ESC [ D is ← (ESC [ 1 ; 5 C with Ctrl)


def read_key(prompt: str) -> str | None:
    """NEXT, BACK, QUIT or HELP for the key pressed; None once standard input is closed."""
    if sys.stdin is None or sys.stdin.closed:
        return None
    if sys.stdin.isatty():
        return _read_single_key(prompt)
    try:
        line = input(prompt)
    except EOFError:
        return None
    return meaning(line.strip().lower()[:1].encode() or b"\n")


def meaning(key: bytes) -> str | None:
    """What a key's bytes mean: b'' is the end of input (None), Ctrl-D quits, an escape sequence
    means its final byte (→, ←; Ctrl or Shift with it too), anything unknown is HELP."""
    if key == b"":
        return None
    if key == b"\x04":
        return QUIT
    if key.startswith(b"\x1b"):
        return _ARROWS.get(key[-1:], HELP) if len(key) > 2 and key[1:2] in b"[O" else HELP
    return {b"\n": NEXT, b"\r": NEXT, b" ": NEXT, b"n": NEXT, b"b": BACK, b"q": QUIT}.get(key.lower(), HELP)


def read_escape(fd: int, wait: float = 0.05) -> bytes:
    """The rest of an escape sequence after ESC: '[' or 'O', parameters, then a final byte
    ('@' … '~'). A lone Esc has nothing after it within `wait` seconds: b''."""
    rest = b""
    while select.select([fd], [], [], wait)[0]:
        byte = os.read(fd, 1)
        if not byte:
            break
        rest += byte
        if len(rest) == 1 and byte not in b"[O":
            break                           # Alt + key: ESC then the key
        if len(rest) > 1 and 0x40 <= byte[0] <= 0x7E:
            break                           # the final byte
    return rest


def _read_single_key(prompt: str) -> str | None:
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)                   # keys arrive one by one; Ctrl-C still interrupts
        print(prompt, end="", flush=True)   # after the switch: a key typed once it shows counts
        key = os.read(fd, 1)
        if key == b"\x1b":
            key += read_escape(fd)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    print()
    return meaning(key)
