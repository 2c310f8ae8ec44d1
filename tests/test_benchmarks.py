"""The benchmark suite runs end to end in quick mode without PyTorch and prints a row per workload.

Timings are not asserted (speed is measured by the suite, not by tests); the BLAS floor's list of
products is checked against the model's shapes.
"""

import os
import re

import pytest

from benchmarks.__main__ import main
from benchmarks.workloads import blas_floor_products


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="the memory workload reads Linux's /proc/self (peak resident size)")
def test_quick_suite_prints_a_row_per_workload(capsys, monkeypatch):
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    assert main(["--quick", "--no-torch", "--idle", "0"]) == 0
    out = capsys.readouterr().out
    assert "PyTorch: not used (--no-torch, or not importable): tinygrad_attn side only" in out
    assert re.search(r"NumPy [\d.]+, BLAS .*OpenBLAS threads in use: \S+", out)
    assert "glibc malloc keeps freed memory (--keep-freed-memory): no, the default" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    expected = [r"train step \(TinyTransformer, Adam\) +\| [\d.]+ ms +\| - ",
                r"BLAS floor \(numpy.matmul, the step's GEMMs\) +\| [\d.]+ ms",
                r"attention fwd\+bwd n=64: plain vs - +\| [\d.]+ ms",
                r"attention fwd\+bwd n=64: flash vs - +\| [\d.]+ ms",
                r"op overhead: 20 elementwise ops on \(8, 8\) \+ backward +\| [\d.]+ ms",
                r"peak memory n=256, 1 head: plain vs - +\| [\d.]+ MiB",
                r"peak memory n=256, 1 head: flash vs - +\| [\d.]+ MiB",
                r"peak memory n=256: flash / plain \(ours\) .*\| [\d.]+× ",
                r"train reverse \(3 steps, quick\) +\| [\d.]+ s .*held-out exact match [\d.]+% on 20",
                r"GQA fwd\+bwd n=64 Hq=8, fused: time Hkv=2 / Hkv=8 +\| [\d.]+ ms +\| - +\| [\d.]+× ",
                r"GQA peak memory n=64 Hq=8, fused: Hkv=2 / Hkv=8 +\| [\d.]+ MiB .*\| [\d.]+× ",
                r"GQA fwd\+bwd n=64 Hq=8, flash: time Hkv=2 / Hkv=8 +\| [\d.]+ ms",
                r"GQA peak memory n=64 Hq=8, flash: Hkv=2 / Hkv=8 +\| [\d.]+ MiB",
                r"flash causal fwd\+bwd n=256: window=32 / full +\| [\d.]+ ms .*\| [\d.]+× ",
                r"train step reverse, batch 4: --arch llama / default +\| [\d.]+ ms .*\| [\d.]+× "]
    assert len(rows) == len(expected), out
    for row, pattern in zip(rows, expected):
        assert re.match(r"\| " + pattern, row), (pattern, row)


def test_blas_floor_has_three_products_per_linear_and_six_per_attention():
    products = blas_floor_products()
    linears = 2 * 6 + 1                                 # 2 layers × (q, k, v, out, fc1, fc2) + head
    assert len(products) == 3 * linears + 6 * 2
    assert products[0] == ((2048, 64), (64, 64))        # X W_Q: 64 · 32 rows
    assert products[-1] == ((256, 32, 32), (256, 32, 16))   # dK = dSᵀ Q over 64 · 4 heads
