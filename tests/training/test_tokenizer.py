"""Tokenizers: the character vocabulary and byte-level BPE round-trip every character of a text,
survive saving, label ids for drawings, and refuse what they cannot take with a message naming it."""

import json

import pytest

from tinygrad_attn.errors import TokenizerError
from tinygrad_attn.text import CharTokenizer, HuggingFaceTokenizer, load_tokenizer, tokenizer_from_json

# A few KB of prose, code and characters outside ASCII, like a help page.
CORPUS = ("The quick brown fox jumps over the lazy dog.\n"
          "def add(a, b):\n    return a + b  # a sum\n\n"
          "Café, naïve, 日本語, emoji 🐍, tab\tand quotes \"'`.\n") * 40


def test_char_vocabulary_is_the_sorted_distinct_characters_and_round_trips():
    tok = CharTokenizer.from_text(CORPUS)
    assert tok.chars == "".join(sorted(set(CORPUS))) and tok.vocab_size == len(set(CORPUS))
    ids = tok.encode(CORPUS)
    assert len(ids) == len(CORPUS) and tok.decode(ids) == CORPUS
    assert ids[:3] == [tok.chars.index("T"), tok.chars.index("h"), tok.chars.index("e")]
    assert tok.tokens(tok.encode("a\n🐍")) == ["a", "\n", "🐍"]


def test_char_vocabulary_survives_saving(tmp_path):
    tok = CharTokenizer.from_text(CORPUS)
    path = tok.save(tmp_path / "tokenizer.json")
    again = load_tokenizer(path)
    assert isinstance(again, CharTokenizer) and again.chars == tok.chars
    assert again.encode(CORPUS) == tok.encode(CORPUS)
    assert tokenizer_from_json(tok.to_json()).chars == tok.chars


def test_bpe_encodes_and_decodes_every_character_of_the_file(tmp_path):
    tok = HuggingFaceTokenizer.train_bpe(CORPUS, vocab_size=300)
    assert 256 < tok.vocab_size <= 300
    ids = tok.encode(CORPUS)
    assert len(ids) < len(CORPUS.encode())          # merges make tokens longer than a byte
    assert tok.decode(ids) == CORPUS
    for char in set(CORPUS):                         # each character alone, too
        assert tok.decode(tok.encode(char)) == char, repr(char)
    assert "".join(tok.tokens(tok.encode("def add"))) == "def add"
    assert tok.decode(tok.encode("unseen: ß€")) == "unseen: ß€"   # bytes cover any text
    again = load_tokenizer(tok.save(tmp_path / "tokenizer.json"))
    assert isinstance(again, HuggingFaceTokenizer) and again.encode(CORPUS) == ids
    assert HuggingFaceTokenizer.from_file(tmp_path).encode(CORPUS) == ids   # the folder holding it


def test_bpe_labels_a_byte_of_a_split_character_by_its_raw_token():
    tok = HuggingFaceTokenizer.train_bpe("plain ascii text " * 50, vocab_size=260)
    labels = tok.tokens(tok.encode("é"))             # two bytes, never merged here
    assert len(labels) == 2 and all(label and "\ufffd" not in label for label in labels)


def test_a_wordpiece_tokenizer_names_the_text_it_has_no_token_for():
    from tokenizers import Tokenizer, models, pre_tokenizers
    wordpiece = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = HuggingFaceTokenizer.from_json(wordpiece.to_str())
    assert tok.encode("hello world") == [1, 2]
    with pytest.raises(TokenizerError, match=r"no token for 'there' \(at position 6"):
        tok.encode("hello there")


def test_a_character_the_vocabulary_lacks_is_named_with_its_position():
    tok = CharTokenizer.from_text("abc def")
    with pytest.raises(TokenizerError, match=r"no character 'x' \(at position 2 of the text\).*7 char"):
        tok.encode("abxd")
    with pytest.raises(TokenizerError, match=r"'\\x00' \(U\+0000\)"):
        tok.encode("a\x00")


def test_ids_outside_the_vocabulary_are_refused():
    for tok in (CharTokenizer.from_text(CORPUS), HuggingFaceTokenizer.train_bpe(CORPUS, 300)):
        last = tok.vocab_size - 1
        with pytest.raises(TokenizerError, match=rf"token id {last + 1} is outside .*0 to {last}"):
            tok.decode([0, tok.vocab_size])
        with pytest.raises(TokenizerError, match="token id -1"):
            tok.tokens([-1])


def test_vocabularies_that_cannot_be_built_say_why():
    with pytest.raises(TokenizerError, match="has 5 distinct characters, more than --vocab-size 4"):
        CharTokenizer.from_text("aabbbcde", vocab_size=4)
    with pytest.raises(TokenizerError, match="empty text"):
        CharTokenizer.from_text("")
    with pytest.raises(TokenizerError, match="'a' appears more than once"):
        CharTokenizer("aba")
    with pytest.raises(TokenizerError, match="at least 256 .* got 100"):
        HuggingFaceTokenizer.train_bpe(CORPUS, vocab_size=100)
    with pytest.raises(TokenizerError, match="empty text"):
        HuggingFaceTokenizer.train_bpe("", vocab_size=300)


def test_files_that_are_not_tokenizers_say_so(tmp_path):
    with pytest.raises(TokenizerError, match="cannot read the tokenizer .*missing.json"):
        load_tokenizer(tmp_path / "missing.json")
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(TokenizerError, match="a.json is not JSON"):
        load_tokenizer(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"model": "nonsense"}))
    with pytest.raises(TokenizerError, match="b.json is not a Hugging Face tokenizer.json"):
        load_tokenizer(tmp_path / "b.json")


def test_a_character_vocabulary_is_saved_as_a_tokenizer_json_transformers_reads(tmp_path):
    transformers = pytest.importorskip("transformers")
    tok = CharTokenizer.from_text(CORPUS)
    path = tok.save(tmp_path / "tokenizer.json")
    theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    assert theirs.encode(CORPUS) == tok.encode(CORPUS)
    assert theirs.decode(tok.encode(CORPUS)) == CORPUS
    hf = HuggingFaceTokenizer.from_file(path)                 # read as any tokenizer.json
    assert hf.encode(CORPUS) == tok.encode(CORPUS) and hf.decode(hf.encode(CORPUS)) == CORPUS
    with pytest.raises(TokenizerError, match=r"no token for '~' \(at position 2 of the text\)"):
        hf.encode("ab~")
    assert isinstance(load_tokenizer(path), CharTokenizer)    # and back as the character vocabulary
