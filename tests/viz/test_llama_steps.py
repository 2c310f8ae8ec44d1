"""The `llama` example in the stepper: the RoPE step shows the angles, the rotated rows and the
gradient rotated back; the attention step names the query heads of each kv head and writes the
shared head's dK and dV as the sum of their parts; `step`, `graph` and `explore` accept it."""

import re

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn.commands.cli import main
from tinygrad_attn.viz.example_graphs import EXAMPLES


def llama_steps(fused=True):
    example = EXAMPLES["llama"](fused=fused)
    return example, list(ta.backprop_steps(example.loss, tokens=example.tokens))


def test_rope_step_shows_angles_rotated_rows_and_the_gradient_rotated_back():
    _, steps = llama_steps()
    rope_k = next(s for s in steps if s.op == "rope" and s.name == "RoPE(K)")
    inside = {i.symbol: i.array for i in rope_k.insides}
    np.testing.assert_allclose(inside["θ"], np.arange(3)[:, None] * 10000.0 ** (-np.arange(2) / 2)[None, :])
    np.testing.assert_array_equal(inside["y"], rope_k.tensor.data)
    theta = inside["θ"]
    dy = rope_k.grad
    back = np.concatenate([dy[..., :2] * np.cos(theta) + dy[..., 2:] * np.sin(theta),
                           dy[..., 2:] * np.cos(theta) - dy[..., :2] * np.sin(theta)], axis=-1)
    np.testing.assert_allclose(rope_k.sent[0], back, rtol=1e-5, atol=1e-7)
    assert rope_k.sent[0] is inside["dx"]
    assert "dx = R(−θ)·dy" in rope_k.formula[0]


def test_attention_step_sums_the_shared_kv_head_over_its_query_heads():
    _, steps = llama_steps()
    attention = next(s for s in steps if s.op == "scaled_dot_product_attention")
    inside = {i.symbol: i.array for i in attention.insides}
    assert inside["dK"].shape == (1, 1, 2, 3, 4)                       # one part per query head
    np.testing.assert_allclose(attention.sent[1], inside["dK"].sum(axis=2, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(attention.sent[2], inside["dV"].sum(axis=2, keepdims=True), rtol=1e-5)
    assert "kv head 0 is read by query heads 0, 1" in attention.notes
    note = next(n for n in attention.notes if n.startswith("dK of a shared kv head"))
    first, second, total = (float(x) for x in re.search(r": (\S+) \+ (\S+) = (\S+)$", note).groups())
    assert abs(first + second - total) < 2e-4
    text = str(attention)
    assert "[batch 0, kv head 0, query head 1]" in text                # the parts, then their sum:
    assert "dL/d(K (one per group)):\n      formula  dK = scale · dSᵀ Q\n      [batch 0, kv head 0]\n" in text


def test_fused_and_unfused_llama_give_the_same_gradients():
    fused, _ = llama_steps(fused=True)
    unfused, _ = llama_steps(fused=False)
    for (name, a), (_, b) in zip(fused.model.named_parameters(), unfused.model.named_parameters()):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6, err_msg=name)


def test_step_graph_and_explore_accept_the_llama_example(tmp_path, capsys):
    assert main(["step", "--example", "llama", "--all"]) == 0
    out = capsys.readouterr().out
    assert "step 21: rope → RoPE(K)" in out and "inside: θ[t, i] = position_t · base^(−2i/D)" in out
    assert main(["graph", "--example", "llama", "--out", str(tmp_path / "llama.svg")]) == 0
    assert main(["explore", "--example", "llama", "--out", str(tmp_path / "llama.html")]) == 0
    assert "rope" in (tmp_path / "llama.svg").read_text()
