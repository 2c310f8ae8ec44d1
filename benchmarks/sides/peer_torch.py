"""PyTorch's side (eager; on the CPU, or a GPU for ``benchmarks.gpu``), each workload written
plainly as a PyTorch user would.

It is also the reference of the check: its float64 results are what every side must match.
Weights come in tinygrad_attn's layout (a linear weight (in, out)) and are transposed into
``nn.Linear``'s (out, in); the modules are named as tinygrad_attn's, so the names line up.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import specs
from . import Bench


class Attention(nn.Module):
    """Multi-head causal self-attention through the fused scaled_dot_product_attention."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (proj(x).view(b, t, self.num_heads, d // self.num_heads).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))         # (B, H, T, Dh)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(heads.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-norm block as tinygrad_attn's TransformerBlock: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn, self.mlp = Attention(d_model, num_heads), MLP(d_model, d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """Token + position embeddings, causal blocks, a final LayerNorm and a linear head."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, max_len: int,
                 d_ff: int):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.ln_f, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _load(model: nn.Module, arrays: dict[str, np.ndarray], names: dict[str, str]) -> None:
    """Copy the specs' arrays into the model (`names`: the model's name → the specs' name),
    transposing each linear weight from (in, out) to (out, in)."""
    linear_weights = {f"{prefix}.weight" for prefix, m in model.named_modules() if isinstance(m, nn.Linear)}
    with torch.no_grad():
        for own, p in model.named_parameters():
            array = arrays[names[own]]
            p.copy_(torch.from_numpy(array.T.copy() if own in linear_weights else array))


def _results(loss: torch.Tensor, named: dict[str, torch.Tensor], transposed: set[str] = frozenset()):
    grads = {name: p.grad.T if name in transposed else p.grad for name, p in named.items()}
    return {"loss": loss.detach().double().cpu().numpy(),
            **{n: g.double().cpu().numpy() for n, g in grads.items()}}


def _trainer(model: nn.Module, loss_of, optimizer: torch.optim.Optimizer, names: dict[str, str]) -> Bench:
    params = dict(model.named_parameters())
    transposed = {names[f"{prefix}.weight"] for prefix, m in model.named_modules()
                  if isinstance(m, nn.Linear)}

    def results() -> dict[str, np.ndarray]:
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        return _results(loss, {spec: params[own] for own, spec in names.items()}, transposed)

    def step() -> torch.Tensor:
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return Bench(step, results)


def build(name: str, sizes: dict, dtype: type, device: str = "cpu") -> Bench | None:
    """Workload `name` on torch device `device`. Attention is the fused
    scaled_dot_product_attention, or with ``sizes["kernel"] == "written"`` written out."""
    arrays = specs.inputs(name, sizes, dtype)
    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    if name == "mlp":
        widths = sizes["widths"]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        model = nn.Sequential(*layers[:-1]).to(torch_dtype)         # Linear ReLU Linear …: no final ReLU
        names = {f"{2 * (i - 1)}.{p}": f"fc{i}.{p}"                  # Sequential's index → fc1, fc2, …
                 for i in range(1, len(widths)) for p in ("weight", "bias")}
        _load(model, arrays, names)
        model.to(device)
        x, labels = torch.from_numpy(arrays["x"]).to(device), torch.from_numpy(arrays["labels"]).to(device)
        return _trainer(model, lambda: F.cross_entropy(model(x), labels),
                        torch.optim.SGD(model.parameters(), lr=specs.LEARNING_RATE["mlp"]), names)
    if name == "chain":
        x = torch.tensor(arrays["x"], requires_grad=True, device=device)
        w = torch.from_numpy(arrays["w"]).to(device)

        def chain() -> torch.Tensor:
            x.grad = None
            y = x
            for _ in range(sizes["length"] // 2):
                y = torch.tanh(y * w)
            y.sum().backward()
            return y
        return Bench(chain, lambda: _results(chain(), {"x": x}))
    if name == "attention" or (name == "modern_attention" and sizes.get("window") is None):
        leaves = {key: torch.tensor(arrays[key], requires_grad=True, device=device)
                  for key in ("q", "k", "v")}
        d_out = torch.from_numpy(arrays["d_out"]).to(device)
        grouped = {"enable_gqa": True} if sizes.get("kv_heads", sizes["heads"]) != sizes["heads"] else {}
        written = sizes.get("kernel") == "written"
        if written:
            causal = torch.ones(sizes["n"], sizes["n"], dtype=torch.bool, device=device).tril()

        def one_pass() -> torch.Tensor:
            for t in leaves.values():
                t.grad = None
            if written:
                out = math_attention(*leaves.values(), causal)
            else:
                out = F.scaled_dot_product_attention(*leaves.values(), is_causal=True, **grouped)
            out.backward(d_out)
            return out
        return Bench(one_pass, lambda: _results(one_pass(), leaves),
                     note="written out: the (n, n) matrix held" if written
                     else "fused scaled_dot_product_attention")
    if name == "train":
        model = TinyTransformer(sizes["vocab"], sizes["d_model"], sizes["heads"], sizes["layers"],
                                sizes["seq"], sizes["d_ff"]).to(torch_dtype)
        names = {own: own for own, _ in model.named_parameters()}
        _load(model, arrays, names)
        model.to(device)
        ids, targets = (torch.from_numpy(arrays[key]).to(device) for key in ("ids", "targets"))

        def loss_of() -> torch.Tensor:
            logits = model(ids)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return _trainer(model, loss_of, torch.optim.Adam(model.parameters(), lr=specs.LEARNING_RATE["train"]),
                        names)
    return None


def text_losses(sizes: dict, steps: int) -> list[float]:
    """The float32 losses of `steps` AdamW steps (clipped, constant rate) of the TinyTransformer of
    `sizes`, from the specs' initial weights, on ``specs.text_batches``."""
    model = TinyTransformer(sizes["vocab"], sizes["d_model"], sizes["heads"], sizes["layers"], sizes["seq"],
                            sizes["d_ff"])
    arrays = {name: array.astype(np.float32) for name, array
              in specs.transformer_weights(np.random.default_rng(0), sizes).items()}
    _load(model, arrays, {own: own for own, _ in model.named_parameters()})
    training = specs.TEXT_TRAINING
    optimizer = torch.optim.AdamW(model.parameters(), lr=training["lr"],
                                  weight_decay=training["weight_decay"])
    ids, targets = (torch.from_numpy(a) for a in specs.text_batches(steps, sizes))
    losses = []
    for step in range(steps):
        logits = model(ids[step])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets[step].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), training["clip"])
        optimizer.step()
        losses.append(loss.item())
    return losses


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
    """softmax(Q Kᵀ/√d, causal) V written out: the (n, n) matrix is held."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v


def attention_passes(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray) -> dict:
    """Forward + backward closures: explicit math and the fused scaled_dot_product_attention
    (``benchmarks.memory`` measures their peaks)."""
    qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    grad = torch.from_numpy(d_out)
    n = q.shape[-2]

    def math_pass() -> None:
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        for t in (qt, kt, vt):
            t.grad = None
        math_attention(qt, kt, vt, causal).backward(grad)

    def sdpa_pass() -> None:
        for t in (qt, kt, vt):
            t.grad = None
        F.scaled_dot_product_attention(qt, kt, vt, is_causal=True).backward(grad)
    return {"torch math": math_pass, "torch sdpa": sdpa_pass}
