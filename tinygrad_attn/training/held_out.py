"""The toy tasks' fixed held-out split: 1 prompt in 20, chosen by the CRC32 of its tokens, and
how many prompts of a family (one length, the tokens allowed at each position) it holds and which,
exactly and fast (``family_held_out_count``, ``family_held_out_prompts``).

Example:
    >>> family = (range(10),) * 3
    >>> family_held_out_count(family) == len(family_held_out_prompts(family)) == sum(
    ...     is_held_out([a, b, c]) for a in range(10) for b in range(10) for c in range(10))
    True
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["family_held_out_count", "family_held_out_prompts", "is_held_out"]


def is_held_out(prompt: list[int]) -> bool:
    """The fixed held-out split: 1 prompt in 20, by the CRC32 of its tokens."""
    return zlib.crc32(bytes(prompt)) % 20 == 0


def family_held_out_count(family: tuple[Sequence[int], ...]) -> int:
    """The number of held-out prompts in a family of one length (tokens allowed per position).

    CRC32 is affine over GF(2) for messages of one length n, so for A of length k and B of length
    n − k, crc(A‖B) = crc(A‖0…) ⊕ crc(0…‖B) ⊕ crc(0…0). Two tables of the halves' CRCs then give
    every prompt's CRC as one XOR, 10⁸ prompts in a fraction of a second.
    """
    return sum(int(held.sum()) for _, held in _held_out_blocks(family))


def family_held_out_prompts(family: tuple[Sequence[int], ...]) -> list[list[int]]:
    """Every held-out prompt of a family, in lexicographic order (from the same tables)."""
    k = len(family) // 2
    fronts, backs = (list(itertools.product(*half)) for half in (family[:k], family[k:]))
    return [list(fronts[start + f] + backs[b])
            for start, held in _held_out_blocks(family) for f, b in zip(*np.nonzero(held))]


def _held_out_blocks(family: tuple[Sequence[int], ...]) -> Iterator[tuple[int, np.ndarray]]:
    """(first front row, booleans fronts × backs: held out) for blocks of the family's first-half
    prompts against every second half, ~10⁷ pairs per block."""
    k = len(family) // 2
    zeros_after, zeros_before = bytes(len(family) - k), bytes(k)
    front = np.array([zlib.crc32(bytes(a) + zeros_after) for a in itertools.product(*family[:k])],
                     dtype=np.uint32)
    back = np.array([zlib.crc32(zeros_before + bytes(b)) for b in itertools.product(*family[k:])],
                    dtype=np.uint32) ^ np.uint32(zlib.crc32(bytes(len(family))))
    chunk = max(1, 10**7 // len(back))
    for i in range(0, len(front), chunk):
        yield i, (front[i:i + chunk, None] ^ back) % 20 == 0
