"""Benchmark: plain vs flash attention, forward + backward, median time and peak memory.

For each length n, one head (batch 1, d_head 64, float32) runs forward and backward through
each kernel `--repeats` times; the time is the median of the repeats (time.perf_counter) and the
peak memory is what tracemalloc sees NumPy allocate during one forward + backward, above what was
allocated before it. The two kernels run side by side, alternating, so machine noise hits both.
Run: python examples/bench_attention.py [--sizes 512 2048 4096] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F

KERNELS = {"plain": F.scaled_dot_product_attention, "flash": F.flash_attention}


def one_pass(kernel, q, k, v, d_out) -> None:
    for t in (q, k, v):
        t.zero_grad()
    kernel(q, k, v, is_causal=False).backward(d_out)


def peak_bytes(kernel, q, k, v, d_out) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    one_pass(kernel, q, k, v, d_out)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--d-head", type=int, default=64)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    print(f"{'n':>6} {'plain ms':>10} {'flash ms':>10} {'time ratio':>10} "
          f"{'plain MiB':>10} {'flash MiB':>10} {'mem ratio':>10}")
    for n in args.sizes:
        q, k, v = (ta.Tensor(rng.standard_normal((1, n, args.d_head)).astype(np.float32),
                             requires_grad=True) for _ in range(3))
        d_out = rng.standard_normal((1, n, args.d_head)).astype(np.float32)
        times: dict[str, list[float]] = {name: [] for name in KERNELS}
        for _ in range(args.repeats):
            for name, kernel in KERNELS.items():
                start = time.perf_counter()
                one_pass(kernel, q, k, v, d_out)
                times[name].append(time.perf_counter() - start)
        med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
        mem = {name: peak_bytes(kernel, q, k, v, d_out) / 2**20 for name, kernel in KERNELS.items()}
        print(f"{n:>6} {med['plain']:>10.1f} {med['flash']:>10.1f} {med['flash'] / med['plain']:>10.2f} "
              f"{mem['plain']:>10.1f} {mem['flash']:>10.1f} {mem['flash'] / mem['plain']:>10.3f}")


if __name__ == "__main__":
    main()
