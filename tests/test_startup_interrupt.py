"""Ctrl-C at any moment after Python has started, while the package is still loading too, ends
``tinygrad-attn`` and ``python -m tinygrad_attn`` with one line and exit code 130; ``import
tinygrad_attn`` elsewhere still raises KeyboardInterrupt as usual."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tinygrad_attn_cli
from tinygrad_attn import startup_interrupt
from tinygrad_attn.commands import cli

ROOT = Path(__file__).resolve().parents[1]
posix_only = pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals")

# How each way of starting is run here (the installed script does what pip's wrapper does: import
# tinygrad_attn_cli and exit with main()), and the first module of ours each imports.
ENTRY_POINTS = {
    "python -m tinygrad_attn": (["-m", "tinygrad_attn", "--help"], "tinygrad_attn.startup_interrupt"),
    "tinygrad-attn": (["-c", "import sys; from tinygrad_attn_cli import main; sys.exit(main())", "--help"],
                      "tinygrad_attn_cli"),
}


@pytest.fixture(autouse=True)
def ctrl_c_as_in_a_terminal():
    """Ctrl-C raises KeyboardInterrupt, also when the suite was started ignoring SIGINT (a child
    started meanwhile gets the default action, as in a terminal)."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _interrupted_after_startup(args: list[str], first: str, delay: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of Python run with `args`, sent SIGINT `delay` seconds after
    Python's own startup ended: when module `first`, the first of ours, is imported (before it
    come site, the environment's .pth files, and runpy or the wrapper's imports, ~30 ms here).
    ``-X importtime`` writes a line as each import ends, which is how that is seen from here;
    those lines are left out of the stderr returned."""
    child = subprocess.Popen([sys.executable, "-X", "importtime", *args], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    started, lines = threading.Event(), []

    def read_stderr():
        for line in child.stderr:
            lines.append(line)
            if line.split("|")[-1].strip() == first:
                started.set()
        started.set()                                   # it ended without that line
    reader = threading.Thread(target=read_stderr)
    reader.start()
    started.wait(timeout=120)
    time.sleep(delay)
    child.send_signal(signal.SIGINT)                    # ignored by the OS if it has ended already
    out = child.stdout.read()
    child.wait(timeout=120)
    reader.join(timeout=120)
    return child.returncode, out, "".join(x for x in lines if not x.startswith("import time:"))


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_ctrl_c_at_any_moment_of_loading_is_one_line_and_130(entry):
    """Loading takes a few tenths of a second (NumPy, every module); each moment lands inside it or
    after the help was printed, never in a traceback. At least one must land inside it."""
    landed_inside = 0
    for delay in (0.005, 0.01, 0.02, 0.04, 0.07, 0.1, 0.2, 0.4):
        code, out, err = _interrupted_after_startup(*ENTRY_POINTS[entry], delay)
        assert "Traceback" not in err, (delay, err)
        if code in (0, -signal.SIGINT):     # done; or Python was ending, its handler gone (the shell's 130)
            assert "usage: tinygrad-attn" in out and err == "", (delay, code, out, err)
        else:
            assert (code, err) == (130, "interrupted\n"), (delay, code, out, err)
            landed_inside += out == ""
    assert landed_inside, "no moment landed while the command loaded"


# A Ctrl-C at a chosen moment of the import: when the command line's module is looked for.
CTRL_C_WHILE_IMPORTING = """
import signal, sys
class Interrupting:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "tinygrad_attn.commands.cli":
            signal.raise_signal(signal.SIGINT)
sys.meta_path.insert(0, Interrupting)
"""


@posix_only
@pytest.mark.parametrize("start", [
    "import tinygrad_attn_cli; sys.exit(tinygrad_attn_cli.main())",
    "import runpy; sys.argv[0] = '-m'; sys.orig_argv[-len(sys.argv)] = 'tinygrad_attn'; "
    "runpy.run_module('tinygrad_attn', run_name='__main__')",
], ids=["tinygrad-attn", "python -m tinygrad_attn"])
def test_ctrl_c_inside_an_import_ends_the_command_with_one_line(start):
    """As python -m has it: sys.argv[0] is "-m" while the package is imported, and the word typed
    before the arguments names the module."""
    child = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_IMPORTING + start, "dtypes"], cwd=ROOT,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (child.returncode, child.stdout, child.stderr) == (130, "", "interrupted\n")


@pytest.mark.parametrize("typed, expected", [
    (["python", "-m", "tinygrad_attn", "train", "copy"], True),
    (["python", "-X", "dev", "-W", "error", "-m", "tinygrad_attn", "train", "copy"], True),
    (["python", "-Im", "tinygrad_attn", "train", "copy"], True),
    (["python", "-mtinygrad_attn", "train", "copy"], True),
    (["python", "-m", "benchmarks", "train", "copy"], False),       # another module, loading us
    (["python", "-m", "tinygrad_attn.commands.cli", "train", "copy"], False),
])
def test_python_m_is_told_apart_from_other_modules(monkeypatch, typed, expected):
    monkeypatch.setattr(sys, "argv", ["-m", "train", "copy"])      # as runpy has it while importing
    monkeypatch.setattr(sys, "orig_argv", typed)
    assert startup_interrupt.run_as_the_command("tinygrad_attn") is expected


@pytest.mark.parametrize("argv", [["script.py"], ["-c"], [""]])
def test_a_script_or_notebook_importing_the_package_is_not_the_command(monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", ["python", *argv])
    assert not startup_interrupt.run_as_the_command("tinygrad_attn")
    startup_interrupt.quiet_while_run_as_the_command("tinygrad_attn")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_under_python_m_ctrl_c_is_the_command_s_again_once_it_has_loaded(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["-m", "train"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "tinygrad_attn", "train"])
    startup_interrupt.quiet_while_run_as_the_command("tinygrad_attn")
    assert getattr(signal.getsignal(signal.SIGINT), startup_interrupt.LOADING_MARK)
    startup_interrupt.starting_done()                                # commands.cli.main does it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_script_s_handler_is_given_back_by_the_command_line(monkeypatch, capsys):
    handlers = []
    monkeypatch.setattr(sys, "argv", ["tinygrad-attn", "dtypes"])
    monkeypatch.setattr(cli, "build_parser", lambda real=cli.build_parser: (
        handlers.append(signal.getsignal(signal.SIGINT)), real())[1])
    assert tinygrad_attn_cli.main() == 0
    assert getattr(handlers[0], startup_interrupt.LOADING_MARK)      # while the commands load
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "float64" in capsys.readouterr().out


def test_a_handler_of_the_caller_s_own_is_left_alone():
    def own(signum, frame):
        pass
    signal.signal(signal.SIGINT, own)
    startup_interrupt.starting_done()
    assert signal.getsignal(signal.SIGINT) is own


def test_a_sigint_ignored_when_python_started_stays_ignored(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["-m", "train"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "tinygrad_attn", "train"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)                     # a background job
    startup_interrupt.quiet_while_run_as_the_command("tinygrad_attn")
    startup_interrupt.starting_done()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_importing_the_package_in_a_script_keeps_python_s_ctrl_c():
    code = ("import signal, tinygrad_attn\n"
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out == "True\n"
