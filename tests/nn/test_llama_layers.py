"""The Llama-style layers against NumPy: RMSNorm (PyTorch's rms_norm formula), SiLU, SwiGLU, the
TinyTransformer options, and cached decoding with RoPE, grouped-query attention and a window."""

import numpy as np
import pytest
from test_transformer import full_recompute

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn
from tinygrad_attn.errors import ShapeError


def np_rms_norm(x, w=None, eps=1e-6):
    """torch.nn.functional.rms_norm's definition: x · rsqrt(mean(x², last axis) + eps) · w."""
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def test_rms_norm_values_and_gradients(rng):
    x, w = rng.standard_normal((2, 3, 6)), rng.standard_normal(6)
    for weight, eps in ((None, 1e-6), (w, 0.3)):
        out = F.rms_norm(ta.Tensor(x), None if weight is None else ta.Tensor(weight), eps=eps)
        assert out.op == "rms_norm"
        np.testing.assert_allclose(out.data, np_rms_norm(x, weight, eps), rtol=1e-12)
    tx, tw = ta.Tensor(x, requires_grad=True), ta.Tensor(w, requires_grad=True)
    assert ta.gradcheck(lambda a, b: F.rms_norm(a, b, eps=1e-6), [tx, tw])
    layer = nn.RMSNorm(6)
    np.testing.assert_allclose(layer(ta.Tensor(x.astype(np.float32))).data, np_rms_norm(x), rtol=1e-5)
    assert [name for name, _ in layer.named_parameters()] == ["weight"]


def test_rms_norm_refusals(rng):
    with pytest.raises(ShapeError, match=r"rms_norm: weight of shape \(4,\) does not match the last axis"):
        F.rms_norm(ta.Tensor(rng.standard_normal((2, 3))), ta.Tensor(rng.standard_normal(4)))
    with pytest.raises(ValueError, match="RMSNorm: eps must be a finite number >= 0"):
        nn.RMSNorm(4, eps=-1.0)


def test_silu_and_swiglu(rng):
    x = rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(F.silu(ta.Tensor(x)).data, x / (1 + np.exp(-x)), rtol=1e-12)
    mlp = nn.SwiGLU(4, 6)
    names = [name for name, _ in mlp.named_parameters()]
    assert names == ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]    # Hugging Face Llama's
    w_gate, w_up, w_down = (p.numpy().astype(np.float64)
                            for p in (mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight))
    gate = x @ w_gate
    expected = (gate / (1 + np.exp(-gate)) * (x @ w_up)) @ w_down
    np.testing.assert_allclose(mlp(ta.Tensor(x.astype(np.float32))).data, expected, rtol=1e-4, atol=1e-6)


def test_tiny_transformer_options_and_refusals():
    model = nn.TinyTransformer(vocab_size=7, d_model=16, num_heads=4, num_layers=1, max_len=8, norm="rms",
                               mlp="swiglu", positions="rope", n_kv_heads=2)
    names = [name for name, _ in model.named_parameters()]
    assert "pos_emb.weight" not in names and "blocks.0.mlp.up_proj.weight" in names
    assert model.blocks[0].attn.k_proj.weight.shape == (16, 8)               # 2 kv heads of width 4
    assert model.blocks[0].mlp.gate_proj.weight.shape == (16, 48)                  # 8/3 · 16 → 48
    assert isinstance(model.ln_f, nn.RMSNorm)
    assert model(np.array([[1, 2, 3]])).shape == (1, 3, 7)
    with pytest.raises(ValueError, match=r"TinyTransformer: positions must be one of \('learned', 'rope'\)"):
        nn.TinyTransformer(7, 16, positions="sinusoid")
    with pytest.raises(ValueError, match="num_heads 4 is not divisible by n_kv_heads 3"):
        nn.MultiHeadAttention(16, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="window must be an integer >= 1, got 0"):
        nn.MultiHeadAttention(16, 4, window=0)
    with pytest.raises(ValueError, match="rope needs an even d_head"):
        nn.MultiHeadAttention(12, 4, rope=True)
    with pytest.raises(ValueError, match="window=3 needs is_causal=True"):
        nn.MultiHeadAttention(16, 4, window=3)(ta.randn(1, 5, 16))
    with pytest.raises(ValueError, match="rope is for self-attention"):
        nn.MultiHeadAttention(16, 4, rope=True)(ta.randn(1, 5, 16), context=ta.randn(1, 2, 16))


@pytest.mark.parametrize("window", [None, 3])
def test_cached_generation_equals_recomputation_with_rope_and_gqa(window):
    model = nn.TinyTransformer(vocab_size=11, d_model=16, num_heads=4, num_layers=2, max_len=14, norm="rms",
                               mlp="swiglu", positions="rope", n_kv_heads=2, window=window)
    for p in model.parameters():        # larger weights: varied tokens, not one repeated argmax
        p.data = p.data * 3
    prompt = np.array([[3, 1, 4, 1, 5], [1, 5, 9, 2, 6]])
    expected = full_recompute(model, prompt, 9)
    assert len(np.unique(expected[:, 5:])) > 2
    np.testing.assert_array_equal(model.generate(prompt, max_new_tokens=9).numpy(), expected)


def test_the_window_and_rope_change_what_the_model_computes():
    ids = np.array([[3, 1, 4, 1, 5, 9]])
    outputs = {}
    for window in (None, 2):
        ta.manual_seed(0)
        model = nn.TinyTransformer(11, 16, 4, 1, max_len=8, positions="rope", n_kv_heads=1, window=window)
        outputs[window] = model(ids).numpy()
    np.testing.assert_array_equal(outputs[2][0, :2], outputs[None][0, :2])   # rows 0, 1 see ≤ 2 keys
    assert not np.allclose(outputs[2][0, 2:], outputs[None][0, 2:])


def test_dropout_on_grouped_weights_multiplies_each_kv_head_with_its_group(monkeypatch):
    """With the dropout draw replaced by the identity, the training path (weights, then P V by
    group) must give the evaluation path's output exactly (up to rounding)."""
    mha = nn.MultiHeadAttention(16, 4, dropout=0.5, n_kv_heads=2)
    x = ta.randn(2, 5, 16)
    mha.eval()
    expected = mha(x, is_causal=True).numpy()
    monkeypatch.setattr(F, "dropout", lambda weights, p: weights)
    mha.train()
    np.testing.assert_allclose(mha(x, is_causal=True).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_tied_head_gradient_is_both_uses_summed(rng):
    """A tied head's logits = x Eᵀ: E's gradient is the head's Gᵀ x plus the embedding's scatter
    of the rows it looked up, each checked against NumPy."""
    emb = nn.Embedding(7, 4)
    emb.weight.data[:] = rng.standard_normal((7, 4))
    head = nn.TiedHead(emb)
    ids = np.array([[1, 3, 3, 6]])
    logits = head(emb(ids))
    cotangent = rng.standard_normal(logits.shape)
    (logits * ta.Tensor(cotangent)).sum().backward()
    E, G = emb.weight.data, cotangent[0]
    expected = G.T @ E[ids[0]]                                      # the head's use: Gᵀ x
    np.add.at(expected, ids[0], G @ E)                              # the lookup's: dx = G E, scattered
    np.testing.assert_allclose(emb.weight.grad, expected, rtol=1e-6, atol=1e-6)
    E64 = ta.Tensor(rng.standard_normal((7, 4)), requires_grad=True)
    assert ta.gradcheck(lambda e: F.linear(e[ta.Tensor(ids)], e.swapaxes(0, 1)), [E64])


def test_linear_makes_a_transposed_weights_gradient_in_its_layout(rng):
    """linear's dW for a Fortran-ordered weight (Eᵀ of a tied head) comes out Fortran-ordered, so
    that the transpose back to E is C-ordered and adds to the lookup's gradient row by row; the
    values equal those for the same weight C-ordered."""
    from tinygrad_attn.ops.base import Context
    from tinygrad_attn.ops.registry import REGISTRY

    linear = REGISTRY["linear"]
    x, grad = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 5))
    w = rng.standard_normal((4, 5))
    grads = {}
    for layout, weight in (("C", w), ("F", np.asfortranarray(w))):
        ctx = Context(np, (True, True, False), {})
        linear.forward(ctx, x, weight, None)
        grads[layout] = linear.backward(ctx, grad)
    np.testing.assert_allclose(grads["F"][1], grads["C"][1], rtol=1e-12)
    assert grads["F"][1].flags.f_contiguous and grads["C"][1].flags.c_contiguous
