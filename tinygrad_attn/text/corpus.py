"""The text a language model trains on: a UTF-8 file, or by default the text of Python's own help
topics (``pydoc_data.topics``, shipped with every CPython: about 465 KB of English prose and code,
103 distinct characters), so a first run needs nothing downloaded.

Example:
    >>> text = default_corpus()
    >>> len(text) > 400_000, "def " in text
    (True, True)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_CORPUS", "default_corpus", "read_corpus"]

DEFAULT_CORPUS = "pydoc_data.topics (the text of Python's own help topics)"


def default_corpus() -> str:
    """Every help topic of ``pydoc_data.topics``, in the order of their names, one after another."""
    from pydoc_data.topics import topics
    return "".join(topics[name] for name in sorted(topics))


def read_corpus(path: str | os.PathLike) -> str:
    """The text of a UTF-8 file; ValueError naming the file if it is missing, empty or not text
    (NUL bytes, or bytes that are not UTF-8: the message gives the first such byte's offset)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read --file {path}: {e.strerror or e}") from None
    if not data.strip():
        raise ValueError(f"--file {path} is empty" + (" (only whitespace)" if data else "")
                         + ": give a text to train on")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"--file {path} is not UTF-8 text (byte {data[e.start]:#04x} at offset "
                         f"{e.start} is not UTF-8): binary data cannot be trained on as text") from None
    if "\x00" in text:
        raise ValueError(f"--file {path} holds NUL bytes (the first at character {text.index(chr(0))}): "
                         f"binary data cannot be trained on as text")
    return text
