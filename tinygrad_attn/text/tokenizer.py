"""Tokenizers: text to a list of integer ids and back, and each id's text as a label.

Two kinds, with the same methods (``encode``, ``decode``, ``tokens``, ``vocab_size``, ``to_json``,
``save``):

- ``CharTokenizer``: one id per distinct character of a text, in sorted order. The vocabulary a
  character-level language model starts from: nothing is merged, so a model must learn words
  itself.
- ``HuggingFaceTokenizer``: a ``tokenizers.Tokenizer`` (the library behind Hugging Face's fast
  tokenizers), loaded from any model's ``tokenizer.json`` or trained here as byte-level byte-pair
  encoding (BPE): start from the 256 byte values, then repeatedly merge the most frequent adjacent
  pair into a new token until the vocabulary has ``vocab_size`` ids. Every text can be encoded
  (any character is some bytes), frequent words become single ids.

``load_tokenizer(path)`` reads either kind's file.

Example:
    >>> tok = CharTokenizer.from_text("hello world")
    >>> tok.encode("low")
    [4, 5, 7]
    >>> tok.decode([4, 5, 7]), tok.vocab_size
    ('low', 8)
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import TokenizerError
from ..files import write_atomically
from ..labels import printable

__all__ = ["CharTokenizer", "HuggingFaceTokenizer", "MAX_BPE_VOCABULARY", "load_tokenizer",
           "tokenizer_from_json", "visible"]


class _Tokenizer:
    """What both kinds share: saving, and checking ids before decoding them."""

    @property
    def vocab_size(self) -> int:
        """How many ids there are: 0 to vocab_size − 1."""
        raise NotImplementedError

    def to_json(self) -> str:
        raise NotImplementedError

    def save(self, path: str | os.PathLike) -> Path:
        """Write the vocabulary to `path` (JSON, written whole or not at all); `load_tokenizer`
        reads it back."""
        return write_atomically(path, self.to_json().encode("utf-8"))

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise TokenizerError(f"token id {bad[0]} is outside the vocabulary "
                                 f"(ids 0 to {self.vocab_size - 1})")
        return ids


class CharTokenizer(_Tokenizer):
    """One id per character of `chars` (a string of distinct characters, in id order)."""

    def __init__(self, chars: str):
        repeated = sorted(c for c, n in Counter(chars).items() if n > 1)
        if repeated:
            raise TokenizerError(f"a character vocabulary lists each character once; "
                                 f"{_name(repeated[0])} appears more than once")
        if not chars:
            raise TokenizerError("a character vocabulary needs at least one character")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str, vocab_size: int | None = None) -> CharTokenizer:
        """The distinct characters of `text`, sorted; at most `vocab_size` of them (else a
        TokenizerError saying how many there are and which are rarest)."""
        counts = Counter(text)
        if not counts:
            raise TokenizerError("cannot build a character vocabulary from an empty text")
        if vocab_size is not None and len(counts) > vocab_size:
            rarest = ", ".join(_name(c) for c, _ in sorted(counts.items(), key=lambda cn: cn[1])[:5])
            raise TokenizerError(
                f"the text has {len(counts)} distinct characters, more than --vocab-size "
                f"{vocab_size}; a character vocabulary needs one id for each (the rarest: {rarest})")
        return cls("".join(sorted(counts)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        try:
            return [self._ids[c] for c in text]
        except KeyError:
            at = next(i for i, c in enumerate(text) if c not in self._ids)
            raise TokenizerError(f"the vocabulary has no character {_name(text[at])} "
                                 f"(at position {at} of the text); it knows {self.vocab_size} "
                                 f"characters: {_preview(self.chars)}") from None

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[i] for i in self._check_ids(ids))

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.chars[i] for i in self._check_ids(ids)]

    def to_json(self) -> str:
        """A Hugging Face tokenizer.json (transformers loads it): a word-level vocabulary of the
        characters, the text split into single characters, tokens joined without spaces."""
        return self.to_huggingface().to_json()

    def to_huggingface(self) -> HuggingFaceTokenizer:
        """The same vocabulary as a ``tokenizers.Tokenizer`` (with no unknown token: a character
        outside the vocabulary is refused)."""
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
        inner = Tokenizer(models.WordLevel(self._ids, unk_token=_NO_UNKNOWN))
        inner.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
        inner.decoder = decoders.Fuse()
        return HuggingFaceTokenizer(inner)

    def __repr__(self) -> str:
        return f"CharTokenizer({self.vocab_size} characters: {_preview(self.chars)})"


class HuggingFaceTokenizer(_Tokenizer):
    """A ``tokenizers.Tokenizer`` with this package's methods and errors: any ``tokenizer.json``
    (a pretrained model's, or one `train_bpe` made).

    `vocab_size`, when given, is a model's vocabulary larger than the tokenizer's own (padded to a
    round number, as Qwen2's is): its ids past the tokenizer's decode to no text, as transformers'
    tokenizers decode them, so that any id the model writes can be decoded.
    """

    def __init__(self, tokenizer, vocab_size: int | None = None):
        own = tokenizer.get_vocab_size()
        if vocab_size is not None and vocab_size < own:
            raise TokenizerError(f"the tokenizer has {own} ids, more than vocab_size {vocab_size}")
        self.tokenizer, self._vocab_size = tokenizer, own if vocab_size is None else vocab_size

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> HuggingFaceTokenizer:
        """Load a ``tokenizer.json`` (the file, or a folder holding one)."""
        return cls.from_json(*_read(path))

    @classmethod
    def from_json(cls, text: str, source: str = "the tokenizer JSON") -> HuggingFaceTokenizer:
        from tokenizers import Tokenizer
        try:
            return cls(Tokenizer.from_str(text))
        except Exception as e:     # tokenizers raises its own Exception subclass, with the reason
            raise TokenizerError(f"{source} is not a Hugging Face tokenizer.json: {e}") from None

    @classmethod
    def train_bpe(cls, text: str, vocab_size: int) -> HuggingFaceTokenizer:
        """Byte-level BPE trained on `text`: the 256 byte values, then merges of the most frequent
        adjacent pairs until there are `vocab_size` ids (fewer if the text runs out of pairs that
        repeat); `vocab_size` from 256 to ``MAX_BPE_VOCABULARY``, else TokenizerError. Spaces and
        newlines are kept, so decode(encode(text)) == text."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        if vocab_size < _BYTES:
            raise TokenizerError(f"byte-level BPE needs --vocab-size at least {_BYTES} (one id for "
                                 f"each byte value, so any text can be encoded), got {vocab_size}")
        if vocab_size > MAX_BPE_VOCABULARY:
            raise TokenizerError(f"byte-level BPE takes --vocab-size at most {MAX_BPE_VOCABULARY:,} (real "
                                 f"models use 30,000 to 260,000; the trainer sets memory aside for each "
                                 f"id asked for), got {vocab_size:,}")
        if not text:
            raise TokenizerError("cannot train a BPE vocabulary on an empty text")
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator([text], trainer)
        return cls(tokenizer)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str) -> list[int]:
        try:
            encoding = self.tokenizer.encode(text, add_special_tokens=False)
        except Exception as e:      # tokenizers' own Exception, e.g. a word-level model without unk
            at = next((i for i, c in enumerate(text) if not _encodes(self.tokenizer, c)), None)
            where = f"no token for {text[at]!r} (at position {at} of the text)" if at is not None else ""
            raise TokenizerError(f"the vocabulary has {where or 'no tokens for this text'} ({e})") from None
        unknown = getattr(self.tokenizer.model, "unk_token", None)
        unknown_id = self.tokenizer.token_to_id(unknown) if unknown else None
        for i, (start, end) in zip(encoding.ids, encoding.offsets):
            if i == unknown_id and text[start:end] != unknown:
                raise TokenizerError(f"the vocabulary has no token for {text[start:end]!r} (at "
                                     f"position {start} of the text); it would be read as {unknown}")
        return encoding.ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(self._check_ids(ids), skip_special_tokens=False)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id's text (`decode` of that id alone); the vocabulary's raw token where that is
        not whole text (a byte cut from a multi-byte character)."""
        labels = []
        for i in self._check_ids(ids):
            text = self.tokenizer.decode([i], skip_special_tokens=False)
            labels.append(text if text and "\ufffd" not in text else self.tokenizer.id_to_token(i) or text)
        return labels

    def to_json(self) -> str:
        return self.tokenizer.to_str()

    def __repr__(self) -> str:
        return f"HuggingFaceTokenizer({type(self.tokenizer.model).__name__}, {self.vocab_size} ids)"


Tokenizer = CharTokenizer | HuggingFaceTokenizer    # either kind


def tokenizer_from_json(text: str, source: str = "the tokenizer JSON") -> Tokenizer:
    """The tokenizer a `to_json` string (or any Hugging Face tokenizer.json) describes."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TokenizerError(f"{source} is not JSON: {e}") from None
    if isinstance(data, dict) and data.get("type") == "char":      # runs saved before to_json wrote HF
        return CharTokenizer(data["chars"])
    tokenizer = HuggingFaceTokenizer.from_json(text, source)
    chars = _char_vocabulary(data)
    return CharTokenizer(chars) if chars is not None and text == CharTokenizer(chars).to_json() else tokenizer


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Read a file `save` wrote, or a Hugging Face ``tokenizer.json`` (the file or its folder)."""
    return tokenizer_from_json(*_read(path))


def _read(path: str | os.PathLike) -> tuple[str, str]:
    """The text of a tokenizer file (or of the ``tokenizer.json`` in a folder), and its name."""
    path = Path(path)
    path = path / "tokenizer.json" if path.is_dir() else path
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or e
        raise TokenizerError(f"cannot read the tokenizer {path}: {reason}") from None


_BYTES = 256
MAX_BPE_VOCABULARY = 2**20
_NO_UNKNOWN = "[UNK]"     # named as the unknown token but never in a character vocabulary


def _encodes(tokenizer, char: str) -> bool:
    try:
        tokenizer.encode(char, add_special_tokens=False)
        return True
    except Exception:
        return False


def _char_vocabulary(data: dict) -> str | None:
    """The characters in id order if `data` is a word-level tokenizer.json of single characters."""
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordLevel":
        return None
    vocab = model.get("vocab", {})
    if not vocab or any(len(c) != 1 for c in vocab) or sorted(vocab.values()) != list(range(len(vocab))):
        return None
    return "".join(sorted(vocab, key=vocab.get))


_DRAWN = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def visible(token: str) -> str:
    """A token as a row, column or tick label: spaces, newlines and tabs drawn (' cat' → '␣cat',
    '\\n' → '↵'), so that tokens that differ by a space look different, and any other control
    character escaped (``labels.printable``: a token may be an escape sequence that would clear
    the terminal).

    >>> visible(" cat\\n")
    '␣cat↵'
    """
    return printable(token.translate(_DRAWN))


def _name(char: str) -> str:
    """A character as a reader can see it: 'a', '\\n' (U+000A)."""
    return repr(char) if char.isprintable() else f"{char!r} (U+{ord(char):04X})"


def _preview(chars: Sequence[str], limit: int = 40) -> str:
    shown = "".join(chars[:limit])
    return repr(shown) + (f" and {len(chars) - limit} more" if len(chars) > limit else "")
