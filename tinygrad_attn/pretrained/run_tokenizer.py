"""The tokenizer of our toy tasks' runs as a Hugging Face tokenizer: one token per symbol of the
tasks' 15-symbol vocabulary (``tasks.VOCAB``), so an exported run carries a tokenizer.json too.

Example:
    >>> tok = task_tokenizer()
    >>> tok.encode("3 1 4 |"), tok.encode("31+4="), tok.decode([4, 1, 3, 13]), tok.tokens([12])
    ([3, 1, 4, 12], [3, 1, 10, 4, 11], '4 1 3 .', ['|'])
"""

from __future__ import annotations

from ..text import HuggingFaceTokenizer
from ..training.tasks import PAD, VOCAB

__all__ = ["task_tokenizer"]


def task_tokenizer() -> HuggingFaceTokenizer:
    """Symbols written with or without spaces ("3 1 4 |", "31+4=") ↔ their ids; decoding puts a
    space between symbols, as ``tasks.decode`` does."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    inner = Tokenizer(models.WordLevel({s: i for i, s in enumerate(VOCAB)}, unk_token=VOCAB[PAD]))
    inner.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                   pre_tokenizers.Split(Regex("."), "isolated")])
    return HuggingFaceTokenizer(inner)
