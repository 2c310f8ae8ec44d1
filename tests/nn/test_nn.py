"""Modules: parameter discovery and names, scopes, modes, devices, state dicts, and the basic layers
(attention and the transformer are in test_transformer.py)."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import engine, nn


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
    scopes = {getattr(t.node.scope, "path", None) for t in engine.toposort(logits) if t.node}
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


def test_names_do_not_depend_on_which_module_was_called_last():
    block = nn.TransformerBlock(8, 2, 16)
    x = ta.randn(1, 3, 8)
    expected = [name for name, _ in block.named_parameters()]
    names = lambda: [p.name for _, p in block.named_parameters()]
    paths = lambda: {path: m.path for path, m in block.named_modules()}
    block(x)
    assert names() == expected and "attn.q_proj.weight" in expected
    assert paths() == {p: p for p, _ in block.named_modules()}
    out = block.attn(x)                                  # a sub-module called on its own
    assert names() == expected and block.attn.path == "attn"
    module_paths = {t.node.scope.path for t in engine.toposort(out) if t.node is not None}
    assert module_paths == {"attn", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj"}
    out = block(x)
    assert names() == expected and block.path == ""
    module_paths = {t.node.scope.path for t in engine.toposort(out) if t.node is not None}
    assert {"", "ln1", "attn.q_proj", "mlp.fc2"} <= module_paths and "q_proj" not in module_paths


def test_a_tree_is_named_once_and_an_outer_root_called_later_names_it_from_there(monkeypatch):
    model = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=2, max_len=4)
    block, ids = model.blocks[1], np.array([[1, 2]])
    block(ta.randn(1, 2, 8))                             # called before its model: named from itself
    assert block.path == "" and block.attn.q_proj.weight.name == "attn.q_proj.weight"
    model(ids)                                           # the model, never named, names its whole tree
    assert block.path == "blocks.1" and block.attn.q_proj.weight.name == "blocks.1.attn.q_proj.weight"
    calls = []
    monkeypatch.setattr(nn.Module, "name_tree", lambda self: calls.append(self))
    model(ids)
    block(ta.randn(1, 2, 8))
    model.generate(ids, 1)
    assert calls == []                                   # named once, never walked again
    monkeypatch.undo()
    model.head = nn.Linear(8, 5)                         # a replaced sub-module is named on request
    model.name_tree()
    assert model.head.weight.name == "head.weight" and model.head.path == "head"


def test_state_dict_is_a_copy_and_non_strict_loads_what_matches():
    a, b = Tied(), Tied()
    state = a.state_dict()
    state["scale"][0] = 7.0
    assert a.scale.data[0] == 1.0                           # the dict holds copies
    b.load_state_dict({"a.bias": np.array([2.0, 3.0, 4.0]), "other": np.zeros(3)}, strict=False)
    assert b.a.bias.data.tolist() == [2.0, 3.0, 4.0] and b.a.bias.dtype == np.float32


def test_to_moves_parameters_in_place_and_returns_self(device):
    model = nn.Linear(3, 2)
    weight = model.weight
    before = model.weight.numpy()
    model.weight.grad = np.ones((3, 2), dtype=np.float32)
    assert model.to(device) is model and model.weight is weight
    assert model.weight.device == device and model.weight.grad is not None
    np.testing.assert_array_equal(model.weight.numpy(), before)
    x = ta.Tensor(np.ones((1, 3), dtype=np.float32), device=device)
    assert model(x).device == device


def test_initialisation_is_seeded_and_documented():
    ta.manual_seed(5)
    a = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=4)
    ta.manual_seed(5)
    b = nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=4)
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    big = nn.Linear(400, 300)
    bound = 1 / np.sqrt(400)
    assert np.abs(big.weight.data).max() <= bound and np.abs(big.weight.data).max() > 0.95 * bound
    assert abs(big.weight.data.std() - bound / np.sqrt(3)) < 0.01 * bound   # uniform ±bound
    emb = nn.Embedding(300, 100).weight.data
    assert abs(emb.std() - 1) < 0.02 and abs(emb.mean()) < 0.02             # N(0, 1)
    assert nn.Linear(3, 2, bias=False).bias is None
    assert [n for n, _ in nn.Linear(3, 2, bias=False).named_parameters()] == ["weight"]


def test_linear_gradcheck(rng):
    layer = nn.Linear(3, 2)
    x = ta.Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    w = ta.Tensor(layer.weight.data, requires_grad=True)
    b = ta.Tensor(layer.bias.data, requires_grad=True)

    def fn(x, w, b):
        layer.weight, layer.bias = w, b
        return layer(x)

    assert ta.gradcheck(fn, [x, w, b])


def test_embedding_rejects_float_ids():
    with pytest.raises(TypeError, match="Embedding: ids must be integers, got dtype float"):
        nn.Embedding(4, 2)(np.array([0.0, 1.0]))
    with pytest.raises(IndexError, match="id -1 is out of range for 4 embeddings"):
        nn.Embedding(4, 2)(np.array([[0, -1]]))


def test_layer_norm_and_dropout_layers(rng):
    ln = nn.LayerNorm(4, eps=1e-3)
    assert ln.weight.data.tolist() == [1] * 4 and ln.bias.data.tolist() == [0] * 4
    ln.weight.data = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(ln(ta.Tensor(x)).data, expected * ln.weight.data, rtol=1e-4, atol=1e-5)
    drop = nn.Dropout(0.25)
    y = drop(ta.ones(400, 100)).data
    assert set(np.unique(y).tolist()) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.01
    np.testing.assert_array_equal(drop.eval()(ta.Tensor(x)).data, x)
    with pytest.raises(ValueError, match="Dropout: p must be in \\[0, 1\\), got 1"):
        nn.Dropout(1)


def test_an_op_on_a_parameter_gives_a_plain_tensor_that_backward_accepts_a_tensor_for():
    emb = nn.Embedding(5, 3)
    out = emb(ta.Tensor(np.array([1, 1, 4])))
    doubled = emb.weight * 2.0
    assert type(out) is ta.Tensor and type(doubled) is ta.Tensor
    out.backward(ta.Tensor(np.ones((3, 3), dtype=out.dtype)))     # a Tensor as the seed
    np.testing.assert_array_equal(emb.weight.grad, np.array([[0] * 3, [2] * 3, [0] * 3, [0] * 3, [1] * 3]))
    w = nn.Parameter(np.array([1.0, 2.0]))
    w.backward(ta.Tensor([3.0, 4.0]))                             # a Parameter as the root
    np.testing.assert_array_equal(w.grad, [3.0, 4.0])


def test_a_parameters_index_and_mask_arguments_are_plain_tensors():
    p = nn.Parameter(np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(p.gather(0, [[2, 0]]).data, [[4.0, 1.0]])
    np.testing.assert_array_equal(p.masked_fill(np.array([True, False]), 0.0).data[:, 0], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(p.scatter_add(0, [[0, 0]], p[:1] * 1.0).data[0], [0.0, 2.0])
