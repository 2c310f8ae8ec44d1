"""Peak memory of one attention forward + backward, measured in a fresh process.

    python -m benchmarks.memory KERNEL N     (KERNEL: plain, flash, torch-math, torch-sdpa)
    python -m benchmarks.memory KERNEL N HKV (KERNEL: plain or flash with 8 query heads and HKV
                                              key/value heads, grouped-query attention)

prints one JSON line for the second call (the first loads libraries and fills caches):
``rss_mib``, the growth of the process's peak resident memory over the call (Linux: writing 5 to
/proc/self/clear_refs resets the peak VmHWM to the current VmRSS, so the peak is read after the
call and the resident size before it subtracted), the same measure for both libraries
(``benchmarks`` runs it with MALLOC_MMAP_THRESHOLD_=65536, so that freed arrays leave the
resident set); and for the NumPy kernels ``tracemalloc_mib``, the peak of what NumPy allocated
above what was held before (PyTorch's allocations are invisible to tracemalloc). A fresh process
per measurement keeps earlier calls' freed memory from hiding the peak.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np

KERNELS = ("plain", "flash", "torch-math", "torch-sdpa")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _one_pass(kernel: str, n: int, kv_heads: int | None = None) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    if kv_heads is not None:
        return _grouped_pass(kernel, n, kv_heads, rng)
    q, k, v, d_out = (rng.standard_normal((1, 1, n, 64)).astype(np.float32) for _ in range(4))
    if kernel.startswith("torch"):
        from .sides.peer_torch import attention_passes
        return attention_passes(q, k, v, d_out)[kernel.replace("-", " ")]
    import tinygrad_attn as ta
    from tinygrad_attn import functional as F
    fn = F.scaled_dot_product_attention if kernel == "plain" else F.flash_attention
    qt, kt, vt = (ta.Tensor(a, requires_grad=True) for a in (q, k, v))
    return lambda: fn(qt, kt, vt, is_causal=True).backward(d_out)


def _grouped_pass(kernel: str, n: int, kv_heads: int, rng: np.random.Generator) -> Callable[[], object]:
    """Grouped-query attention: 8 query heads, `kv_heads` key/value heads (8: plain multi-head)."""
    import tinygrad_attn as ta
    from tinygrad_attn import functional as F
    fn = F.scaled_dot_product_attention if kernel == "plain" else F.flash_attention
    q, d_out = (rng.standard_normal((1, 8, n, 64)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((1, kv_heads, n, 64)).astype(np.float32) for _ in range(2))
    qt, kt, vt = (ta.Tensor(a, requires_grad=True) for a in (q, k, v))
    return lambda: fn(qt, kt, vt, is_causal=True, enable_gqa=kv_heads != 8).backward(d_out)


def measure(kernel: str, n: int, kv_heads: int | None = None) -> dict[str, float]:
    """Peak memory of one forward + backward of `kernel` at length `n` (1 head, d 64, causal; or 8
    query heads and `kv_heads` key/value heads)."""
    one_pass = _one_pass(kernel, n, kv_heads)
    one_pass()                  # a warm-up: first calls load libraries and fill caches
    traced = not kernel.startswith("torch")
    if traced:
        tracemalloc.start()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before = _status_kib("VmRSS")
    base = tracemalloc.get_traced_memory()[0] if traced else 0
    one_pass()
    result = {"rss_mib": (_status_kib("VmHWM") - before) / 1024}
    if traced:
        result["tracemalloc_mib"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    return result


if __name__ == "__main__":
    kernel, n = sys.argv[1], int(sys.argv[2])
    if kernel not in KERNELS:
        raise SystemExit(f"benchmarks.memory: kernel must be one of {KERNELS}, got {kernel!r}")
    print(json.dumps(measure(kernel, n, int(sys.argv[3]) if len(sys.argv) > 3 else None)))
