"""A text given out token by token: each piece as soon as it is sure, whole characters only, the
pieces together exactly the decoding of every id."""

import numpy as np
import pytest

from tinygrad_attn.text import CharTokenizer, HuggingFaceTokenizer, TextStream

TEXT = "naïve café: 日本語 ok → ✓ 🙂!"


@pytest.fixture(scope="module")
def bytes_only():
    """Byte-level BPE without merges: every byte its own token, so é is two, 日 three and 🙂 four."""
    return HuggingFaceTokenizer.train_bpe(TEXT, 256)


def _pieces(tokenizer, ids):
    stream = TextStream(tokenizer)
    return [stream.add([i]) for i in ids], stream.finish()


def test_characters_cut_across_tokens_come_out_whole_and_at_once(bytes_only):
    ids = bytes_only.encode(TEXT)
    assert len(ids) == len(TEXT.encode("utf-8")) > len(TEXT)
    pieces, rest = _pieces(bytes_only, ids)
    assert "".join(pieces) + rest == TEXT == bytes_only.decode(ids) and rest == ""
    assert not any("\ufffd" in p for p in pieces)
    shown = [p for p in pieces if p]
    assert shown == list(TEXT)                      # each character as soon as its last byte came
    ends = np.cumsum([len(c.encode("utf-8")) for c in TEXT]) - 1
    assert [i for i, p in enumerate(pieces) if p] == ends.tolist()


def test_an_unfinished_character_at_the_end_is_given_by_finish(bytes_only):
    ids = bytes_only.encode("ok 日")[:-1]              # the last of 日's three bytes is missing
    pieces, rest = _pieces(bytes_only, ids)
    assert "".join(pieces) == "ok " and rest == bytes_only.decode(ids)[3:] and "\ufffd" in rest


def test_a_byte_that_never_makes_a_character_is_shown_once_text_follows(bytes_only):
    lone = bytes_only.encode("é")[1:]                # a continuation byte with nothing before it
    ids = bytes_only.encode("a") + lone + bytes_only.encode("b")
    pieces, rest = _pieces(bytes_only, ids)
    assert pieces == ["a", "", "\ufffdb"] and rest == ""


def test_a_character_tokenizer_gives_every_token_at_once():
    tokenizer = CharTokenizer("ehtca ")
    ids = tokenizer.encode("the cat")
    pieces, rest = _pieces(tokenizer, ids)
    assert pieces == list("the cat") and rest == ""


def test_a_prompt_is_added_at_once_and_finish_gives_nothing_twice(bytes_only):
    stream = TextStream(bytes_only)
    assert stream.add(bytes_only.encode("café")) == "café"
    assert stream.finish() == "" and stream.finish() == ""
