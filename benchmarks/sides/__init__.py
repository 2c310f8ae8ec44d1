"""The sides of a comparison, one module each, every one run in its own process (``worker.py``).

A side module defines ``build(name, sizes, dtype)``: a ``Bench`` for workload `name` built from
``specs.inputs``, or None when the side does not implement it (ours and PyTorch's also take
``device``: ``benchmarks.gpu`` builds them on the GPU, in one process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SIDES = {"ours": "ours", "torch": "peer_torch", "mygrad": "peer_mygrad", "numpy": "bare_numpy"}
LIBRARY = {"ours": None, "torch": "torch", "mygrad": "mygrad", "numpy": None}   # what a side imports
TITLES = {"ours": "tinygrad_attn", "torch": "PyTorch", "mygrad": "MyGrad", "numpy": "NumPy by hand"}


@dataclass
class Bench:
    """A workload built on one side: `step` is what is timed (a train step's gives its loss, the
    others' what they computed); `results` runs the forward and backward once from the initial
    state and gives the loss (or output) and every gradient as float64 NumPy arrays by name, for
    the check (None: nothing to check, e.g. the GEMMs alone)."""

    step: Callable[[], object]
    results: Callable[[], dict[str, np.ndarray]] | None
    note: str = ""
