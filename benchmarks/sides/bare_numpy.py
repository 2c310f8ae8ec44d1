"""The floor: each workload as bare NumPy with the backward written by hand, no graph at all.

What a side takes beyond this is what its engine adds (graph, checks, dispatch). For the train
step the floor is the step's matrix products alone (``numpy.matmul`` into preallocated outputs):
the BLAS work no engine can avoid, nothing to check.
"""

from __future__ import annotations

import numpy as np

from .. import specs
from . import Bench


def _mlp(arrays: dict, layers: int, lr: float) -> Bench:
    """ReLU MLP, mean cross-entropy, SGD: forward, backward and update written out."""
    x, labels = arrays["x"], arrays["labels"]
    weights = [arrays[f"fc{i}.weight"].copy() for i in range(1, layers + 1)]
    biases = [arrays[f"fc{i}.bias"].copy() for i in range(1, layers + 1)]
    rows = np.arange(len(labels))

    def gradients() -> tuple[float, list[np.ndarray], list[np.ndarray]]:
        acts = [x]
        for w, b in zip(weights[:-1], biases[:-1]):
            acts.append(np.maximum(acts[-1] @ w + b, 0))
        logits = acts[-1] @ weights[-1] + biases[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        total = exp.sum(axis=1, keepdims=True)
        loss = np.log(total[:, 0]).mean() - shifted[rows, labels].mean()
        d = exp / total                                 # dL/dlogits = (softmax − onehot) / B
        d[rows, labels] -= 1
        d /= len(labels)
        d_weights, d_biases = [], []
        for i in range(layers - 1, -1, -1):
            d_weights.insert(0, acts[i].T @ d)
            d_biases.insert(0, d.sum(axis=0))
            if i:
                d = (d @ weights[i].T) * (acts[i] > 0)
        return loss, d_weights, d_biases

    def results() -> dict[str, np.ndarray]:
        loss, d_weights, d_biases = gradients()
        out = {"loss": np.float64(loss)}
        for i, (dw, db) in enumerate(zip(d_weights, d_biases), start=1):
            out[f"fc{i}.weight"], out[f"fc{i}.bias"] = dw.astype(np.float64), db.astype(np.float64)
        return out

    def step() -> None:
        _, d_weights, d_biases = gradients()
        for p, g in zip(weights + biases, d_weights + d_biases):
            p -= lr * g
    return Bench(step, results)


def _chain(arrays: dict, length: int) -> Bench:
    """y ← tanh(y ⊙ w), `length` / 2 times, then d(Σy)/dx: dy·(1 − t²)·w back through each pair."""
    x, w = arrays["x"], arrays["w"]

    def grad_x() -> tuple[np.ndarray, np.ndarray]:
        outs = []
        y = x
        for _ in range(length // 2):
            y = np.tanh(y * w)
            outs.append(y)
        g = np.ones_like(y)
        for t in reversed(outs):
            g = g * (1 - t * t) * w
        return y, g

    def results() -> dict[str, np.ndarray]:
        y, g = grad_x()
        return {"loss": y.astype(np.float64), "x": g.astype(np.float64)}
    return Bench(grad_x, results)


def blas_floor_products(sizes: dict) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(A shape, B shape) of every matrix product one train step must do: each Linear's forward
    X W, and backward dY Wᵀ and Xᵀ dY; attention's S = Q Kᵀ, O = P V forward and dP = dO Vᵀ,
    dV = Pᵀ dO, dQ = dS K, dK = dSᵀ Q backward, over batch × heads."""
    n, d, f, v = sizes["batch"] * sizes["seq"], sizes["d_model"], sizes["d_ff"], sizes["vocab"]
    t, heads = sizes["seq"], sizes["batch"] * sizes["heads"]
    dh = d // sizes["heads"]
    linears = [(d, d)] * 4 + [(d, f), (f, d)]
    products = []
    for fan_in, fan_out in linears * sizes["layers"] + [(d, v)]:
        products += [((n, fan_in), (fan_in, fan_out)), ((n, fan_out), (fan_out, fan_in)),
                     ((fan_in, n), (n, fan_out))]
    attention = [((heads, t, dh), (heads, dh, t)), ((heads, t, t), (heads, t, dh)),      # S, O
                 ((heads, t, dh), (heads, dh, t)), ((heads, t, t), (heads, t, dh)),      # dP, dV
                 ((heads, t, t), (heads, t, dh)), ((heads, t, t), (heads, t, dh))]       # dQ, dK
    return products + attention * sizes["layers"]


def _blas_floor(sizes: dict, dtype: type) -> Bench:
    """numpy.matmul over preallocated operands and outputs: the GEMMs and nothing else."""
    rng = np.random.default_rng(0)
    triples = []
    for a_shape, b_shape in blas_floor_products(sizes):
        a, b = (rng.standard_normal(s).astype(dtype) for s in (a_shape, b_shape))
        out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        triples.append((a, b, np.empty(out_shape, dtype=dtype)))

    def products() -> None:
        for a, b, out in triples:
            np.matmul(a, b, out=out)
    return Bench(products, None, note=f"the step's {len(triples)} matrix products alone (BLAS floor)")


def build(name: str, sizes: dict, dtype: type) -> Bench | None:
    if name == "train":
        return _blas_floor(sizes, dtype)
    arrays = specs.inputs(name, sizes, dtype)
    if name == "mlp":
        return _mlp(arrays, len(sizes["widths"]) - 1, specs.LEARNING_RATE["mlp"])
    if name == "chain":
        return _chain(arrays, sizes["length"])
    return None
