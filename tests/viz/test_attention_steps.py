"""Attention's backward made visible: fused and unfused attention agree, the fused step's insides
equal the matrices of the unfused graph, flash shows its own, and the stepper's text and notes
say exactly what the head example shows."""

import re
from pathlib import Path

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.viz.example_graphs import EXAMPLES

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RNG = np.random.default_rng(7)
MASKS = {
    "none": (None, False),
    "causal": (None, True),
    "bool padding": (np.array([True, True, True, False, False]), False),
    "bool + causal": (RNG.random((4, 5)) > 0.3, True),
    "float with a -inf row": (np.where(RNG.random((4, 5)) > 0.2, RNG.standard_normal((4, 5)), -np.inf),
                              False),
    "fully masked row": (np.array([[True] * 5, [False] * 5, [True, False] * 2 + [True], [True] * 5]), False),
}


def leaves(*shapes):
    return [ta.Tensor(RNG.standard_normal(s), requires_grad=True) for s in shapes]


@pytest.mark.parametrize("kind", list(MASKS))
def test_fused_and_unfused_attention_agree_in_values_and_gradients(kind):
    mask, is_causal = MASKS[kind]
    q, k, v = leaves((2, 4, 3), (2, 5, 3), (2, 5, 2))
    cotangent = RNG.standard_normal((2, 4, 2))
    results = []
    for fused in (True, False):
        for t in (q, k, v):
            t.grad = None
        out = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=is_causal, fused=fused)
        out.backward(cotangent)
        results.append([out.numpy()] + [t.grad.copy() for t in (q, k, v)])
    for fused_array, unfused_array in zip(*results):
        np.testing.assert_allclose(fused_array, unfused_array, rtol=0, atol=1e-10)


def test_unfused_attention_is_one_backward_step_per_primitive():
    q, k, v = leaves((3, 2), (3, 2), (3, 2))
    loss = (F.scaled_dot_product_attention(q, k, v, is_causal=True, fused=False)
            * ta.Tensor(RNG.standard_normal((3, 2)))).sum()
    steps = list(ta.backprop_steps(loss))
    assert [s.op for s in steps] == ["sum", "mul", "matmul", "softmax", "mul", "matmul", "transpose"]
    assert [s.name for s in steps[3:]] == ["P", "S", "Q Kᵀ", "Kᵀ"]


def test_the_fused_steps_insides_equal_the_unfused_graphs_matrices():
    """Two heads (MultiHeadAttention), causal: S, P, dP, dS, dQ, dK, dV per head from the fused
    step equal the values and gradients of the tensors the unfused graph builds."""
    ta.set_default_dtype(np.float64)
    try:
        fused = EXAMPLES["block"](fused=True)
        unfused = EXAMPLES["block"](fused=False)
    finally:
        ta.set_default_dtype(np.float32)
    fused_steps = list(ta.backprop_steps(fused.loss))
    attention = next(s for s in fused_steps if s.op == "scaled_dot_product_attention")
    assert [i.symbol for i in attention.insides] == ["S", "P", "dP", "D", "dS", "dQ", "dK", "dV"]
    assert [i.kind for i in attention.insides] == ["value"] * 2 + ["gradient", "value"] + ["gradient"] * 4
    insides = {i.symbol: i.array for i in attention.insides}
    assert insides["P"].shape == (1, 2, 3, 3)
    by_name = {}
    for step in ta.backprop_steps(unfused.loss):
        by_name.setdefault(step.name, step)
    s_step, p_step = by_name["S"], by_name["P"]
    np.testing.assert_allclose(insides["P"], p_step.tensor.numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(insides["dP"], p_step.grad, rtol=0, atol=1e-6)
    np.testing.assert_allclose(insides["dS"], s_step.grad, rtol=0, atol=1e-6)
    np.testing.assert_allclose(insides["D"], (p_step.grad * p_step.tensor.numpy()).sum(-1, keepdims=True),
                               rtol=0, atol=1e-6)              # D = rowsum(dP ⊙ P)
    causal = np.tril(np.ones((3, 3), bool))
    np.testing.assert_allclose(insides["S"][..., causal], s_step.tensor.numpy()[..., causal], atol=1e-6)
    assert np.isneginf(insides["S"][..., ~causal]).all()
    for symbol, name in (("dQ", "Q"), ("dK", "K"), ("dV", "V")):
        np.testing.assert_allclose(insides[symbol], by_name[name].grad, rtol=0, atol=1e-6)


def test_flash_attention_shows_its_own_insides_equal_to_the_plain_kernels():
    q, k, v = leaves((5, 3), (5, 3), (5, 2))
    cotangent = RNG.standard_normal((5, 2))
    plain = list(ta.backprop_steps(F.scaled_dot_product_attention(q, k, v, is_causal=True), cotangent))[0]
    flash = list(ta.backprop_steps(F.flash_attention(q, k, v, is_causal=True, block_size=2), cotangent))[0]
    assert flash.formula != plain.formula and "P_B = exp(S_B − L)" in flash.formula[0]
    assert flash.formula[3:] == plain.formula[3:] == (None, None)          # the masks take no gradient
    assert [i.symbol for i in flash.insides] == ["L", "D", "S", "P", "dP", "dS", "dQ", "dK", "dV"]
    plain_insides = {i.symbol: i.array for i in plain.insides}
    flash_insides = {i.symbol: i.array for i in flash.insides}
    for symbol in ("S", "P", "dP", "dS", "dQ", "dK", "dV"):     # the textbook walk meets every block
        np.testing.assert_allclose(flash_insides[symbol], plain_insides[symbol], rtol=0, atol=1e-12)
    np.testing.assert_allclose(flash_insides["D"][:, 0], (cotangent * flash.tensor.numpy()).sum(-1))


def test_backward_records_no_insides_unless_stepping():
    q, k, v = leaves((3, 2), (3, 2), (3, 2))
    out = F.scaled_dot_product_attention(q, k, v)
    out.backward(np.ones((3, 2)))
    assert out.node.ctx.trace is None


def test_head_example_step_counts_fused_and_unfused():
    fused = list(ta.backprop_steps(EXAMPLES["head"]().loss))
    unfused = list(ta.backprop_steps(EXAMPLES["head"](fused=False).loss))
    assert (len(fused), len(unfused)) == (7, 11)
    assert sum(s.op in ("reshape", "transpose") for s in fused) == 0
    assert [(s.op, s.name) for s in unfused if s.name in ("O", "P", "S", "Q Kᵀ", "Kᵀ")] == [
        ("matmul", "O"), ("softmax", "P"), ("mul", "S"), ("matmul", "Q Kᵀ"), ("transpose", "Kᵀ")]
    assert sorted(s.op for s in fused if s.op != "scaled_dot_product_attention") == sorted(
        s.op for s in unfused if s.name not in ("O", "P", "S", "Q Kᵀ", "Kᵀ"))


def test_the_attention_step_of_the_head_example_reads_exactly_as_the_golden_file():
    example = EXAMPLES["head"]()
    step = next(s for s in ta.backprop_steps(example.loss, tokens=example.tokens)
                if s.op == "scaled_dot_product_attention")
    assert str(step) + "\n" == (GOLDEN / "head_attention_step.txt").read_text()


def test_zero_notes_appear_where_expected_and_nowhere_else():
    example = EXAMPLES["head"]()
    steps = list(ta.backprop_steps(example.loss, tokens=example.tokens))
    noted = {s.index: s.notes for s in steps if s.notes}
    by_op = {s.index: (s.op, s.name) for s in steps}
    assert {i: by_op[i] for i in noted} == {
        2: ("scaled_dot_product_attention", "O"), 4: ("linear", "K"), 6: ("getitem", "X")}
    attention, key_bias, embedding = noted[2], noted[4], noted[6]
    assert attention[0].startswith("P and dS are exactly 0 at the 3 masked cells (scores set to −inf")
    assert attention[1].startswith("row 'the' of dS is 0, and so is that row of dQ")
    assert len(attention) == 2
    assert key_bias == (key_bias[0],) and key_bias[0].startswith("dL/d(k_proj.bias) is 0 up to rounding")
    assert embedding[0].startswith("dL/d(X) is the sum of the 3 gradients its consumers sent: step 3")
    assert "dL/d(embed.weight) is 0 in rows [3]" in embedding[1]
    parts = steps[6].parts
    assert len(parts) == 3
    np.testing.assert_allclose(sum(g for _, g in parts), steps[6].grad, rtol=1e-6)
    np.testing.assert_array_equal(steps[2].insides[4].array[0], 0)          # dS row 'the'
    assert np.abs(steps[4].sent[2]).max() < 1e-6 * np.abs(steps[4].grad).max()   # k_proj.bias


def test_arrays_print_whole_with_token_labels_and_large_ones_as_a_summary():
    example = EXAMPLES["head"]()
    text = "\n".join(map(str, ta.backprop_steps(example.loss, tokens=example.tokens)))
    assert re.search(r"^ +the +1\.0000 +0 +0$", text, re.M)      # P's first row, labelled
    assert "inside: dS = P ⊙ (dP − D)   [gradient dL/dS]" in text
    assert "inside: D = rowsum(dP ⊙ P) = rowsum(dO ⊙ O), one number per query   [value of D]" in text
    assert "…" not in text                                        # every array here is whole
    chain = list(ta.backprop_steps((ta.randn(10, 10, requires_grad=True).exp() * 2).sum()))
    assert "100 numbers, shape (10, 10): ‖·‖ =" in str(chain[1])


def parse_step(text: str) -> tuple[dict[str, np.ndarray], float]:
    """Every matrix a printed step shows, by its symbol (saved Q, K, V, O, the keep mask; dO
    arriving; the insides S, P, dP, D, dS, dQ, dK, dV), and the scale, read from the text alone."""
    matrices: dict[str, np.ndarray] = {}
    symbol, rows = None, []
    for line in text.splitlines() + [""]:
        if line.startswith("      ") and symbol is not None:
            rows.append(line.split()[1:])        # the row label, then the numbers
            continue
        if symbol is not None and rows:
            matrices[symbol] = np.array([[float(v.replace("−", "-")) for v in row] for row in rows[1:]])
        rows, symbol = [], None
        found = (re.match(r"  saved: (\w+)", line) or re.match(r"  inside: (\w+) =", line)
                 or re.match(r"  gradient arriving, dL/d\((\w+)\)", line))
        if found:
            symbol = {"O": "dO"}.get(found.group(1), found.group(1)) if "arriving" in line else found.group(1)
            if line.startswith("  saved: the keep mask"):
                symbol = "keep"
    scale = float(re.search(r"with scale = ([\d.]+)", text).group(1))
    return matrices, scale


def test_every_number_of_the_attention_step_can_be_recomputed_from_its_printed_text():
    """The learner's check: from the printed step alone (parsed), S, P, D and every gradient
    follow from the printed Q, K, V, O, dO, mask and scale, within the 4 printed decimals."""
    example = EXAMPLES["head"]()
    step = next(s for s in ta.backprop_steps(example.loss, tokens=example.tokens)
                if s.op == "scaled_dot_product_attention")
    m, scale = parse_step(str(step))
    q, k, v, out, d_out, keep = m["Q"], m["K"], m["V"], m["O"], m["dO"], m["keep"].astype(bool)
    s = np.where(keep, scale * q @ k.T, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    recomputed = {"S": s, "P": p, "dP": d_out @ v.T, "D": (d_out * out).sum(axis=1, keepdims=True)}
    recomputed["dS"] = m["P"] * (m["dP"] - m["D"])           # each from the printed matrices
    recomputed.update(dQ=scale * m["dS"] @ k, dK=scale * m["dS"].T @ q, dV=m["P"].T @ d_out)
    assert sorted(recomputed) == sorted(set(m) - {"Q", "K", "V", "O", "dO", "keep"})
    for symbol, value in recomputed.items():
        np.testing.assert_allclose(m[symbol], value, atol=1e-3, err_msg=symbol)
    assert m["O"] == pytest.approx(m["P"] @ v, abs=1e-3)


def test_two_threads_step_one_graph_each_with_its_own_insides():
    """backprop_steps traced in two threads at once over one attention graph: each pass gets its
    own insides (a context of its own), both equal to one pass alone."""
    import threading

    q, k, v = leaves((4, 3), (4, 3), (4, 2))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    cotangent = RNG.standard_normal((4, 2))
    alone = {i.symbol: i.array for i in list(ta.backprop_steps(out, cotangent))[0].insides}
    results, errors = [], []

    def step():
        try:
            for _ in range(20):
                first = list(ta.backprop_steps(out, cotangent))[0]
                results.append({i.symbol: i.array for i in first.insides})
        except Exception as error:          # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=step) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 40
    for insides in results:
        assert insides.keys() == alone.keys()
        for symbol, array in insides.items():
            np.testing.assert_array_equal(array, alone[symbol])
