"""MyGrad's side: a NumPy autodiff engine like ours, used as its documentation shows.

MyGrad has no modules, attention, layer norm, GELU or optimizers, so they are written here from
its primitives (matmul, tanh, softmax, mean, indexing) and SGD and Adam update ``.data`` by hand,
as its examples do. Its default settings are kept (memory guarding on: the arrays of a graph are
made read-only until backward, its guard against in-place edits, the analogue of ours).
"""

from __future__ import annotations

import math

import mygrad as mg
import numpy as np
from mygrad.nnet import relu, softmax, softmax_crossentropy

from .. import specs
from . import Bench


def _linear(params: dict, prefix: str, x: mg.Tensor) -> mg.Tensor:
    return x @ params[f"{prefix}.weight"] + params[f"{prefix}.bias"]


def _layer_norm(params: dict, prefix: str, x: mg.Tensor, eps: float = 1e-5) -> mg.Tensor:
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred ** 2).mean(axis=-1, keepdims=True)
    return centred / mg.sqrt(variance + eps) * params[f"{prefix}.weight"] + params[f"{prefix}.bias"]


def _gelu(x: mg.Tensor) -> mg.Tensor:
    """The tanh approximation, as tinygrad_attn's GELU and PyTorch's approximate="tanh"."""
    return 0.5 * x * (1 + mg.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _attention(q: mg.Tensor, k: mg.Tensor, v: mg.Tensor, hidden: np.ndarray) -> mg.Tensor:
    """softmax(Q Kᵀ/√d + mask) V with -inf added where `hidden` (a key after the query)."""
    scores = (q @ mg.swapaxes(k, -1, -2)) * q.shape[-1] ** -0.5
    return softmax(scores + hidden, axis=-1) @ v


def _causal_mask(n: int, dtype: type) -> np.ndarray:
    return np.where(np.tril(np.ones((n, n), dtype=bool)), 0, -np.inf).astype(dtype)


def _transformer_loss(params: dict, sizes: dict, ids: np.ndarray, targets: np.ndarray,
                      hidden: np.ndarray) -> mg.Tensor:
    b, t = ids.shape
    d, heads = sizes["d_model"], sizes["heads"]
    x = params["tok_emb.weight"][ids] + params["pos_emb.weight"][:t]
    for i in range(sizes["layers"]):
        block = f"blocks.{i}"
        y = _layer_norm(params, f"{block}.ln1", x)
        q, k, v = (_linear(params, f"{block}.attn.{p}_proj", y).reshape(b, t, heads, d // heads)
                   .transpose(0, 2, 1, 3) for p in "qkv")
        attended = _attention(q, k, v, hidden).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + _linear(params, f"{block}.attn.out_proj", attended)
        y = _layer_norm(params, f"{block}.ln2", x)
        x = x + _linear(params, f"{block}.mlp.fc2", _gelu(_linear(params, f"{block}.mlp.fc1", y)))
    logits = _linear(params, "head", _layer_norm(params, "ln_f", x))
    return softmax_crossentropy(logits.reshape(b * t, -1), targets.reshape(-1))


def _mlp_loss(params: dict, layers: int, x: np.ndarray, labels: np.ndarray) -> mg.Tensor:
    for i in range(1, layers):
        x = relu(_linear(params, f"fc{i}", x))
    return softmax_crossentropy(_linear(params, f"fc{layers}", x), labels)


def _results(loss: mg.Tensor, named: dict[str, mg.Tensor]) -> dict[str, np.ndarray]:
    return {"loss": np.asarray(loss.data, dtype=np.float64),
            **{name: np.asarray(p.grad, dtype=np.float64) for name, p in named.items()}}


def _sgd(params: dict, lr: float) -> None:
    for p in params.values():
        p.data -= lr * p.grad


class _Adam:
    """torch.optim.Adam's update (no weight decay), written on the arrays."""

    def __init__(self, params: dict, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps, self.t = params, lr, betas, eps, 0
        self.m = {n: np.zeros_like(p.data) for n, p in params.items()}
        self.v = {n: np.zeros_like(p.data) for n, p in params.items()}

    def __call__(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for n, p in self.params.items():
            g = p.grad
            self.m[n] = b1 * self.m[n] + (1 - b1) * g
            self.v[n] = b2 * self.v[n] + (1 - b2) * g * g
            m_hat, v_hat = self.m[n] / (1 - b1 ** self.t), self.v[n] / (1 - b2 ** self.t)
            p.data -= (self.lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(p.data.dtype)


def _trainer(params: dict, loss_of, update) -> Bench:
    def results() -> dict[str, np.ndarray]:
        loss = loss_of()
        loss.backward()
        return _results(loss, params)

    def step() -> None:
        loss = loss_of()
        loss.backward()
        update()
    return Bench(step, results)


def build(name: str, sizes: dict, dtype: type) -> Bench | None:
    arrays = specs.inputs(name, sizes, dtype)
    if name == "mlp":
        layers = len(sizes["widths"]) - 1
        params = {key: mg.tensor(a) for key, a in arrays.items() if key.startswith("fc")}
        lr = specs.LEARNING_RATE["mlp"]
        return _trainer(params, lambda: _mlp_loss(params, layers, arrays["x"], arrays["labels"]),
                        lambda: _sgd(params, lr))
    if name == "chain":
        x, w = mg.tensor(arrays["x"]), arrays["w"]

        def chain() -> mg.Tensor:
            y = x
            for _ in range(sizes["length"] // 2):
                y = mg.tanh(y * w)
            y.sum().backward()
            return y
        return Bench(chain, lambda: _results(chain(), {"x": x}))
    if name == "attention":
        leaves = {key: mg.tensor(arrays[key]) for key in ("q", "k", "v")}
        hidden = _causal_mask(sizes["n"], dtype)

        def one_pass() -> mg.Tensor:
            out = _attention(*leaves.values(), hidden)
            out.backward(arrays["d_out"])
            return out
        return Bench(one_pass, lambda: _results(one_pass(), leaves),
                     note="written out: the (n, n) matrix held")
    if name == "train":
        params = {key: mg.tensor(a) for key, a in arrays.items() if key not in ("ids", "targets")}
        hidden = _causal_mask(sizes["seq"], dtype)
        adam = _Adam(params, specs.LEARNING_RATE["train"])
        return _trainer(params, lambda: _transformer_loss(params, sizes, arrays["ids"], arrays["targets"],
                                                          hidden), adam)
    return None
