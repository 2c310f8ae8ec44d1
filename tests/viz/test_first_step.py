"""A first step a learner can redo on paper: `step --example mlp` states the architecture, names
the input x, prints every parameter (the forward recomputes from the printed numbers alone) and
shows plain cross-entropy when smoothing is off; every number has four significant digits; 4-D
arrays are labelled by their real layout; the llama example prints its embeddings, head bias and
RoPE input; the unfused llama step says where dK and dV are summed over a query-head group."""

import re

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.commands import cli
from tinygrad_attn.viz.example_graphs import EXAMPLES
from tinygrad_attn.viz.layout import HEAD_MAJOR, TOKEN_MAJOR, axis_names
from tinygrad_attn.viz.matrices import format_number


def printed_matrix(text, title):
    """The numbers of the matrix printed under the line starting with `title` (its header row of
    column labels skipped, each row's label dropped)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("    ") or line.startswith("     " * 3 + "z"):
            break
        numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])", line)
        if not numbers:
            break
        rows.append([float(n) for n in numbers])
    return np.array(rows)


def test_the_mlp_intro_states_the_architecture_and_every_parameter(capsys):
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("example 'mlp': A two-layer MLP (3 → 4 → 2, ReLU) classifying 4 points "
                                   "into 2 classes.")
    assert "model: 3 input features → 4 hidden units (ReLU) → 2 class logits" in out
    model = EXAMPLES["mlp"]().model
    printed = {name: printed_matrix(out, f"value of {name} ") for name in
               ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")}
    for name, p in model.named_parameters():
        assert printed[name].shape == np.atleast_2d(p.numpy()).shape
        np.testing.assert_allclose(printed[name], np.atleast_2d(p.numpy()), rtol=5e-4, atol=5e-5)
    # The forward, redone from the printed numbers only, gives the printed probabilities and loss.
    x = printed_matrix(out, "input, value of x")
    z = x @ printed["fc1.weight"] + printed["fc1.bias"]
    logits = np.maximum(z, 0) @ printed["fc2.weight"] + printed["fc2.bias"]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, printed_matrix(out, "predicted probabilities"), atol=2e-4)
    loss = float(re.search(r"^loss = ([\d.]+);", out, re.M).group(1))
    assert -np.log(p[np.arange(4), [0, 1, 1, 0]]).mean() == pytest.approx(loss, abs=2e-4)


def test_the_mlp_steps_name_x_and_show_plain_cross_entropy(capsys):
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    out = capsys.readouterr().out
    assert "formula  dlogits = (softmax(logits) − one_hot(target)) ⊙ dℓ / n_counted" in out
    assert "ε" not in out.split("step 1:")[0].split("step 0:")[1]
    assert "→ input 0 x (4, 3): no gradient" in out and "const" not in out
    assert "step 3: linear → z (4, 4)  (in fc1)" in out
    assert "note: dL/dz is 0 at the 6 position(s) where z ≤ 0: relu's slope is 0 there" in out
    assert "-0.002352" in out and "0.009633" in out          # dL/d(hidden), four significant digits
    # what a linear step saved, and which input it is
    assert "saved: x (the input) = hidden   [value]" in out
    assert "saved: W (the weight matrix) = fc2.weight   [value]" in out
    assert "saved: x (the input)   [value]" in out           # fc1's input is x itself: no "= x"


def test_label_smoothing_keeps_its_own_formula():
    logits = ta.Tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    plain, smoothed = (next(iter(ta.backprop_steps(F.cross_entropy(logits, [0, 2, 1], label_smoothing=e))))
                       for e in (0.0, 0.1))
    assert plain.formula[0] == "dlogits = (softmax(logits) − one_hot(target)) ⊙ dℓ / n_counted"
    assert smoothed.formula[0] == ("dlogits = (softmax(logits) − (1 − ε)·one_hot(target) − ε/C) ⊙ dℓ "
                                   "/ n_counted")


@pytest.mark.parametrize("value, text", [
    (0.1004, "0.1004"), (-0.0024061, "-0.002406"), (0.032344, "0.03234"), (0.00091234, "0.0009123"),
    (3.1234e-05, "3.123e-05"), (-3e-05, "-3.000e-05"), (12.34567, "12.3457"), (1.0, "1.0000"),
    (0.0099999999, "0.01000"), (0.099996, "0.1000"), (0.0, "0"), (-np.inf, "−inf"), (np.nan, "nan")])
def test_every_number_has_four_significant_digits(value, text):
    assert format_number(value) == text


def test_axis_names_follow_the_ops_that_made_the_array():
    x = ta.Tensor(np.zeros((1, 2, 8)), requires_grad=True)     # ops record their graph
    token_major = x.reshape(1, 2, 2, 4)                  # (B, T, H, D) with T = H: shape cannot tell
    head_major = token_major.swapaxes(1, 2)
    assert axis_names(token_major) == TOKEN_MAJOR and axis_names(head_major) == HEAD_MAJOR
    assert axis_names(head_major * 2.0) == HEAD_MAJOR and axis_names(head_major.swapaxes(1, 2)) == TOKEN_MAJOR
    assert axis_names(ta.Tensor(np.zeros((1, 2, 2, 4)))) == HEAD_MAJOR and axis_names(x) is None


def llama_text(fused):
    example = EXAMPLES["llama"](fused=fused)
    steps = list(ta.backprop_steps(example.loss, tokens=example.tokens))
    return example, steps


def test_token_major_arrays_are_labelled_by_token_with_heads_as_rows():
    _, steps = llama_text(fused=False)
    merge = next(s for s in steps if s.op == "transpose" and s.output_shape == (1, 3, 2, 4))
    text = str(merge)
    first = text.split("gradient arriving")[1]
    assert "[batch 0, token 'the']" in first and "[batch 0, token 'sat']" in first
    assert re.search(r"^\s+head 0 ", first, re.M) and re.search(r"^\s+head 1 ", first, re.M)
    assert "head 2" not in text                          # 2 query heads: no third head anywhere
    assert "[batch 0, head 1]" in text.split("→ input 0")[1]   # what it sends on is head-major


def test_the_llama_intro_prints_embeddings_and_head_bias_and_rope_shows_its_input():
    example, steps = llama_text(fused=True)
    net = example.model
    np.testing.assert_allclose(printed_matrix(example.intro, "value of tok_emb.weight"),
                               net.tok_emb.weight.numpy(), rtol=5e-4, atol=5e-5)
    np.testing.assert_allclose(printed_matrix(example.intro, "value of head.bias")[0], net.head.bias.numpy(),
                               rtol=5e-4, atol=5e-5)
    rope_k = next(s for s in steps if s.op == "rope" and s.name == "RoPE(K)")
    inside = {i.symbol: i.array for i in rope_k.insides}
    assert list(inside) == ["x", "θ", "y", "dx"]
    np.testing.assert_allclose(inside["x"], rope_k.tensor.node.parents[0].data, rtol=1e-5, atol=1e-6)


def test_the_unfused_llama_step_says_dk_and_dv_are_summed_over_the_query_head_group():
    _, steps = llama_text(fused=False)
    for name in ("V (one per group)", "Kᵀ"):
        step = next(s for s in steps if s.op == "matmul" and s.input_names[1] == name)
        [note] = [n for n in step.notes if n.startswith(f"dB for {name} is a sum")]
        assert "broadcast to the 2 query heads that share kv head 0" in note
        column = int(re.search(r"column (\d+):", note).group(1))
        a, b = (p.data.astype(np.float64) for p in step.tensor.node.parents)
        parts = np.swapaxes(a, -1, -2) @ step.grad                     # one Aᵀ dC per query head
        terms = [float(t.strip("()")) for t in re.search(r"column \d+: (.+) = ", note).group(1).split(" + ")]
        np.testing.assert_allclose(terms, parts[0, 0, :, 0, column], rtol=5e-4, atol=1e-6)
        total = float(note.rsplit(" = ", 1)[1])
        assert total == pytest.approx(float(step.sent[1][0, 0, 0, 0, column]), rel=5e-4)
        np.testing.assert_allclose(step.sent[1], parts.sum(axis=2, keepdims=True), rtol=1e-4, atol=1e-6)
