"""Stepping through a real model on your own text: folded blocks (exact gradients, one step each),
the text example behind ``step|graph|explore --model``, large matrices printed as NumPy does."""

import re

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn
from tinygrad_attn.commands.cli import main
from tinygrad_attn.pretrained.text_example import text_example
from tinygrad_attn.text import CharTokenizer, HuggingFaceTokenizer
from tinygrad_attn.viz.explorer import array_json
from tinygrad_attn.viz.matrices import format_array
from tinygrad_attn.viz.stepper import backprop_steps

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "."]


def tokenizer():
    inner = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="."))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    return HuggingFaceTokenizer(inner)


def llama(layers=3, **options):
    ta.manual_seed(0)
    return nn.TinyTransformer(len(WORDS), 16, 4, layers, 16, norm="rms", mlp="swiglu", positions="rope",
                              n_kv_heads=2, attn_bias=False, head_bias=False, tie_embeddings=True, **options)


def grads(model):
    return {name: p.grad.copy() for name, p in model.named_parameters()}


def test_folded_block_gives_the_unfolded_gradients(rng, float64_default):
    block = nn.TransformerBlock(8, 2, 16, norm="rms", mlp="swiglu", rope=True, n_kv_heads=1)
    x = ta.Tensor(rng.standard_normal((2, 5, 8)), requires_grad=True)
    cotangent = rng.standard_normal((2, 5, 8))
    (block(x, is_causal=True) * cotangent).sum().backward()
    expected, expected_dx = grads(block), x.grad.copy()
    block.zero_grad()
    x.grad = None
    folded = nn.fold(block, x, is_causal=True)
    np.testing.assert_allclose(folded.numpy(), block(x, is_causal=True).numpy(), rtol=0, atol=0)
    loss = (folded * cotangent).sum()
    assert [s.op for s in backprop_steps(loss)] == ["sum", "mul", "folded"]
    np.testing.assert_allclose(x.grad, expected_dx, rtol=0, atol=1e-12)
    for name, g in grads(block).items():
        np.testing.assert_allclose(g, expected[name], rtol=0, atol=1e-12, err_msg=name)
    loss.backward()                                      # a second pass adds the same again
    np.testing.assert_allclose(x.grad, 2 * expected_dx, rtol=0, atol=1e-12)


@pytest.fixture
def float64_default():
    ta.set_default_dtype(np.float64)
    yield
    ta.set_default_dtype(np.float32)


def test_text_example_steps_one_layer_and_folds_the_rest(float64_default):
    model, text = llama(), "the cat sat on the mat ."
    ids = np.array([[WORDS.index(w) for w in text.split()]])
    logits = model(ids)
    F.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    expected = grads(model)
    model.zero_grad()
    example = text_example(model, tokenizer(), text, layer=1, head=2)
    assert example.tokens == tuple(text.split()) and example.head == 2
    steps = list(backprop_steps(example.loss, tokens=example.tokens, head=example.head))
    folded = [s for s in steps if s.op == "folded"]
    assert [s.module for s in folded] == ["blocks.2", "blocks.0"]
    stepped = {s.module.split(".")[1] for s in steps
               if (s.module or "").startswith("blocks.") and s.op != "folded"}
    assert stepped == {"1"}
    for name, g in grads(model).items():                 # the pass is the whole model's backward
        np.testing.assert_allclose(g, expected[name], rtol=0, atol=1e-12, err_msg=name)
    attention = next(s for s in steps if s.op == "scaled_dot_product_attention")
    text_shown = str(attention)
    assert "query head 2]" in text_shown and "query head 1]" not in text_shown     # --head 2 only
    assert any(line.split() == text.split() for line in text_shown.splitlines())   # tokens label columns
    with pytest.raises(ValueError, match="--layer 3: the model has 3 layers"):
        text_example(model, tokenizer(), text, layer=3)
    with pytest.raises(ValueError, match="--head 4: layer 2 has 4 heads"):
        text_example(model, tokenizer(), text, head=4)
    with pytest.raises(ValueError, match="'cat' is 1 token; the loss predicts each next token"):
        text_example(model, tokenizer(), "cat")


def test_large_matrices_print_their_corners():
    array = np.arange(10 * 20, dtype=np.float64).reshape(10, 20)
    lines = format_array(array, "x", None)
    assert lines[0].startswith("      200 numbers, shape (10, 20): ‖·‖ =")
    assert "min 0, max 199.0000" in lines[0]
    assert lines[1].strip() == ("(the first and last 3 rows and columns of each matrix only; --whole prints "
                                "every row and column)")
    assert lines[2].split() == ["0", "1", "2", "…", "17", "18", "19"]
    assert lines[3].split() == ["0", "0", "1.0000", "2.0000", "…", "17.0000", "18.0000", "19.0000"]
    assert lines[6].split() == ["…"] * 8
    assert lines[-1].split()[0] == "9" and lines[-1].split()[-1] == "199.0000"
    sent = array_json(np.arange(3 * 40 * 50.0).reshape(3, 40, 50), "x", None)
    assert sent["shape"] == [3, 9, 9] and sent["full_shape"] == [3, 40, 50] and sent["range"] == [0, 5999]
    assert sent["cols"] == ["0", "1", "2", "3", "…", "46", "47", "48", "49"] and sent["data"][4] == "…"
    assert sent["data"][9 * 9 + 8] == 2000 + 49          # matrix 1, row 0, last column


def test_token_labels_show_control_characters_escaped(tmp_path, capsys):
    """A tokenizer's token can be an escape sequence (ESC [2J clears a terminal): step prints it as
    Python writes it, in the intro and in the labels of every matrix (whitespace drawn: ↵ ⇥)."""
    chars = " \n\x1b[2Jab\t"
    ta.manual_seed(0)
    model = nn.TinyTransformer(len(chars), 8, 2, 1, 16, head_bias=False)
    ta.save_pretrained(model, tmp_path, CharTokenizer(chars))
    assert main(["step", "--model", str(tmp_path), "--text", "a\x1b[2Jb\nab\t", "--all"]) == 0
    out = capsys.readouterr().out
    assert all(c.isprintable() or c == "\n" for c in out)               # no ESC, tab or other control
    assert "10 tokens 'a'(6) '\\x1b'(2) '['(3) '2'(4) 'J'(5) 'b'(7) '↵'(1) 'a'(6) 'b'(7) '⇥'(8)" in out
    assert re.search(r"after +'b' → '↵' +p = ", out)
    rows = {line.split()[0] for line in out.splitlines() if line.startswith("        ")}
    assert {"\\x1b", "↵", "⇥"} <= rows                           # matrices' row labels


def test_step_command_on_a_saved_model(tmp_path, capsys):
    model = llama(layers=2)
    ta.save_pretrained(model, tmp_path, tokenizer())
    assert main(["step", "--model", str(tmp_path), "--text", "the dog sat on the mat", "--head", "0",
                 "--all"]) == 0
    out = capsys.readouterr().out
    assert "layer 1 of 0…1 is stepped op by op (head 0 of 4 printed); the other 1 blocks are folded" in out
    assert "step " in out and "folded → blocks.0 output (1, 6, 16)  (in blocks.0)" in out
    assert re.search(r"after +'dog' → 'sat' +p = 0\.\d{4}, −log p = \d+\.\d{4}", out)
    assert main(["step", "--model", str(tmp_path), "--text", "the dog", "--layer", "5", "--all"]) == 2
    assert "--layer 5: the model has 2 layers" in capsys.readouterr().err
    assert main(["step", "--text", "the dog", "--all"]) == 2
    assert "--text needs --model PATH" in capsys.readouterr().err
    assert main(["step", "--text", "the dog", "--head", "1", "--all"]) == 2
    assert "--text, --head need --model PATH" in capsys.readouterr().err
    assert main(["step", "--model", str(tmp_path), "--text", "the dog sat", "--head", "-1", "--all"]) == 0
    out = capsys.readouterr().out
    assert "(head 3 of 4 printed)" in out and "query head 3]" in out and "query head 2]" not in out
    cross_entropy = out[out.index("step 0: cross_entropy"):out.index("step 1:")].splitlines()
    header = cross_entropy[cross_entropy.index("  saved: P (the softmax probabilities)   [value]") + 1]
    assert header.split() == WORDS                          # the vocabulary's columns, by token
    assert main(["step", "--model", str(tmp_path), "--text", "the dog", "--head", "-5", "--all"]) == 2
    assert "--head -5: layer 1 has 4 heads (0 to 3, or -1 for the last)" in capsys.readouterr().err
    assert main(["explore", "--model", str(tmp_path), "--text", "the cat sat", "--out",
                 str(tmp_path / "page.html")]) == 0
    assert (tmp_path / "page.html").stat().st_size < 2_000_000
