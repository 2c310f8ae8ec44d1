"""The README's example and the example scripts run and print what they claim."""

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str) -> str:
    """Run examples/`name` against this checkout's package (a script's own folder, not the
    current one, heads sys.path, so an installed copy elsewhere would otherwise be imported)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                          capture_output=True, text=True, check=True, env=env).stdout


def test_readme_example_computes_the_stated_gradients(capsys):
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    t = np.tanh(-0.35)
    assert np.isclose(namespace["loss"].item(), t)
    np.testing.assert_allclose(namespace["x"].grad, (1 - t**2) * np.array([[0.3, 0.2, -0.5]]), rtol=1e-5)
    np.testing.assert_allclose(namespace["w"].grad.T, (1 - t**2) * np.array([[1.0, -2.0, 0.5]]), rtol=1e-5)
    printed = capsys.readouterr().out.splitlines()[-1]
    stated = re.search(r"\.formula\)\s+# (\{.*\})", block).group(1)    # the comment says what it prints
    assert printed == stated == str({"x": "dx = dy ⊙ (1 − y²)"})


def test_ci_runs_exactly_the_test_command_the_readme_gives():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"Install and run the tests.*?```\n(.*?)\n```", readme, re.S).group(1)
    assert (ROOT / ".ci" / "run").read_text().splitlines()[-1] == command


def test_every_readme_python_block_runs():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md block {i}", "exec"), {})


def test_examples_are_numbered_in_the_lesson_order_of_docs_readme():
    numbered = sorted(p.name for p in (ROOT / "examples").glob("[0-9][0-9]_*.py"))
    assert [int(name[:2]) for name in numbered] == list(range(1, len(numbered) + 1))
    path = (ROOT / "docs" / "README.md").read_text()
    positions = [path.index(f"examples/{name}") for name in numbered]
    assert positions == sorted(positions), "docs/README.md must list the examples in number order"


def test_backprop_by_hand_example():
    out = run_example("01_backprop_by_hand.py")
    assert "hand-derived gradients match backward()" in out and "gradcheck: True" in out


def test_attention_by_hand_prints_the_worked_example_matrices():
    out = run_example("03_attention_by_hand.py")
    assert "value P = softmax(S) (rows sum to 1)  (3, 3)\n[[0.1400 0.2840 0.5760]" in out
    assert "gradient dK = s · dSᵀ Q  (3, 2)\n[[-0.3334  0.9843]" in out
    assert "gradient dX = dQ W_Qᵀ + dK W_Kᵀ + dV W_Vᵀ  (3, 4)\n[[ 0.2342  0.1256  1.0992 -0.4138]" in out
    assert out.rstrip().endswith("dX is the sum of its three paths: checked")


@pytest.mark.slow
def test_sqrt_dk_experiment_table_and_plot(tmp_path):
    out = run_example("04_why_sqrt_dk.py", "--plot", str(tmp_path / "p.png"))
    rows = {int(m[0]): [float(x) for x in m[1:]] for m in
            re.findall(r"^\s*(\d+) \|\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+) \|\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$",
                       out, re.M)}
    assert sorted(rows) == [4, 16, 64, 256, 1024, 4096]
    scaled_max_p = [rows[d][0] for d in sorted(rows)]
    raw_max_p, raw_entropy = ([rows[d][i] for d in sorted(rows)] for i in (4, 5))
    assert max(scaled_max_p) - min(scaled_max_p) < 0.05            # flat with the scale
    assert raw_max_p == sorted(raw_max_p) and raw_max_p[-1] > 0.95  # saturates without it
    assert raw_entropy == sorted(raw_entropy, reverse=True) and raw_entropy[-1] < 0.1
    assert rows[4096][6] < rows[16][6] / 3                          # ‖dS‖/‖dP‖ collapses
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_training_comparison_runs_on_a_small_budget():
    """The table's format only: 2 × 12 steps (the comparison itself needs the default 300)."""
    out = run_example("05_train_without_scaling.py", "--steps", "12", "--eval-size", "10")
    assert "loss@12" in out
    assert re.search(r"1/√d_k = 0.125 \|\s+\d\.\d{4} \|\s+\d+\.\d%", out)
    assert re.search(r"1 \(none\) \|\s+\d\.\d{4} \|\s+\d+\.\d%", out)


@pytest.mark.slow
def test_length_generalisation_runs_on_a_small_budget():
    out = run_example("09_length_generalisation.py", "--steps", "3", "--lists", "4")
    cell = r"\s+\d+\.\d% /\s+\d+\.\d% \|"
    for positions in ("learned", "rope"):
        assert re.search(rf"^\s*{positions} \|" + cell * 5 + r" \d+ s$", out, re.M), out


@pytest.mark.slow
def test_positions_for_add_prints_a_row_per_model_on_a_small_budget():
    out = run_example("10_positions_for_add.py", "--steps", "3", "--seeds", "0", "1", "--eval-size", "8")
    assert "add, 3 steps, d_model 64, 4 heads, 2 layers; held-out exact match on 8 prompts per seed" in out
    for encoding in ("most significant first", "least significant first"):
        for model in ("learned positions (default)", "RoPE (--arch llama)"):
            row = rf"^\s*{encoding} \|\s+{re.escape(model)} \|\s+\d+\.\d% \|\s+\d+\.\d% \| \d+ s$"
            assert re.search(row, out, re.M), out


def test_multi_head_shapes_example():
    out = run_example("06_multi_head_shapes.py")
    assert "P per head                (2, 2, 5, 7)" in out
    assert out.rstrip().endswith("both traces equal nn.MultiHeadAttention's output")


@pytest.mark.slow
def test_epsilon_experiment_shows_truncation_then_round_off_as_gradient_checking_md_says(tmp_path):
    """The figures docs/gradient_checking.md quotes (and its plot's command) are these."""
    out = run_example("02_gradcheck_report.py", "--epsilon", "--plot", str(tmp_path / "eps.png"))
    rows = {float(m[0]): (float(m[1]), float(m[2]))
            for m in re.findall(r"^\s+(\de-\d\d)\s+(\S+)\s+(\S+)$", out, re.M)}
    assert sorted(rows) == [10.0 ** -k for k in range(12, 0, -1)]
    f64 = {eps: errors[0] for eps, errors in rows.items()}
    f32 = {eps: errors[1] for eps, errors in rows.items()}
    assert "float64: smallest error 1.1e-11 at ε = 1e-05" in out
    assert "float32: smallest error 3.2e-06 at ε = 1e-02" in out
    assert 5e-5 < f64[1e-1] < 5e-4 and 5e-5 < f64[1e-12] < 5e-4     # about 1e-4 at both ends
    assert f64[1e-6] < 1e-10                                         # gradcheck's ε
    assert len({f32[10.0 ** -k] for k in range(7, 13)}) == 1         # numeric 0: the whole gradient
    assert (tmp_path / "eps.png").read_bytes()[:4] == b"\x89PNG"
    page = (ROOT / "docs" / "gradient_checking.md").read_text()
    assert "python examples/02_gradcheck_report.py --epsilon --plot docs/img/gradcheck_epsilon.png" in page


FIGURES = re.compile(r"<!-- figures: (\w+) -->\n(.*?)<!-- end figures: \1 -->", re.S)


def test_language_model_head_measures_count_what_they_say():
    """attention_by_offset and attention_on_mark (example 11) on maps whose answer is known."""
    example = runpy.run_path(str(ROOT / "examples" / "11_language_model.py"))    # its functions only
    T = 5
    previous = np.zeros((1, 1, T, T))                      # every query on the key before it
    previous[0, 0, np.arange(1, T), np.arange(T - 1)] = 1
    previous[0, 0, 0, 0] = 1                               # the first query sees only itself
    np.testing.assert_allclose(example["attention_by_offset"](previous), [[1 / T, 1, 0]])
    ids = np.array([[7, 1, 1, 7, 1, 1]])                    # 7: the mark, at positions 0 and 3
    on_mark = np.zeros((1, 2, 6, 6))
    on_mark[0, 0, np.arange(6), [0, 0, 0, 0, 0, 3]] = 1      # head 0: always the latest mark
    on_mark[0, 1, np.arange(6), np.arange(6)] = 1            # head 1: itself
    weights, even = example["attention_on_mark"](on_mark, ids, [7])
    # queries 2, 3, 4 (mark 0 at or before t − 2) and 5 (mark 3): head 0 finds each
    np.testing.assert_allclose(weights, [1, 0])
    np.testing.assert_allclose(even, np.mean(1 / np.array([3, 4, 5, 6])))


@pytest.mark.slow
def test_language_model_figures_on_a_small_budget(tmp_path):
    """Example 11 trains (50 steps here), then writes each figure between its markers in a copy
    of docs/language_model.md and leaves the rest of the page as it was."""
    original = (ROOT / "docs" / "language_model.md").read_text()
    page = tmp_path / "language_model.md"
    page.write_text(original)
    run_example("11_language_model.py", "--out", str(tmp_path / "run"), "--steps", "50",
                "--eval-size", "8", "--page", str(page))
    written = page.read_text()
    assert FIGURES.sub("", written) == FIGURES.sub("", original)
    figures = dict(FIGURES.findall(written))
    assert set(figures) == {"summary", "run", "heads", "marks", "sample"}
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    rows = re.findall(r"^\| (\d+) \| (\S+)", figures["run"], re.M)
    assert rows == [("0", "4.63"), ("25", f"{metrics['val_loss'][0]:.2f}"),
                    ("50", f"**{metrics['validation_loss']:.4f}**")]
    shown = re.search(r"^\| 50 \|.*\| `(.+)` \|$", figures["run"], re.M).group(1)   # the final report's
    position = 0
    for piece in shown.split(" ⋯ "):                      # in order in the sample, runs of blanks between
        text = piece.replace("↵", "\n").replace("\\|", "|")
        position = metrics["sample"].index(text, position) + len(text)
    assert len(shown) > 40
    summary = " ".join(figures["summary"].split())                               # unwrapped
    assert "`tinygrad-attn train text --eval-every 25 --steps 50 --eval-size 8`" in summary
    heads = re.findall(r"^\| layer 0, head (\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", figures["heads"],
                       re.M)
    assert [int(h[0]) for h in heads] == [0, 1, 2, 3]
    assert all(0 <= float(w) <= 1 for h in heads for w in h[1:])
    assert len(re.findall(r"^\| (newline|quote|open bracket) ", figures["marks"], re.M)) == 3
    assert figures["sample"].startswith("```text\ndef ") and figures["sample"].endswith("```\n")


def test_language_model_prose_quotes_only_its_figures():
    """What docs/language_model.md says around the figures example 11 writes is in them, so a new
    run cannot leave stale prose behind unnoticed: every number with two decimals or more is in
    the figures or in the page's code (its yardsticks, asserted), every piece of a sample that the
    list "What it learned first" quotes is in the run's table."""
    page = (ROOT / "docs" / "language_model.md").read_text()
    figures = dict(FIGURES.findall(page))
    code = "\n".join(re.findall(r"```python\n(.*?)```", page, re.S))
    prose = FIGURES.sub("", re.sub(r"```.*?```", "", page, flags=re.S))
    numbers = re.findall(r"(?<![\w.])\d\.\d{2,}(?![\w.])", prose)
    assert len(numbers) >= 8
    assert [n for n in numbers if n not in "\n".join(figures.values()) and n not in code] == []
    learned = prose.split("What it learned first, in order:\n\n", 1)[1].split("\n\n", 1)[0]
    quoted = re.findall(r"`([^`]+)`", learned)
    assert len(quoted) > 8
    assert [q for q in quoted if q not in figures["run"]] == []
