"""tinygrad_attn's side: each workload written as a learner writes it (nn modules, F, optim)."""

from __future__ import annotations

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn, optim
from tinygrad_attn.backend import to_numpy, xp_for
from tinygrad_attn.training.config import TrainConfig
from tinygrad_attn.training.loop import TrainState, make_model
from tinygrad_attn.training.tasks import IGNORE, get_task

from .. import specs
from . import Bench


class _MLP(nn.Module):
    """Linear layers with ReLU between them."""

    def __init__(self, widths: tuple[int, ...]):
        self.layers = [nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])]

    def forward(self, x: ta.Tensor) -> ta.Tensor:
        for layer in self.layers[:-1]:
            x = layer(x).relu()
        return self.layers[-1](x)


def _results(loss: ta.Tensor, named: dict[str, ta.Tensor]) -> dict[str, np.ndarray]:
    return {"loss": loss.numpy().astype(np.float64),
            **{name: to_numpy(p.grad).astype(np.float64) for name, p in named.items()}}


def _trainer(model: nn.Module, loss_of, optimizer: optim.Optimizer, names: dict[str, str]) -> Bench:
    """A Bench whose step is forward, loss, zero_grad, backward, optimizer step, and gives the
    loss; `names` maps the model's parameter names to the specs' names."""
    params = dict(model.named_parameters())

    def results() -> dict[str, np.ndarray]:
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        return _results(loss, {spec: params[own] for own, spec in names.items()})

    def step() -> ta.Tensor:
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return Bench(step, results)


def _train_command_step(arch: str, batch_size: int) -> Bench:
    """One step of `tinygrad-attn train reverse --arch ARCH`'s model (default flags otherwise) on a
    fixed batch: forward, loss, zero_grad, backward, clipping, optimizer step."""
    config = TrainConfig(arch=arch, batch_size=batch_size)
    task = get_task("reverse")
    model = make_model(task, config)
    state = TrainState.fresh(model, config)
    ids, targets = (ta.Tensor(a) for a in task.batch(np.random.default_rng(0), config.batch_size))

    def step() -> None:
        loss = F.cross_entropy(model(ids), targets, ignore_index=IGNORE)
        state.optimizer.zero_grad()
        loss.backward()
        optim.clip_grad_norm(state.optimizer.params, config.clip)
        state.optimizer.step()
    return Bench(step, None)


def build(name: str, sizes: dict, dtype: type, device: str = "cpu") -> Bench | None:
    """Workload `name` on `device` ("cuda": CuPy, for ``benchmarks.gpu``; train_command: the
    CPU only)."""
    ta.set_default_dtype(dtype)
    if name == "train_command":
        return _train_command_step(sizes["arch"], sizes["batch"])
    arrays = specs.inputs(name, sizes, dtype)
    if name == "mlp":
        model = _MLP(sizes["widths"])
        names = {f"layers.{i - 1}.{p}": f"fc{i}.{p}" for i in range(1, len(sizes["widths"]))
                 for p in ("weight", "bias")}
        model.load_state_dict({own: arrays[spec] for own, spec in names.items()})
        model.to(device)
        x, labels = ta.Tensor(arrays["x"], device=device), ta.Tensor(arrays["labels"], device=device)
        return _trainer(model, lambda: F.cross_entropy(model(x), labels),
                        optim.SGD(model.parameters(), lr=specs.LEARNING_RATE["mlp"]), names)
    if name == "chain":
        x = ta.Tensor(arrays["x"], requires_grad=True, device=device)
        w = ta.Tensor(arrays["w"], device=device)

        def chain() -> ta.Tensor:
            x.zero_grad()
            y = x
            for _ in range(sizes["length"] // 2):
                y = (y * w).tanh()
            y.sum().backward()
            return y
        return Bench(chain, lambda: _results(chain(), {"x": x}))
    if name in ("attention", "modern_attention"):
        leaves = {key: ta.Tensor(arrays[key], requires_grad=True, device=device) for key in ("q", "k", "v")}
        d_out = xp_for(device).asarray(arrays["d_out"])
        kernel = F.flash_attention if sizes["kernel"] == "flash" else F.scaled_dot_product_attention
        options = {} if name == "attention" else {"enable_gqa": sizes["kv_heads"] != sizes["heads"],
                                                  "window": sizes.get("window")}

        def one_pass() -> ta.Tensor:
            for t in leaves.values():
                t.zero_grad()
            out = kernel(*leaves.values(), is_causal=True, **options)
            out.backward(d_out)
            return out
        return Bench(one_pass, lambda: _results(one_pass(), leaves))
    if name == "train":
        ta.manual_seed(0)
        model = nn.TinyTransformer(sizes["vocab"], sizes["d_model"], sizes["heads"], sizes["layers"],
                                   max_len=sizes["seq"], d_ff=sizes["d_ff"])
        names = {own: own for own, _ in model.named_parameters()}
        model.load_state_dict({key: arrays[key] for key in names})
        model.to(device)
        ids, targets = ta.Tensor(arrays["ids"], device=device), ta.Tensor(arrays["targets"], device=device)
        return _trainer(model, lambda: F.cross_entropy(model(ids), targets),
                        optim.Adam(model.parameters(), lr=specs.LEARNING_RATE["train"]), names)
    return None


def text_losses(sizes: dict, steps: int) -> list[float]:
    """The float32 losses of `steps` AdamW steps (clipped, constant rate) of the TinyTransformer of
    `sizes`, from the specs' initial weights, on ``specs.text_batches``."""
    ta.set_default_dtype(np.float32)
    model = nn.TinyTransformer(sizes["vocab"], sizes["d_model"], sizes["heads"], sizes["layers"],
                               max_len=sizes["seq"], d_ff=sizes["d_ff"])
    model.load_state_dict({name: array.astype(np.float32) for name, array
                           in specs.transformer_weights(np.random.default_rng(0), sizes).items()})
    training = specs.TEXT_TRAINING
    optimizer = optim.AdamW(model.parameters(), lr=training["lr"], weight_decay=training["weight_decay"])
    ids, targets = specs.text_batches(steps, sizes)
    losses = []
    for step in range(steps):
        loss = F.cross_entropy(model(ta.Tensor(ids[step])), ta.Tensor(targets[step]))
        optimizer.zero_grad()
        loss.backward()
        optim.clip_grad_norm(optimizer.params, training["clip"])
        optimizer.step()
        losses.append(loss.item())
    return losses
