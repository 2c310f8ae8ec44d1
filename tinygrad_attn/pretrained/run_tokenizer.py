"""The tokenizer of our toy tasks' runs: one token per symbol of the tasks' 15-symbol vocabulary.

Example:
    >>> tok = TaskTokenizer()
    >>> tok.encode("3 1 4 |"), tok.decode([4, 1, 3, 13]), tok.tokens([12])
    ([3, 1, 4, 12], '4 1 3 .', ['|'])
"""

from __future__ import annotations

from typing import Any

from ..training.tasks import VOCAB, decode

__all__ = ["TaskTokenizer"]


class TaskTokenizer:
    """Symbols separated by spaces (or written together: "31+4=") ↔ ids, as ``tasks.VOCAB`` numbers
    them; ValueError naming a character that is no symbol."""

    vocab_size = len(VOCAB)

    def encode(self, text: str) -> list[int]:
        bad = sorted({c for c in text if not c.isspace() and c not in VOCAB})
        if bad:
            raise ValueError(f"TaskTokenizer: {bad} are not symbols of the tasks' vocabulary "
                             f"{' '.join(VOCAB)}")
        return [VOCAB.index(c) for c in text if not c.isspace()]

    def decode(self, ids: Any) -> str:
        return decode(ids)

    def tokens(self, ids: Any) -> list[str]:
        return [VOCAB[int(i)] for i in ids]
