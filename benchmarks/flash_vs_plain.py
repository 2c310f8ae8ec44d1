"""Benchmark: plain vs flash attention, forward + backward, median time and peak memory.

For each length n, one head (batch 1, d_head 64, float32) runs forward and backward through
each kernel `--repeats` times after one warm-up pass; the time is the median of the repeats
(time.perf_counter) and the peak memory is what tracemalloc sees NumPy allocate during one
forward + backward, above what was allocated before it. The two kernels alternate, so machine
noise hits both. The last line says, at the largest n, what share of the plain kernel's memory
and time flash takes.
Run: python -m benchmarks.flash_vs_plain [--sizes 512 2048 4096] [--repeats 5] [--causal]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F


def one_pass(kernel, q, k, v, d_out, **kwargs) -> None:
    """Forward and backward once, starting from clean gradients."""
    for t in (q, k, v):
        t.zero_grad()
    kernel(q, k, v, **kwargs).backward(d_out)


def peak_bytes(kernel, q, k, v, d_out, **kwargs) -> int:
    """tracemalloc's peak during one forward + backward, above what was held before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        one_pass(kernel, q, k, v, d_out, **kwargs)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flash_vs_plain",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 2048, 4096],
                        help="sequence lengths n (queries = keys = n)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per kernel and n")
    parser.add_argument("--d-head", type=int, default=64, help="width of q, k and v")
    parser.add_argument("--block-size", type=int, default=256, help="flash attention's key block")
    parser.add_argument("--causal", action="store_true", help="is_causal=True for both kernels")
    args = parser.parse_args(argv)

    kernels = {"plain": F.scaled_dot_product_attention,
               "flash": lambda *a, **kw: F.flash_attention(*a, **kw, block_size=args.block_size)}
    rng = np.random.default_rng(0)
    print(f"forward + backward, batch 1, one head, d_head {args.d_head}, float32, "
          f"causal {args.causal}, flash block {args.block_size}, median of {args.repeats}")
    print(f"{'n':>6} {'plain ms':>10} {'flash ms':>10} {'time ratio':>10} "
          f"{'plain MiB':>10} {'flash MiB':>10} {'mem ratio':>10}")
    for n in args.sizes:
        q, k, v = (ta.Tensor(rng.standard_normal((1, n, args.d_head)).astype(np.float32),
                             requires_grad=True) for _ in range(3))
        d_out = rng.standard_normal((1, n, args.d_head)).astype(np.float32)
        times: dict[str, list[float]] = {name: [] for name in kernels}
        for kernel in kernels.values():
            one_pass(kernel, q, k, v, d_out, is_causal=args.causal)            # warm-up
        for _ in range(args.repeats):
            for name, kernel in kernels.items():
                start = time.perf_counter()
                one_pass(kernel, q, k, v, d_out, is_causal=args.causal)
                times[name].append(time.perf_counter() - start)
        ms = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
        mib = {name: peak_bytes(kernel, q, k, v, d_out, is_causal=args.causal) / 2**20
               for name, kernel in kernels.items()}
        time_ratio, mem_ratio = ms["flash"] / ms["plain"], mib["flash"] / mib["plain"]
        print(f"{n:>6} {ms['plain']:>10.1f} {ms['flash']:>10.1f} {time_ratio:>10.2f} "
              f"{mib['plain']:>10.1f} {mib['flash']:>10.1f} {mem_ratio:>10.3f}")
    print(f"at n = {n}, flash attention's peak memory is {mem_ratio:.3f} of the plain kernel's "
          f"(1/{1 / mem_ratio:.0f}) and its time {time_ratio:.2f} × the plain kernel's")


if __name__ == "__main__":
    main()
