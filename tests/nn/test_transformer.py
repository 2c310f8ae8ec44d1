"""Multi-head attention, the transformer block and TinyTransformer against the paper's equations
written out in NumPy, gradient checks end to end in float64, and KV-cached greedy decoding."""

import math

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import nn


@pytest.fixture
def float64():
    ta.set_default_dtype(np.float64)
    yield
    ta.set_default_dtype(np.float32)


def np_linear(layer, a):
    return a @ layer.weight.data + (0 if layer.bias is None else layer.bias.data)


def np_mha(mha, x, context, mask=None, is_causal=False):
    """The paper's equations head by head: softmax(QₕKₕᵀ/√d + mask)Vₕ, concatenated, times W_O.
    A bool mask keeps the True positions; a float mask is added to the scores."""
    q = np_linear(mha.q_proj, x)
    k, v = np_linear(mha.k_proj, context), np_linear(mha.v_proj, context)
    d, n_heads = mha.d_head, mha.num_heads
    if mask is not None:                                    # to (…, H, Tq, Tk), then per head
        mask = np.broadcast_to(mask, x.shape[:-2] + (n_heads, x.shape[-2], context.shape[-2]))
    heads, weights = [], []
    for h in range(n_heads):
        sl = slice(h * d, (h + 1) * d)
        s = q[..., sl] @ np.swapaxes(k[..., sl], -1, -2) / np.sqrt(d)
        if mask is not None and mask.dtype == bool:
            s = np.where(mask[..., h, :, :], s, -np.inf)
        elif mask is not None:
            s = s + mask[..., h, :, :]
        if is_causal:
            s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        heads.append(p @ v[..., sl])
        weights.append(p)
    return np_linear(mha.out_proj, np.concatenate(heads, axis=-1)), np.stack(weights, axis=-3)


def np_layer_norm(ln, x):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + ln.eps) * ln.weight.data + ln.bias.data


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def np_block(block, x, is_causal=False):
    x = x + np_mha(block.attn, np_layer_norm(block.ln1, x), np_layer_norm(block.ln1, x),
                   is_causal=is_causal)[0]
    hidden = np_gelu(np_linear(block.mlp.fc1, np_layer_norm(block.ln2, x)))
    return x + np_linear(block.mlp.fc2, hidden)


def gradcheck_module(module, fn, inputs):
    """gradcheck of fn(*inputs) with respect to the inputs and every parameter of `module`: the
    checked copies are put in the parameters' places (gradcheck perturbs its own copies)."""
    names = [name for name, _ in module.named_parameters()]

    def run(*tensors):
        for name, tensor in zip(names, tensors[len(inputs):]):
            *path, attr = name.split(".")
            owner = module
            for part in path:
                owner = owner[int(part)] if isinstance(owner, list) else getattr(owner, part)
            setattr(owner, attr, tensor)
        return fn(*tensors[:len(inputs)])

    params = [ta.Tensor(p.data, requires_grad=True) for p in module.parameters()]
    return ta.gradcheck(run, list(inputs) + params)


MHA_CASES = ["self", "causal", "cross", "bool mask", "float mask", "padding mask", "unbatched",
             "unbatched cross causal"]


def mha_case(case, rng):
    """(x, context or None, mask, is_causal) for a (2, 4, 8) input with 2 heads."""
    x = rng.standard_normal((2, 4, 8))
    context = rng.standard_normal((2, 6, 8)) if "cross" in case else None
    mask = {"bool mask": np.tril(np.ones((4, 4), bool), 1),
            "float mask": rng.standard_normal((2, 2, 4, 4)),
            "padding mask": np.array([[True] * 4, [True, True, False, False]])[:, None, None, :],
            }.get(case)
    if case.startswith("unbatched"):
        x, context = x[0], None if context is None else context[0]
    return x, context, mask, "causal" in case


@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_matches_the_paper(case, rng, float64):
    mha = nn.MultiHeadAttention(8, 2)
    x, context, mask, is_causal = mha_case(case, rng)
    out, weights = mha(ta.Tensor(x), context=None if context is None else ta.Tensor(context),
                       mask=mask, is_causal=is_causal, return_weights=True)
    expected, expected_w = np_mha(mha, x, x if context is None else context, mask, is_causal)
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_w, atol=1e-12)
    n_k = 4 if context is None else context.shape[-2]
    assert out.shape == x.shape
    assert weights.shape == ((2, 4, n_k) if x.ndim == 2 else (2, 2, 4, n_k))
    np.testing.assert_array_equal(mha(ta.Tensor(x), None if context is None else ta.Tensor(context),
                                      mask=mask, is_causal=is_causal).data, out.data)


@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_gradcheck_end_to_end(case, rng, float64):
    mha = nn.MultiHeadAttention(8, 2)
    x, context, mask, is_causal = mha_case(case, rng)
    x = ta.Tensor(x[..., :3, :], requires_grad=True)        # 3 queries keep the check quick
    inputs = [x] if context is None else [x, ta.Tensor(context, requires_grad=True)]
    mask = None if mask is None else mask[..., :3, :3] if context is None else mask[..., :3, :]

    def fn(x, context=None):
        return mha(x, context, mask=mask, is_causal=is_causal, return_weights=True)

    assert gradcheck_module(mha, fn, inputs)


def test_attention_dropout_acts_on_the_weights_and_is_differentiable(rng, float64):
    mha = nn.MultiHeadAttention(4, 2, dropout=0.5)
    x = rng.standard_normal((1, 3, 4))
    expected = np_mha(mha, x, x)[0]
    np.testing.assert_allclose(mha.eval()(ta.Tensor(x)).data, expected, atol=1e-12)
    mha.train()
    ta.manual_seed(3)
    dropped = mha(ta.Tensor(x)).data
    assert np.abs(dropped - expected).max() > 1e-3

    def fn(x):
        ta.manual_seed(3)                                   # the same dropout mask every call
        return mha(x)

    assert gradcheck_module(mha, fn, [ta.Tensor(x, requires_grad=True)])


def test_mha_errors():
    with pytest.raises(ValueError, match="d_model 6 is not divisible by num_heads 4"):
        nn.MultiHeadAttention(6, 4)
    mha = nn.MultiHeadAttention(8, 2)
    with pytest.raises(ta.ShapeError, match=r"expected x and context of shape .* got \(2, 3, 5\)"):
        mha(ta.randn(2, 3, 5))
    with pytest.raises(ta.ShapeError, match=r"got \(2, 3, 8\) and \(3, 3, 8\)"):
        mha(ta.randn(2, 3, 8), ta.randn(3, 3, 8))


@pytest.mark.parametrize("is_causal", [False, True])
def test_transformer_block_matches_numpy_and_gradchecks(is_causal, rng, float64):
    block = nn.TransformerBlock(8, 2, 16)
    for p in block.parameters():                            # LayerNorm starts at ones and zeros
        p.data = p.data + 0.1 * rng.standard_normal(p.shape)
    x = rng.standard_normal((2, 4, 8))
    np.testing.assert_allclose(block(ta.Tensor(x), is_causal=is_causal).data,
                               np_block(block, x, is_causal), atol=1e-12)
    np.testing.assert_allclose(block(ta.Tensor(x[0]), is_causal=is_causal).data,
                               np_block(block, x[0], is_causal), atol=1e-12)
    small = nn.TransformerBlock(4, 2, 4)
    assert gradcheck_module(small, lambda x: small(x, is_causal=is_causal),
                            [ta.Tensor(x[:1, :3, :4], requires_grad=True)])


def test_tiny_transformer_structure_and_values(float64):
    model = nn.TinyTransformer(vocab_size=7, d_model=8, num_heads=2, num_layers=2, max_len=5)
    assert [type(m).__name__ for m in (model.tok_emb, model.pos_emb, model.ln_f, model.head)] == \
        ["Embedding", "Embedding", "LayerNorm", "Linear"]
    assert model.blocks[0].mlp.fc1.weight.shape == (8, 32) and model.head.weight.shape == (8, 7)
    ids = np.array([[1, 6, 0, 2], [3, 3, 3, 5]])
    x = model.tok_emb.weight.data[ids] + model.pos_emb.weight.data[:4]   # positions unscaled
    for block in model.blocks:
        x = np_block(block, x, is_causal=True)
    expected = np_linear(model.head, np_layer_norm(model.ln_f, x))
    np.testing.assert_allclose(model(ids).data, expected, atol=1e-12)


def test_tiny_transformer_is_causal_and_gradchecks(rng, float64):
    model = nn.TinyTransformer(vocab_size=4, d_model=4, num_heads=2, num_layers=1, max_len=3,
                               d_ff=4)
    ids = np.array([[1, 3, 2]])
    changed = np.array([[1, 3, 0]])                         # only the last token differs
    a, b = model(ids).data, model(changed).data
    np.testing.assert_array_equal(a[:, :2], b[:, :2])
    assert np.abs(a[:, 2] - b[:, 2]).max() > 1e-6
    assert gradcheck_module(model, lambda: model(ids), [])


def test_tiny_transformer_errors():
    model = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=4)
    with pytest.raises(ValueError, match="sequence of length 5 is longer than max_len 4"):
        model(np.zeros((1, 5), dtype=int))
    with pytest.raises(ValueError, match=r"ids must be \(batch, seq\), got shape \(3,\)"):
        model(np.zeros(3, dtype=int))
    with pytest.raises(IndexError, match="id 5 is out of range for 5 embeddings"):
        model(np.array([[1, 5]]))


def test_a_transformer_config_builds_the_model_its_fields_do():
    """TinyTransformer(config) and TinyTransformer(vocab_size, ...) are one model; the presets are
    GPT-2's and Llama's kinds; the config is kept on the model."""
    import dataclasses

    config = nn.TransformerConfig(7, d_model=8, num_heads=2, num_layers=1, max_len=6, d_ff=12)
    ta.manual_seed(3)
    built = nn.TinyTransformer(config)
    ta.manual_seed(3)
    by_fields = nn.TinyTransformer(7, 8, 2, 1, 6, 12)
    assert built.config == by_fields.config == config
    ids = np.array([[1, 2, 3, 4]])
    np.testing.assert_array_equal(built(ids).numpy(), by_fields(ids).numpy())
    assert nn.TinyTransformer(**dataclasses.asdict(config)).config == config

    llama = nn.TinyTransformer(nn.TransformerConfig.llama(7, d_model=8, num_heads=2, n_kv_heads=1, max_len=6))
    attn = llama.blocks[0].attn
    assert isinstance(llama.ln_f, nn.RMSNorm) and isinstance(llama.blocks[0].mlp, nn.SwiGLU)
    assert llama.pos_emb is None and attn.rope and attn.n_kv_heads == 1
    assert attn.q_proj.bias is None and attn.out_proj.bias is None and llama.head.bias is None
    gpt2 = nn.TinyTransformer(nn.TransformerConfig.gpt2(7, d_model=8, num_heads=2, max_len=6))
    assert gpt2.head.weight is gpt2.tok_emb.weight and gpt2.blocks[0].attn.q_proj.bias is not None

    with pytest.raises(TypeError, match=r"TinyTransformer: give a TransformerConfig or its fields as "
                                        r"arguments, not both \(got 0 more by position and \['d_model'\]"):
        nn.TinyTransformer(config, d_model=16)
    with pytest.raises(TypeError, match="TinyTransformer takes at most 7 arguments by position"):
        nn.TinyTransformer(7, 8, 2, 1, 6, 12, 0.0, False)        # the eighth was once `fused`
    with pytest.raises(ValueError, match="TinyTransformer: norm must be one of"):
        nn.TinyTransformer(dataclasses.replace(config, norm="batch"))


def full_recompute(model, ids, steps):
    with ta.no_grad():
        for _ in range(steps):
            nxt = model(ids).numpy()[:, -1].argmax(-1)[:, None]
            ids = np.concatenate([ids, nxt], axis=1)
    return ids


def test_generate_with_cache_equals_full_recompute():
    model = nn.TinyTransformer(vocab_size=11, d_model=16, num_heads=4, num_layers=2, max_len=12,
                               dropout=0.3)
    for p in model.parameters():        # larger weights: varied tokens, not one repeated argmax
        p.data = p.data * 3
    prompt = np.array([[3, 1, 4], [1, 5, 9]])
    model.eval()
    expected = full_recompute(model, prompt, 9)
    assert len(np.unique(expected[:, 3:])) > 2
    model.train()
    out = model.generate(prompt, max_new_tokens=9)
    assert isinstance(out, ta.Tensor) and out.dtype.kind == "i"
    np.testing.assert_array_equal(out.numpy(), expected)
    assert model.training and model.blocks[1].attn.training     # modes restored
    np.testing.assert_array_equal(model.generate(ta.Tensor(prompt[1]), 4).numpy(), expected[1, :7])
    np.testing.assert_array_equal(model.generate(prompt, 0).numpy(), prompt)
    with pytest.raises(ValueError, match="3 prompt tokens \\+ 10 new ones exceed max_len 12"):
        model.generate(prompt, 10)
    with pytest.raises(ValueError, match="max_new_tokens >= 0"):
        model.generate(prompt, -1)
    with pytest.raises(ValueError, match="ids must be integers"):
        model.generate(np.ones((1, 2)), 1)


def test_generate_and_attention_maps_keep_the_model_names():
    model = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=2, max_len=6)
    model.generate(np.array([1, 2]), 2)
    assert model.blocks[1].attn.q_proj.weight.name == "blocks.1.attn.q_proj.weight"
    assert model.blocks[1].path == "blocks.1"
    maps = model.attention_maps(np.array([[1, 2, 3]]))
    assert len(maps) == 2 and maps[0].shape == (1, 2, 3, 3)
    np.testing.assert_allclose(maps[1].data.sum(-1), 1, rtol=1e-6)
    assert np.all(np.triu(maps[0].data[0, 1], 1) == 0)      # causal: no weight on later tokens
    assert model.blocks[0].ln1.weight.name == "blocks.0.ln1.weight"
