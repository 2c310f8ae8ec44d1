"""``--whole`` on a real model and an 11-token text: the stepper prints every row and column (so S
can be recomputed from the printed Q and K), the graph draws labelled grids, the explorer sends and
prints every number with token labels on both axes; a cut matrix says how to see it whole; the
zero notes name the matrix as it is printed."""

import math
import re

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import tinygrad_attn as ta
from tinygrad_attn import nn
from tinygrad_attn.commands.cli import main
from tinygrad_attn.pretrained import load_pretrained
from tinygrad_attn.pretrained.text_example import text_example
from tinygrad_attn.text import HuggingFaceTokenizer
from tinygrad_attn.viz import collect, emit
from tinygrad_attn.viz.explorer import array_json
from tinygrad_attn.viz.matrices import format_array, format_number
from tinygrad_attn.viz.notes import attention_zeros
from tinygrad_attn.viz.stepper import backprop_steps

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "."]
TEXT = "the cat sat on the mat . a dog sat ."          # 11 tokens
TOKENS = TEXT.split()


@pytest.fixture
def model_folder(tmp_path):
    """A 2-layer, 4-head model (head width 4) saved with a word-level tokenizer."""
    inner = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="."))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    ta.manual_seed(0)
    ta.save_pretrained(nn.TinyTransformer(len(WORDS), 16, 4, 2, 16), tmp_path, HuggingFaceTokenizer(inner))
    return tmp_path


def number(text):
    return {"−inf": -math.inf, "inf": math.inf, "…": math.nan}.get(text) or float(text)


def matrix_after(lines, marker, caption="[batch 0, head 1]"):
    """The labelled matrix printed after the first line starting with `marker` and then `caption`:
    (column labels, row labels, values)."""
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(marker))
    at = next(i for i in range(start, len(lines)) if lines[i].strip() == caption)
    columns = lines[at + 1].split()
    rows, values = [], []
    for line in lines[at + 2:]:
        cells = line.split()
        if len(cells) != len(columns) + 1:
            break
        rows.append(cells[0])
        values.append([number(c) for c in cells[1:]])
    return columns, rows, np.array(values)


def attention_step(out):
    """The lines of the printed attention step."""
    text = out[out.index("scaled_dot_product_attention"):]
    return text[:text.index("\nstep ")].splitlines()


def test_whole_prints_every_row_of_p_and_s_recomputes_from_the_printed_q_and_k(model_folder, capsys):
    flags = ["--model", str(model_folder), "--text", TEXT, "--head", "1", "--whole", "--all"]
    assert main(["step", *flags]) == 0
    lines = attention_step(capsys.readouterr().out)
    scale = float(re.search(r"scale = ([\d.]+) \(1/√d_k, d_k = 4\)", "\n".join(lines)).group(1))
    q_cols, q_rows, q = matrix_after(lines, "saved: Q")
    k_cols, k_rows, k = matrix_after(lines, "saved: K")
    s_cols, s_rows, s = matrix_after(lines, "inside: S =")
    p_cols, p_rows, p = matrix_after(lines, "inside: P =")
    assert q.shape == k.shape == (11, 4) and q_rows == k_rows == TOKENS and q_cols == ["0", "1", "2", "3"]
    assert s.shape == p.shape == (11, 11) and s_rows == s_cols == p_rows == p_cols == TOKENS
    causal = np.tril(np.ones((11, 11), dtype=bool))
    assert np.isneginf(s[~causal]).all() and (p[~causal] == 0).all()
    # each printed number carries 4 significant digits: S from the printed Q and K agrees to ~1e-3
    np.testing.assert_allclose(scale * (q @ k.T)[causal], s[causal], rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-3)
    shown = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(shown / shown.sum(axis=1, keepdims=True), p, atol=1e-3)
    assert not any("[batch 0, head 0]" in line or "…" in line for line in lines)    # head 1, whole


def test_a_cut_matrix_says_how_to_see_it_whole(model_folder, capsys):
    assert main(["step", "--model", str(model_folder), "--text", TEXT, "--head", "1", "--all"]) == 0
    lines = attention_step(capsys.readouterr().out)
    q = lines.index("  saved: Q   [value]")
    assert lines[q + 1].strip().startswith("176 numbers, shape (1, 4, 11, 4)")
    assert lines[q + 2].strip() == ("(the first and last 3 rows and columns of each matrix only; --whole "
                                    "prints every row and column)")
    columns, rows, _ = matrix_after(lines, "inside: P =")
    assert rows == columns == TOKENS[:3] + ["…"] + TOKENS[-3:]
    assert main(["step", "--model", str(model_folder), "--text", TEXT, "--whole", "8", "--all"]) == 0
    out = capsys.readouterr().out
    assert "(the first and last 3 rows and columns of each matrix only; larger than --whole 8: a larger N" \
        in out
    with pytest.raises(SystemExit, match="2"):
        main(["step", "--model", str(model_folder), "--text", TEXT, "--whole", "0", "--all"])
    assert "--whole: N must be at least 1, got 0" in capsys.readouterr().err


def test_whole_without_head_prints_every_head_and_a_vector_whole():
    array = np.arange(2 * 3 * 11 * 11, dtype=np.float64).reshape(2, 3, 11, 11)
    lines = format_array(array, "P", tuple(TOKENS), whole=math.inf)
    captions = [line.strip() for line in lines if line.strip().startswith("[")]
    assert captions == [f"[batch {b}, head {h}]" for b in range(2) for h in range(3)]
    assert len(lines) == 1 + 6 * (1 + 1 + 11) and "first:" not in lines[0]
    last = lines[-1].split()
    assert last[0] == "." and number(last[-1]) == array[1, 2, 10, 10]
    vector = format_array(np.arange(100.0), "b", None, whole=100)
    assert vector[-1].split() == [format_number(v) for v in np.arange(100.0)]
    assert format_array(np.arange(100.0), "b", None)[1].strip() == \
        "(the first 4 numbers only; --whole prints every row and column)"


def test_the_graph_draws_whole_grids_and_only_the_head_asked_for(model_folder, tmp_path, capsys):
    model, tokenizer = load_pretrained(model_folder)
    example = text_example(model, tokenizer, TEXT, head=-1)
    assert example.head == 3                                        # -1: the last head
    example.loss.backward()
    q = next(t for t in _tensors(example.loss) if t.name == "Q" and t.ndim == 4)
    whole = emit(collect(example.loss, tokens=example.tokens, head=3, whole=math.inf)).source
    label = re.search(r'label="\{Q\|\(1, 4, 11, 4\) float32\|(.*?)"', whole).group(1)
    assert "value [batch 0, head 3]" in label and "head 2]" not in label
    header, *columns = re.findall(r"\{([^{}]*)\}", label)[:5]
    assert header.split("|") == ["", *TOKENS]                       # row labels: the tokens
    for j, column in enumerate(columns):
        cells = column.split("|")
        assert cells[0] == str(j)
        assert cells[1:] == [f"{float(v) + 0.0:.3g}" for v in q.numpy()[0, 3, :, j]]
    norms = emit(collect(example.loss, tokens=example.tokens, head=3)).source
    head_norm = np.linalg.norm(q.numpy()[0, 3].astype(np.float64))
    assert f"head 3: ‖value‖={head_norm:.3g}" in norms
    plain, one_head = tmp_path / "plain.svg", tmp_path / "head.svg"
    assert main(["graph", "--model", str(model_folder), "--text", TEXT, "--out", str(plain)]) == 0
    assert main(["graph", "--model", str(model_folder), "--text", TEXT, "--head", "1", "--out",
                 str(one_head)]) == 0
    out = capsys.readouterr().out
    assert "--head 1: a tensor with a head axis shows head 1 only" in out
    assert "--whole draws every number" in out
    assert plain.read_bytes() != one_head.read_bytes() and "head 1: ‖value‖=" in one_head.read_text()


def _tensors(loss):
    from tinygrad_attn.engine import toposort
    return toposort(loss)


def test_the_explorer_sends_whole_matrices_of_the_head_asked_for(model_folder):
    model, tokenizer = load_pretrained(model_folder)
    example = text_example(model, tokenizer, TEXT, head=1)
    steps = list(backprop_steps(example.loss, tokens=example.tokens, head=1, whole=math.inf))
    attention = next(s for s in steps if s.op == "scaled_dot_product_attention")
    p = next(i.array for i in attention.insides if i.symbol == "P")
    sent = array_json(p, "P", example.tokens, head=1, whole=math.inf)
    assert sent["numbers"] and sent["head"] == 1 and sent["full_shape"] == [1, 4, 11, 11]
    assert sent["shape"] == [1, 11, 11] and sent["captions"] == ["batch 0, head 1"]
    assert sent["rows"] == sent["cols"] == TOKENS
    assert sent["data"] == p[0, 1].astype(np.float64).ravel().tolist()
    large = np.arange(40 * 50.0).reshape(40, 50)
    assert "corners" in array_json(large, "x", None) and not array_json(large, "x", None)["numbers"]
    whole = array_json(large, "x", None, whole=50)
    assert whole["numbers"] and "corners" not in whole and whole["shape"] == [40, 50]
    assert "corners" in array_json(large, "x", None, whole=45)          # 50 columns > 45


def test_zero_notes_name_the_matrix_as_printed(model_folder):
    model, tokenizer = load_pretrained(model_folder)
    example = text_example(model, tokenizer, TEXT, head=2)
    attention = next(s for s in backprop_steps(example.loss, tokens=example.tokens, head=2)
                     if s.op == "scaled_dot_product_attention")
    assert not any("head 0" in note or "head 1" in note or "head 3" in note for note in attention.notes)
    last = [n for n in attention.notes
            if n.startswith("row '.' (position 10) of dP is 0 in [batch 0, head 2]")]
    assert len(last) == 1 and "the last position, whose next token the loss does not predict" in last[0]
    first = [n for n in attention.notes if n.startswith("row 'the' (position 0) of dS is 0")]
    assert len(first) == 1 and "in [batch 0, head 2]" in first[0]       # the first query sees itself only
    dp = next(i.array for i in attention.insides if i.symbol == "dP")
    assert not dp[0, :, 10].any()                                      # what the note says
    every_head = text_example(model, tokenizer, TEXT)
    every = next(s for s in backprop_steps(every_head.loss, tokens=every_head.tokens)
                 if s.op == "scaled_dot_product_attention")
    assert any(n.startswith("row '.' (position 10) of dP is 0 in every matrix") for n in every.notes)


def test_a_one_hot_row_left_nonzero_by_rounding_says_so():
    p = np.array([[[1.0, 0.0], [0.4, 0.6]], [[1.0, 0.0], [0.5, 0.5]]])[None]      # (1, 2, 2, 2)
    dp = np.array([[[2e-3, 1e-3], [1e-3, 3e-3]], [[5e-3, 1e-3], [2e-3, 1e-3]]])[None]
    ds = np.zeros_like(p)
    ds[0, 0, 0, 0] = -4.657e-10                             # head 0: rounding; head 1: exactly 0
    ds[0, :, 1] = 1e-4
    notes = attention_zeros(p, ds, None, ("a", "b"), "dQ", dp=dp)
    assert notes[0] == ("row 'a' of dS is 0 up to float rounding in [batch 0, head 0] (largest |value| "
                        "4.657e-10), and that row of dQ = scale · dS K as small: the query sees only key 'a' "
                        "(its P row is one-hot), and dS = P ⊙ (dP − rowsum(dP ⊙ P)) = 0 when one P is 1 "
                        "and the rest 0; but D = rowsum(dO ⊙ O) is dP's entry at that key, dO · V, summed in "
                        "another order, so dP − D keeps a few units in the last place")
    assert notes[1].startswith("row 'a' of dS is 0 in [batch 0, head 1], and so is that row of dQ")
    assert len(notes) == 2
    assert attention_zeros(p, ds, None, ("a", "b"), "dQ", head=1, dp=dp) == notes[1:]
    ds[0, 0, 0, 0] = 1e-3                                    # not rounding: no note for head 0
    assert attention_zeros(p, ds, None, ("a", "b"), "dQ", dp=dp) == notes[1:]
