"""The text of token ids that arrive one at a time, given out piece by piece as it becomes sure:
what ``sample`` prints while a model writes.

A byte-level BPE token can be part of a UTF-8 character (``é`` is two bytes, a CJK character
three), which decodes as U+FFFD until the rest arrives. So each piece is what decoding *all* the
ids so far adds to the text given out before, held back while that text ends in U+FFFD or would
change what was already given out; `TextStream.finish` gives the rest. The pieces concatenate to
the decoding of all the ids.

Example:
    >>> from tinygrad_attn.text import CharTokenizer
    >>> stream = TextStream(CharTokenizer("abc "))
    >>> [stream.add([i]) for i in CharTokenizer("abc ").encode("cab a")] + [stream.finish()]
    ['c', 'a', 'b', ' ', 'a', '']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["TextStream"]

_INCOMPLETE = "\ufffd"      # what a decoder writes for the bytes of a character not yet complete


class TextStream:
    """Token ids in, the new text out (see the module's docstring). `tokenizer` has ``decode``."""

    def __init__(self, tokenizer: Any):
        self.tokenizer, self.text = tokenizer, ""                      # text: what was given out
        self.ids: list[int] = []

    def add(self, ids: Iterable[int]) -> str:
        """Append `ids`; the text they make sure of ("" while a character is incomplete)."""
        self.ids.extend(int(i) for i in ids)
        whole = self.tokenizer.decode(self.ids)
        if whole.endswith(_INCOMPLETE) or not whole.startswith(self.text):
            return ""
        return self._give(whole)

    def finish(self) -> str:
        """The rest of the text, incomplete characters and all: after it, the pieces given out
        are the decoding of every id (unless the decoder rewrote text already given out, which a
        byte-level or character tokenizer never does; then the text from the first change)."""
        whole = self.tokenizer.decode(self.ids)
        kept = next((i for i, (a, b) in enumerate(zip(whole, self.text)) if a != b),
                    min(len(whole), len(self.text)))
        self.text = self.text[:kept]
        return self._give(whole)

    def _give(self, whole: str) -> str:
        piece, self.text = whole[len(self.text):], whole
        return piece
