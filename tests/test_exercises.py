"""The exercise checker: reference solutions pass, untouched stubs say what to write, and a wrong
solution is reported naming the case, the input and the element."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinygrad_attn.commands.cli import main

ROOT = Path(__file__).resolve().parents[1]
STUBS = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.py"))


def check(path, capsys):
    code = main(["check", str(path)])
    return code, capsys.readouterr().out


def test_there_are_five_exercises_each_with_a_solution():
    assert [p.name for p in STUBS] == ["01_softmax_backward.py", "02_layer_norm_backward.py",
                                       "03_attention_backward.py", "04_online_softmax.py",
                                       "05_rope_backward.py"]
    assert all((ROOT / "exercises" / "solutions" / p.name).is_file() for p in STUBS)


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_reference_solution_passes(stub, capsys):
    code, out = check(ROOT / "exercises" / "solutions" / stub.name, capsys)
    assert code == 0, out
    assert re.fullmatch(rf"{stub.name}: all \d cases pass \(.+\)\. Well done\.\n", out)


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_untouched_stub_says_what_is_not_implemented(stub, capsys):
    code, out = check(stub, capsys)
    function = {"01": "Softmax.backward", "02": "LayerNorm.backward", "03": "Attention.backward",
                "04": "online_update", "05": "Rope.backward"}[stub.name[:2]]
    assert code == 1
    assert out.startswith(f"{stub.name}: {function} (line ") and "is not implemented yet" in out
    assert re.search(r"Read docs/\w+\.md, write it, then run this check again", out)


def planted(tmp_path, name, old, new):
    """A copy of the reference solution `name` with one deliberate mistake."""
    text = (ROOT / "exercises" / "solutions" / name).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_wrong_attention_backward_names_case_input_and_element(tmp_path, capsys):
    # The classic slip: dK = s · dS Q... written without the transpose is a shape error, so plant
    # the subtler one: forgetting the scale on dK only.
    path = planted(tmp_path, "03_attention_backward.py", "d_k = ctx.scale * (", "d_k = (")
    code, out = check(path, capsys)
    assert code == 1
    assert out.startswith("03_attention_backward.py: Attention.backward is wrong in case 1 of 4 "
                          "(3 queries, 4 keys, no mask): the gradient for input k (the keys K) does "
                          "not match central differences.")
    assert re.search(r"input 1 \(k\) of shape \(4, 2\): worst element \(\d, \d\) has analytic -?[\d.]+"
                     r"(e-?\d+)?, numeric -?[\d.]+", out)


def test_wrong_softmax_backward_is_caught_although_a_sum_loss_would_miss_it(tmp_path, capsys):
    path = planted(tmp_path, "01_softmax_backward.py", "(grad - (grad * y).sum(axis=-1, keepdims=True))",
                   "(grad - grad.sum(axis=-1, keepdims=True))")
    code, out = check(path, capsys)
    assert code == 1 and "the gradient for input x (the logits)" in out and "worst element (" in out


def test_rope_backward_rotating_forward_again_is_caught_in_the_case_with_positions(tmp_path, capsys):
    # Rotating by +θ instead of −θ: right only where θ = 0, so the first row of case 1 hides it.
    path = planted(tmp_path, "05_rope_backward.py", "[g1 * cos + g2 * sin, g2 * cos - g1 * sin]",
                   "[g1 * cos - g2 * sin, g2 * cos + g1 * sin]")
    code, out = check(path, capsys)
    assert code == 1
    assert out.startswith("05_rope_backward.py: Rope.backward is wrong in case 1 of 3 (5 rows of 4 "
                          "features, positions 0 … 4): the gradient for input x (the rows to rotate)")


def test_layer_norm_without_the_variance_path_names_x(tmp_path, capsys):
    path = planted(tmp_path, "02_layer_norm_backward.py",
                   " - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))", ")")
    code, out = check(path, capsys)
    assert code == 1 and "the gradient for input x (the features)" in out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the planted bug computes −inf − (−inf)
def test_online_update_without_masked_row_care_reports_the_nan_element(tmp_path, capsys):
    path = planted(tmp_path, "04_online_softmax.py", "np.where(np.isfinite(m_new), m_new, 0)", "m_new")
    code, out = check(path, capsys)
    assert code == 1
    assert ("case 3 of 4 (query 1's first block of keys is fully masked (−inf)): after the last block, "
            "output O[1, 0] = a / l, but softmax(S) V computed whole gives") in out
    assert "yours is nan" in out and "exp(−inf − (−inf))" in out


def test_online_update_that_forgets_to_rescale_a(tmp_path, capsys):
    path = planted(tmp_path, "04_online_softmax.py", "a * rescale + weights @ values", "a + weights @ values")
    code, out = check(path, capsys)
    assert code == 1 and "case 1 of 4" in out and "output O[" in out


def test_an_error_in_the_learners_code_is_shown_with_its_line(tmp_path, capsys):
    path = planted(tmp_path, "03_attention_backward.py", "d_k = ctx.scale * (np.swapaxes(d_s, -1, -2) @ q)",
                   "d_k = ctx.scale * (d_s @ q)")
    code, out = check(path, capsys)
    assert code == 1 and re.match(r"03_attention_backward.py: Attention.backward \(line \d+\) raised "
                                  r"ValueError: matmul", out)


def test_a_file_that_is_not_an_exercise_exits_2(tmp_path, capsys):
    path = tmp_path / "01_mystery.py"
    path.write_text("x = 1\n")
    assert main(["check", str(path)]) == 2
    assert "01_mystery.py is not one of the exercises" in capsys.readouterr().err


def test_the_command_line_runs_it():
    result = subprocess.run([sys.executable, "-m", "tinygrad_attn", "check", str(STUBS[0])],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and "not implemented yet" in result.stdout


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_solution_is_the_stub_with_only_the_learners_body_filled_in(stub):
    """The given code (forward, signatures, docstrings) is the same in stub and solution, so a
    learner can diff them and a change to one cannot silently leave the other behind."""
    text = stub.read_text()
    start = re.search(r"^(class|def) ", text, re.M).start()
    given = text[start:text.index("raise NotImplementedError")]
    assert given in (ROOT / "exercises" / "solutions" / stub.name).read_text()
