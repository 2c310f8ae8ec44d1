"""The workloads of issue 19: grouped-query attention, flash with a sliding window, the Llama train step.

Each compares tinygrad_attn with itself (the ratio column is ours / ours, as the memory row's
flash / plain): GQA against the same call with as many kv heads as query heads, the window
against full causal flash, ``--arch llama``'s train step against the default one. PyTorch's
figure is given where it has the op (``scaled_dot_product_attention(..., enable_gqa=True)``).
"""

from __future__ import annotations

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.optim import clip_grad_norm
from tinygrad_attn.training.config import TrainConfig
from tinygrad_attn.training.loop import TrainState, make_model
from tinygrad_attn.training.tasks import IGNORE, get_task

from .harness import Row, interleave, ms
from .workloads import Settings, peak

QUERY_HEADS = 8


def _attention_pass(fn, arrays: list[np.ndarray], d_out: np.ndarray, **kwargs):
    """A closure: forward + backward of `fn` on fresh leaves made from `arrays`."""
    leaves = [ta.Tensor(a, requires_grad=True) for a in arrays]

    def one_pass() -> None:
        for t in leaves:
            t.zero_grad()
        fn(*leaves, is_causal=True, **kwargs).backward(d_out)
    return one_pass


def _torch_gqa_pass(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray):
    import torch
    leaves = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    grad = torch.from_numpy(d_out)

    def one_pass() -> None:
        for t in leaves:
            t.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True, enable_gqa=True)
        out.backward(grad)
    return one_pass


def grouped_query_attention(settings: Settings, torch_side) -> list[Row]:
    """Causal fwd+bwd, 8 query heads, d_head 64: 2 kv heads against 8, fused and flash; peak memory."""
    n = settings.gqa_size
    rng = np.random.default_rng(0)
    q, d_out = (rng.standard_normal((1, QUERY_HEADS, n, 64)).astype(np.float32) for _ in range(2))
    k8, v8 = (rng.standard_normal((1, QUERY_HEADS, n, 64)).astype(np.float32) for _ in range(2))
    k2, v2 = k8[:, ::4].copy(), v8[:, ::4].copy()
    rows = []
    for label, fn in (("fused", F.scaled_dot_product_attention), ("flash", F.flash_attention)):
        contestants = {"kv2": _attention_pass(fn, [q, k2, v2], d_out, enable_gqa=True),
                       "kv8": _attention_pass(fn, [q, k8, v8], d_out)}
        if torch_side is not None and label == "fused":
            contestants["torch"] = _torch_gqa_pass(q, k2, v2, d_out)
        timing = interleave(contestants, settings.rounds, warmup=1, idle=settings.idle)
        kernel = "plain" if label == "fused" else "flash"
        memory = {kv: peak(kernel, n, str(kv))["tracemalloc_mib"] for kv in (2, 8)}
        rows.append(Row(f"GQA fwd+bwd n={n} Hq=8, {label}: time Hkv=2 / Hkv=8", ms(timing.median("kv2")),
                        ms(timing.median("torch")) if "torch" in contestants else None,
                        timing.ratio("kv2", "kv8"),
                        f"Hkv=8: {ms(timing.median('kv8'))}; target ≤ 1×"
                        + ("; PyTorch column: its sdpa, enable_gqa" if "torch" in contestants else "")))
        rows.append(Row(f"GQA peak memory n={n} Hq=8, {label}: Hkv=2 / Hkv=8", f"{memory[2]:.1f} MiB", None,
                        memory[2] / memory[8], f"Hkv=8: {memory[8]:.1f} MiB (tracemalloc); target < 1×"))
    return rows


def sliding_window(settings: Settings, torch_side) -> list[Row]:
    """Flash attention causal fwd+bwd, 1 head, d 64: window 256 against the full causal pass."""
    n, window = settings.window_size
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((1, 1, n, 64)).astype(np.float32) for _ in range(4))
    timing = interleave({"window": _attention_pass(F.flash_attention, [q, k, v], d_out, window=window),
                         "full": _attention_pass(F.flash_attention, [q, k, v], d_out)},
                        settings.rounds, warmup=1, idle=settings.idle)
    return [Row(f"flash causal fwd+bwd n={n}: window={window} / full", ms(timing.median("window")), None,
                timing.ratio("window", "full"), f"full: {ms(timing.median('full'))}; target ≤ 0.25×")]


def _train_step(arch: str, batch_size: int):
    """One step of `tinygrad-attn train reverse --arch ARCH`'s model (default flags) on a fixed batch."""
    config = TrainConfig(arch=arch, batch_size=batch_size)
    task = get_task("reverse")
    model = make_model(task, config)
    state = TrainState.fresh(model, config)
    ids, targets = task.batch(np.random.default_rng(0), config.batch_size)
    ids_t, targets_t = ta.Tensor(ids), ta.Tensor(targets)

    def step() -> None:
        loss = F.cross_entropy(model(ids_t), targets_t, ignore_index=IGNORE)
        state.optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(state.optimizer.params, config.clip)
        state.optimizer.step()
    return step


def llama_train_step(settings: Settings, torch_side) -> list[Row]:
    """The train command's step (reverse, default flags): --arch llama against the default."""
    batch = settings.llama_batch
    timing = interleave({"llama": _train_step("llama", batch), "default": _train_step("default", batch)},
                        settings.rounds, warmup=2, idle=settings.idle)
    return [Row(f"train step reverse, batch {batch}: --arch llama / default", ms(timing.median("llama")),
                None, timing.ratio("llama", "default"),
                f"default: {ms(timing.median('default'))}; target ≤ 1.15×")]


WORKLOADS = {"gqa": grouped_query_attention, "window": sliding_window, "llama": llama_train_step}
