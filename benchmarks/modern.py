"""The workloads of issue 19: grouped-query attention, flash with a sliding window, the Llama train step.

    python -m benchmarks.modern [--quick] [--only gqa window llama] [--rounds N]

Each compares tinygrad_attn with itself, both sides in this one process, in interleaved rounds
(A B A B …; the ratio is the median over rounds of A / B): GQA against the same call with as many
kv heads as query heads (and peak memory, each measured in a fresh process by
``benchmarks.memory``), the window against full causal flash, ``--arch llama``'s train step against
the default one. PyTorch's time is printed where it has the op (``enable_gqa=True``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.optim import clip_grad_norm
from tinygrad_attn.training.config import TrainConfig
from tinygrad_attn.training.loop import TrainState, make_model
from tinygrad_attn.training.tasks import IGNORE, get_task

QUERY_HEADS = 8


@dataclass
class Settings:
    """Rounds, sizes and idling of one run."""

    rounds: int
    idle: float
    gqa_size: int                   # n of the grouped-query attention rows
    window_size: tuple[int, int]    # (n, window) of the sliding-window row
    llama_batch: int                # sequences per step of the --arch llama row (64: the train command's)


@dataclass
class Row:
    """One line of the table: a workload, our figure, PyTorch's, the ratio of the two compared."""

    workload: str
    ours: str
    theirs: str | None
    ratio: float
    note: str


class Timing:
    """Seconds per call of each contestant, one sample per round."""

    def __init__(self, samples: dict[str, list[float]]):
        self.samples = samples

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def ratio(self, a: str, b: str) -> float:
        """The median over rounds of A's time / B's time in the same round."""
        return statistics.median(x / y for x, y in zip(self.samples[a], self.samples[b]))


def interleave(contestants: dict, rounds: int, warmup: int = 1, idle: float = 0.15) -> Timing:
    """Each contestant `warmup` times, then `rounds` rounds of each once in turn."""
    for _ in range(warmup):
        for fn in contestants.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(rounds):
        for name, fn in contestants.items():
            time.sleep(idle)            # BLAS threads stop spinning before the next sample
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return Timing(samples)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def peak(kernel: str, n: int, kv_heads: int) -> dict[str, float]:
    """What ``python -m benchmarks.memory KERNEL N HKV`` measures in a fresh process."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}     # freed arrays leave the resident set
    out = subprocess.run([sys.executable, "-m", "benchmarks.memory", kernel, str(n), str(kv_heads)],
                         check=True, capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1])
    return json.loads(out.stdout)


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


def grouped_query_attention(settings: Settings, with_torch: bool) -> list[Row]:
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
        if with_torch and label == "fused":
            contestants["torch"] = _torch_gqa_pass(q, k2, v2, d_out)
        timing = interleave(contestants, settings.rounds, warmup=1, idle=settings.idle)
        kernel = "plain" if label == "fused" else "flash"
        memory = {kv: peak(kernel, n, kv)["tracemalloc_mib"] for kv in (2, 8)}
        rows.append(Row(f"GQA fwd+bwd n={n} Hq=8, {label}: time Hkv=2 / Hkv=8", ms(timing.median("kv2")),
                        ms(timing.median("torch")) if "torch" in contestants else None,
                        timing.ratio("kv2", "kv8"),
                        f"Hkv=8: {ms(timing.median('kv8'))}; target ≤ 1×"
                        + ("; PyTorch column: its sdpa, enable_gqa" if "torch" in contestants else "")))
        rows.append(Row(f"GQA peak memory n={n} Hq=8, {label}: Hkv=2 / Hkv=8", f"{memory[2]:.1f} MiB", None,
                        memory[2] / memory[8], f"Hkv=8: {memory[8]:.1f} MiB (tracemalloc); target < 1×"))
    return rows


def sliding_window(settings: Settings, with_torch: bool) -> list[Row]:
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


def llama_train_step(settings: Settings, with_torch: bool) -> list[Row]:
    """The train command's step (reverse, default flags): --arch llama against the default."""
    batch = settings.llama_batch
    timing = interleave({"llama": _train_step("llama", batch), "default": _train_step("default", batch)},
                        settings.rounds, warmup=2, idle=settings.idle)
    return [Row(f"train step reverse, batch {batch}: --arch llama / default", ms(timing.median("llama")),
                None, timing.ratio("llama", "default"),
                f"default: {ms(timing.median('default'))}; target ≤ 1.15×")]


WORKLOADS = {"gqa": grouped_query_attention, "window": sliding_window, "llama": llama_train_step}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.modern", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds, small sizes: checks that it runs")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    parser.add_argument("--idle", type=float, default=0.15, help="seconds idle before each sample")
    args = parser.parse_args(argv)
    import importlib.util
    with_torch = importlib.util.find_spec("torch") is not None
    if args.quick:
        settings = Settings(args.rounds or 2, args.idle, gqa_size=64, window_size=(256, 32), llama_batch=4)
    else:
        settings = Settings(args.rounds or 5, args.idle, gqa_size=2048, window_size=(8192, 256),
                            llama_batch=64)
    rows = [row for name in args.only for row in WORKLOADS[name](settings, with_torch)]
    print("| workload | tinygrad_attn | PyTorch | ratio (median of per-round) | note |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.workload} | {r.ours} | {r.theirs or '-'} | {r.ratio:.2f}× | {r.note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
