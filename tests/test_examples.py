"""The README's example and the fast example scripts run and print what they claim."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_computes_the_stated_gradients(capsys):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    t = np.tanh(-0.35)
    assert np.isclose(namespace["loss"].item(), t)
    np.testing.assert_allclose(namespace["x"].grad, (1 - t**2) * np.array([[0.3, 0.2, -0.5]]), rtol=1e-5)
    np.testing.assert_allclose(namespace["w"].grad.T, (1 - t**2) * np.array([[1.0, -2.0, 0.5]]), rtol=1e-5)
    assert "dx = dy ⊙ (1 − y²)" in capsys.readouterr().out


def test_every_readme_python_block_runs():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md block {i}", "exec"), {})


def test_backprop_by_hand_example():
    out = subprocess.run([sys.executable, str(ROOT / "examples/01_backprop_by_hand.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "hand-derived gradients match backward()" in out and "gradcheck: True" in out

