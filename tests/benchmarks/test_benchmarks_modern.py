"""The modern attention benchmark (python -m benchmarks.modern: GQA, sliding window, Llama step)
runs in quick mode, each side in its own process, and prints a row per figure.

Timings are not asserted: speed is measured by the benchmark, not by tests."""

import os
import re

import numpy as np
import pytest

from benchmarks import modern


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="the GQA memory rows read Linux's /proc/self (peak resident size)")
@pytest.mark.slow
def test_quick_run_prints_every_row(capsys, monkeypatch):
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    assert modern.main(["--quick", "--idle", "0", "--threads", "1", "--clock", "cpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"NumPy [\d.]+, BLAS .*OPENBLAS_NUM_THREADS=1", out)
    assert "Each side in its own process; 2 interleaved rounds after a warm-up; CPU time" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
    expected = [r"GQA fwd\+bwd n=64 Hq=8, fused: time Hkv=2 / Hkv=8 \| [\d.]+ ms \| .+ \| [\d.]+× ",
                r"GQA peak memory n=64 Hq=8, fused: Hkv=2 / Hkv=8 \| [\d.]+ MiB \| - \| [\d.]+× ",
                r"GQA fwd\+bwd n=64 Hq=8, flash: time Hkv=2 / Hkv=8 \| [\d.]+ ms \| - \| [\d.]+× ",
                r"GQA peak memory n=64 Hq=8, flash: Hkv=2 / Hkv=8 \| [\d.]+ MiB \| - \| [\d.]+× ",
                r"flash causal fwd\+bwd n=256: window=32 / full \| [\d.]+ ms \| - \| [\d.]+× ",
                r"train step reverse, batch 4: --arch llama / default \| [\d.]+ ms \| - \| [\d.]+× "]
    assert len(rows) == len(expected), rows
    for row, pattern in zip(rows, expected):
        assert re.match(r"\| " + pattern, row), (pattern, row)


def test_cpu_clock_is_refused_with_more_than_one_thread():
    with pytest.raises(SystemExit):
        modern.main(["--clock", "cpu", "--threads", "2"])


def test_sides_on_the_same_workload_must_agree_before_timing(monkeypatch):
    """Ours and PyTorch on one workload and sizes are compared in float64 first (harness.mismatch)."""
    class FakeWorker:
        def __init__(self, side, *args, keep_freed_memory, label):
            self.side, self.label = side, label

        def build(self, name, sizes):           # PyTorch's output off by 0.5 of the largest 2.0
            return {"out": np.array([1.0, 2.0 if self.side == "ours" else 2.5])}, ""

        def close(self):
            pass

    monkeypatch.setattr(modern, "Contestant", FakeWorker)
    settings = modern.Settings(1, 1, 0.0, "cpu", 0.0, gqa_size=4, window_size=(4, 2), llama_batch=1)
    sizes = {"n": 4, "heads": 2, "kv_heads": 1, "kernel": "plain"}
    with pytest.raises(RuntimeError, match=r"torch differs from kv1 on modern_attention .*off by 2.5e-01"):
        modern.time_sides({"kv1": ("ours", "modern_attention", sizes),
                           "torch": ("torch", "modern_attention", sizes)}, settings)
