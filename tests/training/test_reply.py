"""``Task.reply`` called from a script, as `tinygrad-attn sample` calls it: a toy task's checked
answer, a text continued token by token (greedy, or seeded), and the options each refuses."""

import numpy as np
import pytest

from tinygrad_attn.nn import TinyTransformer
from tinygrad_attn.nn.sampling import generate_beyond_context
from tinygrad_attn.text import CharTokenizer
from tinygrad_attn.training import SampleOptions, TextTask, get_task
from tinygrad_attn.training.sample_options import SamplingNote
from tinygrad_attn.training.tasks import VOCAB

TEXT = "the cat sat on the mat. " * 20


def _always(model, token):
    """`model` with its head made to give `token` the largest logit at every position."""
    model.head.weight.data = np.zeros_like(model.head.weight.data)
    bias = np.zeros_like(model.head.bias.data)
    bias[token] = 1.0
    model.head.bias.data = bias
    return model


def _text_task():
    return TextTask.from_text(TEXT, CharTokenizer.from_text(TEXT), block_size=16)


def _reply(task, model, prompt, options):
    pieces = []
    task.reply(model, prompt, options, pieces.append)
    return pieces


def test_a_toy_task_replies_with_its_greedy_answer_then_the_right_one():
    add = get_task("add")
    model = _always(TinyTransformer(len(VOCAB), 16, 2, 1, add.max_len), VOCAB.index("7"))
    assert _reply(add, model, "42 + 199", SampleOptions()) == [
        "2 4 0 + 9 9 1 =  →  7 7 7 7 7",                    # five 7s and no "." is no sum to read
        "\n(the right answer is 1 4 2 0 ., read as 42 + 199 = 241)"]
    copy = get_task("copy")
    model = _always(TinyTransformer(len(VOCAB), 16, 2, 1, copy.max_len), VOCAB.index("3"))
    assert _reply(copy, model, "3 1", SampleOptions()) == ["3 1 |  →  " + " ".join("3" * 9),
                                                           "\n(the right answer is 3 1 .)"]


def test_a_toy_task_refuses_the_text_options_and_a_prompt_it_cannot_read_before_any_piece():
    copy = get_task("copy")
    model, pieces = TinyTransformer(len(VOCAB), 16, 2, 1, copy.max_len), []
    with pytest.raises(ValueError, match="^--top-k, --seed are for text runs; a copy run answers greedily$"):
        copy.reply(model, "1 2", SampleOptions(top_k=3, seed=1), pieces.append)
    with pytest.raises(ValueError, match="copy: expected single digits"):
        copy.reply(model, "1 x", SampleOptions(), pieces.append)
    assert pieces == []


def test_a_text_continues_greedily_one_token_a_piece():
    task = _text_task()
    model = _always(TinyTransformer(task.vocab_size, 16, 2, 1, task.max_len), task.tokenizer.encode("a")[0])
    pieces = _reply(task, model, "the c", SampleOptions(max_new_tokens=20, temperature=0))
    assert pieces == ["the c"] + ["a"] * 20 + [""]       # past the 16-token context too; nothing held back


def test_a_seeded_text_is_the_seeded_generation_and_the_same_each_time():
    task = _text_task()
    model = TinyTransformer(task.vocab_size, 16, 2, 1, task.max_len)
    options = SampleOptions(max_new_tokens=12, temperature=1.0, top_k=5, seed=3)
    first = _reply(task, model, "the c", options)
    ids = generate_beyond_context(model, np.array(task.tokenizer.encode("the c")), 12, 1.0, 5,
                                  np.random.default_rng(3))
    assert first[0] == "the c" and "".join(first[1:]) == task.tokenizer.decode(ids[5:].tolist())
    assert _reply(task, model, "the c", options) == first
    assert _reply(task, model, "the c", SampleOptions(12, 1.0, 5, seed=4)) != first


def test_a_text_notes_a_temperature_too_small_to_divide_by_and_writes_greedily():
    task = _text_task()
    model = TinyTransformer(task.vocab_size, 16, 2, 1, task.max_len)
    greedy = _reply(task, model, "the c", SampleOptions(max_new_tokens=8, temperature=0))
    with pytest.warns(SamplingNote, match=r"^--temperature 1e-320 is below 2.23e-308, too small"):
        assert _reply(task, model, "the c", SampleOptions(max_new_tokens=8, temperature=1e-320)) == greedy


@pytest.mark.parametrize("prompt, options, message", [
    ("", SampleOptions(), "the prompt is empty"),
    ("the cat " * 2, SampleOptions(), "the prompt is 16 tokens; this model reads 16 at once, so give at "
                                      "most 15"),
    ("the", SampleOptions(max_new_tokens=-1), "--max-new-tokens must be 0 or more, got -1"),
    ("the", SampleOptions(top_k=0), "top_k must be at least 1"),
])
def test_a_text_refuses_a_bad_prompt_or_option_before_any_piece(prompt, options, message):
    task, pieces = _text_task(), []
    model = TinyTransformer(task.vocab_size, 16, 2, 1, task.max_len)
    with pytest.raises(ValueError, match=message):
        task.reply(model, prompt, options, pieces.append)
    assert pieces == []
