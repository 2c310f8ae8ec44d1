"""The kernels: fast paths beside the textbook ops, one file per family (threads over the batch,
how many threads run, BLAS reductions)."""

from __future__ import annotations

__all__: list[str] = []
