"""The issue-19 benchmark (python -m benchmarks.modern) runs in quick mode, each side in its own
process, and prints a row per figure.

Timings are not asserted: speed is measured by the benchmark, not by tests."""

import os
import re

import pytest

from benchmarks.modern import main


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="the GQA memory rows read Linux's /proc/self (peak resident size)")
def test_quick_run_prints_every_row(capsys, monkeypatch):
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    assert main(["--quick", "--idle", "0", "--threads", "1", "--clock", "cpu"]) == 0
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
        main(["--clock", "cpu", "--threads", "2"])
