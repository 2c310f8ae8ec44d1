"""Modules: parameter discovery and names, state dicts, layers, multi-head attention, the model."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import engine, nn


@pytest.fixture
def float64():
    ta.set_default_dtype(np.float64)
    yield
    ta.set_default_dtype(np.float32)


class Tied(nn.Module):
    def __init__(self):
        self.a = nn.Linear(2, 3)
        self.b = nn.Linear(3, 2)
        self.b.weight = nn.Parameter(np.ones((3, 2)))
        self.layers = [self.a, {"again": self.a}]
        self.scale = nn.Parameter(np.ones(1))

    def forward(self, x):
        return self.b(self.a(x)) * self.scale


def test_named_parameters_are_dotted_in_order_and_shared_once():
    names = [n for n, _ in Tied().named_parameters()]
    assert names == ["a.weight", "a.bias", "b.weight", "b.bias", "scale"]
    model = nn.TinyTransformer(vocab_size=7, d_model=8, num_heads=2, num_layers=2, max_len=5)
    names = dict(model.named_parameters())
    assert "blocks.1.attn.q_proj.weight" in names and "blocks.0.mlp.fc2.bias" in names
    assert names["tok_emb.weight"].shape == (7, 8) and names["head.weight"].shape == (8, 7)
    assert len(model.parameters()) == len(names)


def test_root_call_names_parameters_and_scopes_nodes():
    model = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=4)
    logits = model(np.array([[1, 2, 3]]))
    assert model.blocks[0].attn.q_proj.weight.name == "blocks.0.attn.q_proj.weight"
    assert model.blocks[0].attn.path == "blocks.0.attn" and model.path == ""
    scopes = {getattr(t._node.scope, "path", None) for t in engine.toposort(logits) if t._node}
    assert {"blocks.0.attn.q_proj", "blocks.0.attn", "blocks.0.mlp.fc1", "head", "ln_f"} <= scopes


def test_state_dict_round_trip_and_strict_errors_change_nothing():
    a, b = Tied(), Tied()
    b.load_state_dict(a.state_dict())
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    state = a.state_dict()
    before = b.a.weight.data.copy()
    state["a.weight"] = state["a.weight"] + 1
    del state["scale"]
    with pytest.raises(KeyError, match=r"missing keys \['scale'\]"):
        b.load_state_dict(state)
    state["scale"], state["extra"] = np.ones(1), np.ones(2)
    with pytest.raises(KeyError, match=r"unexpected keys \['extra'\]"):
        b.load_state_dict(state)
    del state["extra"]
    state["b.bias"] = np.ones(5)
    with pytest.raises(ta.ShapeError, match=r"b.bias has shape \(5,\) in the state dict but \(2,\)"):
        b.load_state_dict(state)
    np.testing.assert_array_equal(b.a.weight.data, before)


def test_train_eval_and_zero_grad():
    model = nn.TransformerBlock(8, 2, 16, dropout=0.5)
    assert model.eval() is model and not model.attn.training and not model.drop.training
    x = ta.randn(2, 3, 8)
    np.testing.assert_array_equal(model(x).data, model(x).data)   # no dropout in eval
    model.train()
    assert model.mlp.fc1.training
    model(x).sum().backward()
    assert model.ln1.weight.grad is not None
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_linear_and_embedding_values(rng):
    layer = nn.Linear(3, 2)
    assert layer.weight.shape == (3, 2) and np.abs(layer.weight.data).max() <= 1 / np.sqrt(3)
    x = rng.standard_normal((4, 3))
    np.testing.assert_allclose(layer(ta.Tensor(x)).data, x @ layer.weight.data + layer.bias.data, rtol=1e-6)
    emb = nn.Embedding(5, 2)
    out = emb(np.array([[1, 1], [4, 1]]))
    out.backward(np.ones((2, 2, 2)))
    np.testing.assert_array_equal(emb.weight.grad, [[0, 0], [3, 3], [0, 0], [0, 0], [1, 1]])
    with pytest.raises(IndexError, match="id 5 is out of range for 5 embeddings"):
        emb(np.array([5]))


def np_mha(mha, x, context, keep=None, is_causal=False):
    """The paper's equations in NumPy: per head softmax(QₕKₕᵀ/√d)Vₕ, concatenated, times W_O."""
    w = {n: getattr(mha, n) for n in ("q_proj", "k_proj", "v_proj", "out_proj")}
    lin = lambda n, a: a @ w[n].weight.data + w[n].bias.data
    q, k, v = lin("q_proj", x), lin("k_proj", context), lin("v_proj", context)
    d = mha.d_head
    heads, weights = [], []
    for h in range(mha.num_heads):
        sl = slice(h * d, (h + 1) * d)
        s = q[..., sl] @ np.swapaxes(k[..., sl], -1, -2) / np.sqrt(d)
        allowed = np.ones(s.shape, bool) if keep is None else np.broadcast_to(keep, s.shape)
        if is_causal:
            allowed = allowed & np.tril(np.ones(s.shape[-2:], bool))
        s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        heads.append(p @ v[..., sl])
        weights.append(p)
    return lin("out_proj", np.concatenate(heads, axis=-1)), np.stack(weights, axis=-3)


@pytest.mark.parametrize("case", ["self", "causal", "cross", "masked", "unbatched"])
def test_multi_head_attention_matches_the_paper(case, rng, float64):
    mha = nn.MultiHeadAttention(8, 2)
    x = rng.standard_normal((2, 4, 8))
    context = rng.standard_normal((2, 6, 8)) if case == "cross" else x
    keep = np.array([True, True, False, True]) if case == "masked" else None
    is_causal = case == "causal"
    if case == "unbatched":
        x = context = x[0]
    out, weights = mha(ta.Tensor(x), context=None if case != "cross" else ta.Tensor(context),
                       mask=keep, is_causal=is_causal, return_weights=True)
    expected, expected_w = np_mha(mha, x, context, keep, is_causal)
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_w, atol=1e-12)
    assert out.shape == x.shape
    assert weights.shape == ((2, 4, 4) if case == "unbatched" else (2, 2, 4, 6 if case == "cross" else 4))


def test_multi_head_attention_gradcheck_end_to_end(rng, float64):
    mha = nn.MultiHeadAttention(4, 2)
    linears = [mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj]
    x = ta.Tensor(rng.standard_normal((1, 3, 4)), requires_grad=True)
    ctx = ta.Tensor(rng.standard_normal((1, 2, 4)), requires_grad=True)

    def run(x, ctx, *weights):  # the checked tensors become the projections' weights and biases
        for layer, weight, bias in zip(linears, weights[::2], weights[1::2]):
            layer.weight, layer.bias = weight, bias
        return mha(x, ctx) + mha(x, is_causal=True, mask=np.array([True, False, True]))

    weights = [ta.Tensor(p.data, requires_grad=True) for p in mha.parameters()]
    assert ta.gradcheck(run, [x, ctx] + weights)


def test_mha_errors():
    with pytest.raises(ValueError, match="d_model 6 is not divisible by num_heads 4"):
        nn.MultiHeadAttention(6, 4)
    with pytest.raises(ValueError, match=r"expected x and context of shape"):
        nn.MultiHeadAttention(8, 2)(ta.randn(2, 3, 5))


def test_generate_with_cache_equals_full_recompute():
    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=11, d_model=16, num_heads=4, num_layers=2, max_len=12)
    prompt = np.array([[3, 1, 4], [1, 5, 9]])
    out = model.generate(prompt, max_new_tokens=6)
    ids = prompt
    with ta.no_grad():
        for _ in range(6):
            nxt = model(ids).numpy()[:, -1].argmax(-1)[:, None]
            ids = np.concatenate([ids, nxt], axis=1)
    np.testing.assert_array_equal(out.numpy(), ids)
    assert model.generate(prompt[0], 2).shape == (5,)
    with pytest.raises(ValueError, match="exceed max_len 12"):
        model.generate(prompt, 10)
    with pytest.raises(ValueError, match="longer than max_len"):
        model(np.zeros((1, 13), dtype=int))
