"""The exercise checker: reference solutions pass, untouched stubs say what to write, a wrong
solution is reported naming the case, the input and the element, and a solution that exits,
hangs or is interrupted is never taken for a pass.

Most tests run the child's checks in this process (``run_child`` then ``verdict``, what the child
process runs): starting a Python per check would slow the suite. The tests of exiting, hanging
and Ctrl-C, and one solution per exercise, go through the real child process."""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinygrad_attn.commands.cli import main
from tinygrad_attn.exercises import checker
from tinygrad_attn.exercises.checker import find_exercise, verdict
from tinygrad_attn.exercises.child import run_child

ROOT = Path(__file__).resolve().parents[2]
STUBS = sorted((ROOT / "exercises").glob("[0-9][0-9]_*.py"))


def check(path, capsys, tmp_path=None):
    """(exit code, message) of the checker, its child's work done in this process."""
    path = Path(path).resolve()
    name, exercise = find_exercise(path)
    report = Path(tmp_path or path.parent) / f"{path.stem}.report"
    run_child(path, report, name)
    entries = [__import__("json").loads(line) for line in report.read_text().splitlines()]
    code, message = verdict(path.name, name, exercise, entries, 0, 30)
    return code, message + "\n"


def check_in_child(path, capsys, *extra):
    """The real command: the solution runs in a child process."""
    code = main(["check", *extra, str(path)])
    return code, capsys.readouterr().out


def test_there_are_seven_exercises_each_with_a_solution():
    assert [p.name for p in STUBS] == ["00_scalar_engine.py", "01_softmax_backward.py",
                                       "02_layer_norm_backward.py", "03_attention_backward.py",
                                       "04_online_softmax.py", "05_numeric_gradient.py",
                                       "06_rope_backward.py"]
    assert all((ROOT / "exercises" / "solutions" / p.name).is_file() for p in STUBS)


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_reference_solution_passes(stub, capsys):
    code, out = check_in_child(ROOT / "exercises" / "solutions" / stub.name, capsys)
    assert code == 0, out
    assert re.fullmatch(rf"{stub.name}: all \d cases pass \(.+\)\. Well done\.\n", out)


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_untouched_stub_says_what_is_not_implemented(stub, capsys, tmp_path):
    code, out = check(stub, capsys, tmp_path)
    function = {"00": "toposort", "01": "Softmax.backward", "02": "LayerNorm.backward",
                "03": "Attention.backward", "04": "online_update", "05": "numeric_gradient",
                "06": "Rope.backward"}[stub.name[:2]]
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
    assert out.startswith("03_attention_backward.py: case 1 of 4 (3 queries, 4 keys, no mask; inputs "
                          "q (3, 2), k (4, 2), v (4, 3)) failed:\n  Attention.backward: the gradient "
                          "for input k (the keys K) does not match central differences.")
    assert "sign is flipped" not in out
    assert re.search(r"input 1 \(k\) of shape \(4, 2\): worst element \(\d, \d\) has analytic -?[\d.]+"
                     r"(e-?\d+)?, numeric -?[\d.]+", out)


def test_wrong_softmax_backward_is_caught_although_a_sum_loss_would_miss_it(tmp_path, capsys):
    path = planted(tmp_path, "01_softmax_backward.py", "(grad - (grad * y).sum(axis=-1, keepdims=True))",
                   "(grad - grad.sum(axis=-1, keepdims=True))")
    code, out = check(path, capsys)
    assert code == 1 and "the gradient for input x (the logits)" in out and "worst element (" in out


def test_rope_backward_rotating_forward_again_is_caught_in_the_case_with_positions(tmp_path, capsys):
    # Rotating by +θ instead of −θ: right only where θ = 0, so the first row of case 1 hides it.
    path = planted(tmp_path, "06_rope_backward.py", "[g1 * cos + g2 * sin, g2 * cos - g1 * sin]",
                   "[g1 * cos - g2 * sin, g2 * cos + g1 * sin]")
    code, out = check(path, capsys)
    assert code == 1
    assert out.startswith("06_rope_backward.py: case 1 of 3 (5 rows of 4 features, positions 0 … 4; inputs "
                          "x (5, 4)) failed:\n  Rope.backward: the gradient for input x (the rows to rotate) "
                          "does not match central differences.")


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
    assert ("case 3 of 4 (query 1's first block of keys is fully masked (−inf); scores (3, 10), values "
            "(10, 2)) failed:\n  online_update: after the last block, output O[1, 0] = a / l, but "
            "softmax(S) V computed whole gives") in out
    assert "yours is nan" in out and "exp(−inf − (−inf))" in out


def test_online_update_that_forgets_to_rescale_a(tmp_path, capsys):
    path = planted(tmp_path, "04_online_softmax.py", "a * rescale + weights @ values", "a + weights @ values")
    code, out = check(path, capsys)
    assert code == 1 and "case 1 of 4" in out and "output O[" in out


def test_an_error_in_the_learners_code_is_shown_with_its_line(tmp_path, capsys):
    path = planted(tmp_path, "03_attention_backward.py", "d_k = ctx.scale * (np.swapaxes(d_s, -1, -2) @ q)",
                   "d_k = ctx.scale * (d_s @ q)")
    code, out = check(path, capsys)
    assert code == 1 and re.match(r"03_attention_backward.py: case 1 of 4 \(3 queries, 4 keys, no mask; "
                                  r"inputs q \(3, 2\), k \(4, 2\), v \(4, 3\)\) failed:\n  "
                                  r"Attention.backward \(line \d+\) raised ValueError: matmul", out)


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


SOFTMAX_BODY = "        y = ctx.saved[\"y\"]\n"
LOOP = "        while True:\n            pass\n"


CASE_1 = "case 1 of 3 (one row of 4 logits; inputs x (4,))"


@pytest.mark.parametrize("ending, message", [
    ("import sys; sys.exit()",
     f"{CASE_1} failed:\n  Softmax.backward (line 31) raised SystemExit (a solution must not call "
     "sys.exit())"),
    ("import os; os._exit(0)", f"the checker's process ended with exit code 0 during {CASE_1}, before every "
                               "case was checked; only 0 of 3 passed. A solution must not call sys.exit() or "
                               "os._exit().")])
def test_a_solution_that_exits_is_never_a_pass(tmp_path, capsys, ending, message):
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY, f"        {ending}\n")
    code, out = check_in_child(path, capsys)
    assert (code, out) == (1, f"01_softmax_backward.py: {message}\n")


def test_an_endless_loop_is_stopped_at_the_time_limit(tmp_path, capsys):
    """The limit times the solution only, from the import of the learner's file (about 10 ms here
    before case 1 starts): the child's own start, seconds on a busy machine, is not counted."""
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY, LOOP)
    code, out = check_in_child(path, capsys, "--timeout", "2")
    assert code == 1
    assert out == ("01_softmax_backward.py: case 1 of 3 (one row of 4 logits; inputs x (4,)) did not finish "
                   "within 2 s (an endless loop?). Give it longer with --timeout SECONDS.\n")


def test_a_child_that_does_not_start_in_time_is_not_blamed_on_the_solution(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(checker, "STARTUP_LIMIT", 0.0)      # no Python starts in no time
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY, SOFTMAX_BODY)
    code, out = check_in_child(path, capsys)
    assert code == 1
    assert out == ("01_softmax_backward.py: the checker's process did not start within 0 s (a very busy "
                   "machine?); your file was not run. Try again.\n")


def spinning(tmp_path, marker):
    """The softmax solution whose backward starts a `sleep 600` of its own, writes its process id
    and the sleep's to `marker`, then spins."""
    return planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY,
                   "        import os, subprocess, pathlib\n"
                   "        sleeper = subprocess.Popen(['sleep', '600'])\n"
                   f"        pathlib.Path({str(marker)!r}).write_text(f'{{os.getpid()}} {{sleeper.pid}}')\n"
                   + LOOP)


def gone(pid):
    """True once process `pid` has ended (a zombie waiting for its parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


# The command with SIGINT, SIGTERM and SIGHUP as in a terminal, also when the suite runs in the
# background (SIGINT ignored) or under nohup (SIGHUP ignored).
AS_IN_A_TERMINAL = ("import signal, sys\n"
                    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
                    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
                    "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
                    "from tinygrad_attn.commands.cli import main\n"
                    "sys.exit(main(sys.argv[1:]))\n")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to see processes end")
@pytest.mark.parametrize("name, code, how", [("SIGINT", 130, "interrupted (Ctrl-C)"),
                                             ("SIGTERM", 143, "terminated by SIGTERM"),
                                             ("SIGHUP", 129, "terminated by SIGHUP")])
def test_a_signal_to_the_checker_stops_it_and_kills_the_solutions_processes(tmp_path, name, code, how):
    """The solution (in a session of its own) went on spinning at 100% CPU under PID 1 after the
    checker got SIGTERM or SIGHUP, and its `sleep` held the checker's stdout open."""
    marker = tmp_path / "pids"
    path = spinning(tmp_path, marker)
    command = subprocess.Popen([sys.executable, "-c", AS_IN_A_TERMINAL, "check", str(path)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):               # until the solution spins in case 1 (or 300 s have passed)
        if command.poll() is not None or marker.exists() and marker.read_text().count(" ") == 1:
            break
        time.sleep(0.1)
    command.send_signal(getattr(signal, name))
    out, err = command.communicate(timeout=300)     # stdout ends: the sleep (600 s) no longer holds it
    assert command.returncode == code and "Traceback" not in err, err
    assert out == f"01_softmax_backward.py: check {how} during {CASE_1}\n"
    assert all(gone(int(pid)) for pid in marker.read_text().split())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to see processes end")
def test_a_process_the_solution_leaves_behind_is_killed_with_it(tmp_path):
    """A solution that starts `sleep 20` and passes held `check … | cat` open 21 s after the verdict:
    here a `sleep 600` would hold the pipe past the 300 s wait."""
    marker = tmp_path / "pid"
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY,
                   "        import subprocess, pathlib\n"
                   f"        p = pathlib.Path({str(marker)!r})\n"
                   "        if not p.exists():\n"
                   "            p.write_text(str(subprocess.Popen(['sleep', '600']).pid))\n" + SOFTMAX_BODY)
    result = subprocess.run([sys.executable, "-m", "tinygrad_attn", "check", str(path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.endswith("Well done.\n"), result.stdout
    assert gone(int(marker.read_text()))


FORGED_PASSES = ("        import json, os, sys\n"
                 "        fd = int(sys.argv[2])\n"
                 "        for n in (1, 2, 3):\n"
                 "            lines = json.dumps({'start': n}) + '\\n' + json.dumps(RECORD(n)) + '\\n'\n"
                 "            os.write(fd, lines.encode())\n"
                 "        os._exit(0)\n")


@pytest.mark.parametrize("record, message", [
    ("{'passed': n}",
     "the checker's process sent no values for this case \\(a solution wrote over its report\\?\\)"),
    ("{'passed': n, 'results': {}}",
     r"your code gave no output for this case \(the true one has shape \(4,\)\)"),
    ("{'passed': n, 'results': {'output': {'shape': [4], 'values': [0.25] * 4}, 'dx': {'shape': [4], "
     "'values': [0.0] * 4}}}",
     r"output\[0\] is 0.25 from your code, but 0.\d+ as this checker computes it itself"),
    ("{'passed': n, 'results': {'output': {'shape': [2, 2], 'values': [0.25] * 4}}}",
     r"your code's output has shape \(2, 2\); the true one has shape \(4,\)"),
    ("{'passed': n, 'results': {'output': {'shape': 'x', 'values': None}}}",
     r"your code gave no output for this case \(the true one has shape \(4,\)\)")])
def test_records_a_solution_writes_on_the_report_never_make_a_pass(tmp_path, capsys, record, message):
    """A solution appending {"passed": n} to the report and calling os._exit(0) got "all 3 cases
    pass. Well done." with no backward written: the parent now compares the values itself."""
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY,
                   FORGED_PASSES.replace("RECORD(n)", record))
    code, out = check_in_child(path, capsys)
    assert code == 1
    assert re.fullmatch(rf"01_softmax_backward.py: {re.escape(CASE_1)} failed:\n  {message}\n", out), out


@pytest.mark.parametrize("garbage", ["b'\\xff\\xfe'", "b'not json'", "b'[1, 2]'", "b'{\"passed\": 1'",
                                     "b'\\x00' * 70000"])
def test_garbage_on_the_report_is_skipped_without_a_traceback(tmp_path, capsys, garbage):
    """Non-JSON, bytes that are not UTF-8, a cut record or 70 kB of zeros, written before the real
    solution runs: the checker skips them (it crashed with a raw JSONDecodeError or
    UnicodeDecodeError), and the real solution's values still pass."""
    solution = (ROOT / "exercises" / "solutions" / "01_softmax_backward.py").read_text()
    path = tmp_path / "01_softmax_backward.py"
    path.write_text(f"import os, sys\nos.write(int(sys.argv[2]), {garbage} + b'\\n')\n" + solution)
    code, out = check_in_child(path, capsys)
    assert code == 0
    assert out.splitlines()[-1] == ("01_softmax_backward.py: all 3 cases pass (gradcheck passed; output and "
                                    "gradients checked against tinygrad_attn's own op). Well done.")


@pytest.mark.parametrize("body, message", [
    ("        class Odd(Exception):\n            def __str__(self):\n                raise RuntimeError\n"
     "        raise Odd()\n",
     "Softmax.backward (line 34) raised Odd: (its message could not be shown: str() raised RuntimeError)"),
    ("        raise KeyboardInterrupt\n", "Softmax.backward (line 31) raised KeyboardInterrupt")])
def test_odd_exceptions_in_backward_are_named(tmp_path, capsys, body, message):
    """Each printed a traceback, then "A solution must not call sys.exit() or os._exit()"."""
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY, body)
    code, out = check_in_child(path, capsys)
    assert (code, out) == (1, f"01_softmax_backward.py: {CASE_1} failed:\n  {message}\n")


def test_a_segfault_is_called_a_crash(tmp_path, capsys):
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY,
                   "        import ctypes\n        ctypes.string_at(0)\n")
    code, out = check_in_child(path, capsys)
    assert code == 1
    assert out.splitlines()[-1] == (f"01_softmax_backward.py: the checker's process was killed by SIGSEGV (a "
                                    f"crash: a segmentation fault, in native code) during {CASE_1}, before "
                                    f"every case was checked; only 0 of 3 passed.")


def test_what_the_solution_prints_comes_first_and_the_verdict_last(tmp_path, capsys):
    """A solution printing "all 3 cases pass. Well done." (and an escape sequence that would hide
    what follows) cannot pass for the checker: its lines are shown behind "| ", escaped."""
    path = planted(tmp_path, "01_softmax_backward.py", SOFTMAX_BODY,
                   "        print('01_softmax_backward.py: all 3 cases pass. Well done.\\x1b[8m')\n"
                   "        raise NotImplementedError('not yet')\n")
    code, out = check_in_child(path, capsys)
    assert code == 1
    assert out == ("your file printed:\n"
                   "  | 01_softmax_backward.py: all 3 cases pass. Well done.\\x1b[8m\n"
                   "01_softmax_backward.py: Softmax.backward (line 32) is not implemented yet (not yet).\n"
                   "  Read docs/softmax.md, write it, then run this check again.\n")


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf", "-inf", "soon"])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(tmp_path, capsys, value):
    """--timeout nan never timed out; 0 and -1 were taken ("did not finish within -1 s")."""
    with pytest.raises(SystemExit) as stop:
        main(["check", f"--timeout={value}", str(STUBS[1])])
    assert stop.value.code == 2
    why = f"expected a number of seconds, got {value!r}" if value == "soon" else \
        f"must be a positive, finite number of seconds, got {value}"
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"tinygrad-attn check: error: argument --timeout: {why}"


def test_a_backward_that_updates_the_gradient_in_place_passes(tmp_path, capsys):
    path = planted(tmp_path, "01_softmax_backward.py",
                   "        return (y * (grad - (grad * y).sum(axis=-1, keepdims=True)),)",
                   "        grad -= (grad * y).sum(axis=-1, keepdims=True)\n        grad *= y\n"
                   "        return (grad,)")
    code, out = check(path, capsys)
    assert code == 0, out


def test_a_flipped_sign_is_named(tmp_path, capsys):
    path = planted(tmp_path, "01_softmax_backward.py", "return (y * (grad", "return (-y * (grad")
    code, out = check(path, capsys)
    assert code == 1 and "case 1 of 3 (one row of 4 logits; inputs x (4,)) failed" in out
    assert "The sign is flipped: your gradient is −1 × the numeric one at every element." in out


def test_a_recursive_toposort_fails_the_deep_chain(tmp_path, capsys):
    recursive = ("    def visit(v, order, seen):\n        if id(v) not in seen:\n"
                 "            seen.add(id(v))\n            for p in v.parents:\n"
                 "                visit(p, order, seen)\n"
                 "            order.append(v)\n        return order\n    return visit(root, [], set())\n")
    first = "    order, visited, stack = [], set(), [(root, False)]"
    path = planted(tmp_path, "00_scalar_engine.py", first, recursive + first)
    code, out = check(path, capsys)
    assert code == 1 and out.startswith("00_scalar_engine.py: case 7 of 7 (a chain 3,000 operations deep")
    assert "RecursionError" in out


def test_a_backward_that_overwrites_instead_of_adding_is_caught(tmp_path, capsys):
    path = planted(tmp_path, "00_scalar_engine.py", "parent.grad += local * value.grad",
                   "parent.grad = local * value.grad")
    code, out = check(path, capsys)
    assert code == 1 and out.startswith("00_scalar_engine.py: case 1 of 7 (L = a · b + a: a is used twice")
    assert "leaf a.grad is" in out


def test_a_one_sided_difference_is_caught_by_the_first_case_which_says_so(tmp_path, capsys):
    path = planted(tmp_path, "05_numeric_gradient.py", "x[i] = original - eps\n        minus = f(x)",
                   "x[i] = original\n        minus = f(x)")
    path.write_text(path.read_text().replace("(plus - minus) / (2 * eps)", "(plus - minus) / eps"))
    code, out = check(path, capsys)
    assert code == 1 and out.startswith("05_numeric_gradient.py: case 1 of 5 (f(x) = Σ x³ with ε = 1e-2")
    assert re.search(r"element \[0\]: yours is -?[\d.]+, the true value is -?[\d.]+", out)
    assert "off by ±3xε at every element: that is a one-sided difference" in out


def test_nudging_a_copy_of_a_non_contiguous_x_is_caught(tmp_path, capsys):
    """x.reshape(-1) is a view only for a C-contiguous x: for a transpose it is a copy, f never
    sees the nudge, and every element comes out 0."""
    loop = ("    for i in np.ndindex(x.shape):       # a multi-index writes x itself, whatever its layout\n"
            "        original = x[i]\n        x[i] = original + eps\n        plus = f(x)\n"
            "        x[i] = original - eps\n        minus = f(x)\n        x[i] = original\n"
            "        grad[i] = (plus - minus) / (2 * eps)\n")
    flat = ("    flat, out = x.reshape(-1), grad.reshape(-1)\n    for i in range(flat.size):\n"
            "        original = flat[i]\n        flat[i] = original + eps\n        plus = f(x)\n"
            "        flat[i] = original - eps\n        minus = f(x)\n        flat[i] = original\n"
            "        out[i] = (plus - minus) / (2 * eps)\n")
    code, out = check(planted(tmp_path, "05_numeric_gradient.py", loop, flat), capsys)
    assert code == 1 and out.startswith("05_numeric_gradient.py: case 4 of 5 (f(x) = Σ c ⊙ x² for x = a.T")
    assert re.search(r"element \[0, 0\]: yours is 0, the true value is -?[\d.]+", out)
    assert "x.reshape(-1) or x.ravel() is a copy and writing it leaves x unchanged" in out


def test_a_numeric_gradient_that_leaves_x_changed_is_caught(tmp_path, capsys):
    path = planted(tmp_path, "05_numeric_gradient.py", "        x[i] = original\n        grad[i]",
                   "        grad[i]")
    code, out = check(path, capsys)
    assert code == 1 and "numeric_gradient changed x: put each element back" in out


def test_a_forward_and_backward_changed_together_pass_gradcheck_but_not_the_checkers_own_values(
        tmp_path, capsys):
    """A backward consistent with a wrong forward (here y = 2 · softmax) passes a gradcheck of the
    learner's own op; the parent compares the output with tinygrad_attn's softmax and refuses it."""
    path = planted(tmp_path, "01_softmax_backward.py", "y = e / e.sum(axis=-1, keepdims=True)",
                   "y = 2 * e / e.sum(axis=-1, keepdims=True)")
    right = "(grad * y).sum(axis=-1, keepdims=True)"
    path.write_text(path.read_text().replace(right, right + " / 2"))        # d(2s) = y ⊙ (dy − ⟨dy, y⟩ / 2)
    code, out = check(path, capsys, tmp_path)
    assert code == 1
    assert re.fullmatch(rf"01_softmax_backward.py: {re.escape(CASE_1)} failed:\n  output\[0\] is [\d.]+ from "
                        r"your code, but [\d.]+ as this checker computes it itself\n", out), out
