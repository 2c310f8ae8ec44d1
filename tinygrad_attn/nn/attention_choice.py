"""Which kernel a model's attention runs, fused or flash, by device and size: the one rule.

Both compute the same numbers (up to rounding). The fused kernel (``F.scaled_dot_product_attention``)
holds the (n_q, n_k) score matrix of every head: forward keeps P for backward, backward makes dS of
the same size. The flash kernel (``F.flash_attention``) walks the keys in blocks and never holds it,
at the price of a loop over the blocks in Python.

- On the CPU the loop costs nothing that matters: from ``FLASH_FROM`` keys on, flash is as fast as
  fused and holds a small part of its memory (``python -m benchmarks.flash_vs_plain``), so a model
  runs flash from there.
- On a GPU each block is a few kernel launches, and the loop made flash several times slower than
  fused at n = 1024 and 4096 (issue 41's measurements). So a model stays fused on "cuda" while one
  call's score matrix (batch × heads × n_q × n_k elements) takes at most ``GPU_SCORE_SHARE`` of the
  GPU's memory, and runs flash beyond, where the matrices would crowd the step out: a model keeps one
  P per layer until its backward, so a 1/64 share leaves a 24-layer model's under 40% of the memory.
  The GPU's total memory decides, never what is free now, so the choice, and with it the numbers,
  is the same on every run on one GPU (a resumed run repeats its losses); a run resumed on a GPU
  with another amount of memory may cross the line and run the other kernel, whose numbers differ
  in their last bits.

A model that asks for the weights, drops them out or builds attention from primitives (``fused``
False) holds the matrix whatever the kernel: those never run flash (``MultiHeadAttention``).
"""

from __future__ import annotations

import functools

from ..backend import xp_for

__all__ = ["FLASH_FROM", "GPU_SCORE_SHARE", "attention_kernel", "gpu_memory"]

FLASH_FROM = 512            # keys: on the CPU, flash from here on
GPU_SCORE_SHARE = 1 / 64    # of the GPU's memory: on "cuda", fused while one call's scores fit in it


@functools.cache
def gpu_memory() -> int:
    """The GPU's total memory in bytes (CuPy's ``Device().mem_info``), read once per process."""
    return int(xp_for("cuda").cuda.Device().mem_info[1])


def attention_kernel(device: str, score_elements: int, itemsize: int, n_keys: int) -> str:
    """"flash" or "fused": the kernel attention runs on `device` for one call whose score matrix
    has `score_elements` elements (batch × heads × n_q × n_k) of `itemsize` bytes, over `n_keys` keys.

    >>> attention_kernel("cpu", 4 * 8 * 256 * 256, 4, 256), attention_kernel("cpu", 4 * 8 * 512 * 512, 4, 512)
    ('fused', 'flash')
    """
    if device == "cuda":
        return "flash" if score_elements * itemsize > GPU_SCORE_SHARE * gpu_memory() else "fused"
    return "flash" if n_keys >= FLASH_FROM else "fused"
