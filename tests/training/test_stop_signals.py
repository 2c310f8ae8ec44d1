"""A run stopped by SIGTERM or SIGHUP saves its last completed step as on Ctrl-C; a signal that comes
while that save is written leaves no temporary file, and every message about what was saved says
what the checkpoint on disk holds; leftover temporary files are removed when a run starts."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tinygrad_attn.training.run as run_module
from tinygrad_attn.commands import cli
from tinygrad_attn.training import checkpoint
from tinygrad_attn.training.run_folder import RunFolder

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]
ROOT = Path(__file__).resolve().parents[2]
posix_only = pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals")


@pytest.fixture(autouse=True)
def signals_as_in_a_terminal():
    """Ctrl-C raises KeyboardInterrupt and SIGTERM ends the process, also when the suite was
    started in the background (which ignores SIGINT) or under nohup."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in before.items():
        signal.signal(s, handler)

# The train command in a child process that, at the batch of step AT, says so on a file and waits
# for the signal SIGNAL: it lands inside that step whatever the machine's speed, through the
# command's own handler.
PAUSING_CHILD = """
import signal, sys, threading, time
from pathlib import Path
from tinygrad_attn.commands import cli
from tinygrad_attn.training import tasks
at, number, ready, argv = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
signal.signal(number, signal.SIG_DFL)       # as in a terminal, even if started ignoring it (nohup)
calls, real_batch = [0], tasks.ToyTask.batch
def batch(task, rng, size):
    calls[0] += 1
    if calls[0] == at:
        came, handler = threading.Event(), signal.getsignal(number)
        def on_signal(signum, frame):
            came.set()
            handler(signum, frame)                      # the command's handler: stop after this step
        signal.signal(number, on_signal)
        ready.write_text("waiting")
        while not came.is_set():
            time.sleep(0.001)
        signal.signal(number, handler)
    return real_batch(task, rng, size)
tasks.ToyTask.batch = batch
sys.exit(cli.main(argv))
"""


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_inside_a_step_saves_that_step_and_says_so(tmp_path, name):
    number = getattr(signal, name)
    out, ready = tmp_path / "run", tmp_path / "ready"
    flags = ["train", "reverse", "--steps", "30", *SMALL, "--save-every", "5", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-c", PAUSING_CHILD, "8", str(int(number)), str(ready), *flags],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 300
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(number)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + int(number), err
    assert err.strip().splitlines()[-1] == (f"terminated by {name} after step 8; saved it; resume with: "
                                            f"tinygrad-attn train reverse --resume {out}")
    assert "Traceback" not in err
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 8
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz"]      # no temporary, no lock


def _pressing_ctrl_c_after(step_pressed, monkeypatch):
    """The train command's loop with a real Ctrl-C (SIGINT) raised right after step `step_pressed`."""
    real_train = run_module.train

    def pressing_train(model, task, config, on_step, state, stop_after):
        def step_then_press(step, history):
            on_step(step, history)
            if step == step_pressed:
                signal.raise_signal(signal.SIGINT)
        return real_train(model, task, config, on_step=step_then_press, state=state, stop_after=stop_after)
    monkeypatch.setattr(run_module, "train", pressing_train)


def _signal_while_writing(number, on_call, monkeypatch):
    """Checkpoint writes that raise signal `number` half-way through the `on_call`-th file."""
    real_write, calls = checkpoint.write_atomically, []

    def write(path, content, size=None):
        calls.append(path)

        def half_then_signal(f):
            if len(calls) == on_call:
                f.write(b"\0" * 100_000)            # a temporary file is on disk now
                signal.raise_signal(number)
            content(f)
        return real_write(path, half_then_signal, size)
    monkeypatch.setattr(checkpoint, "write_atomically", write)


@posix_only
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_while_the_interrupted_run_saves_leaves_no_temporary_and_says_what_the_disk_holds(
        tmp_path, capsys, monkeypatch, name):
    """Ctrl-C after step 5, then a second signal while step 5 is being written: the file keeps
    step 3 (saved after step 4 trained sanely). The message said "interrupted before training
    started; nothing was saved", and a SIGTERM left the half-written temporary file."""
    out = tmp_path / "run"
    _pressing_ctrl_c_after(5, monkeypatch)
    _signal_while_writing(getattr(signal, name), on_call=2, monkeypatch=monkeypatch)
    code = cli.main(["train", "copy", "--steps", "40", "--save-every", "3", *SMALL, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    stopped = "interrupted" if name == "SIGINT" else "terminated by SIGTERM"
    assert (code, err) == (128 + int(getattr(signal, name)),
                           f"{stopped}; {out}/checkpoint.npz holds step 3; resume with: "
                           f"tinygrad-attn train copy --resume {out}")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz"]
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 3
    monkeypatch.undo()
    assert cli.main(["train", "copy", "--steps", "6", "--resume", str(out)]) == 0
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 6


@posix_only
def test_the_saved_it_message_is_read_from_the_disk(tmp_path, capsys, monkeypatch):
    """Ctrl-C after step 2, and the save of step 2 lands elsewhere (a stand-in for any save that
    did not reach the file): the message says what the file holds, not "saved it"."""
    out = tmp_path / "run"
    _pressing_ctrl_c_after(2, monkeypatch)
    real_save = checkpoint.save
    monkeypatch.setattr(checkpoint, "save", lambda path, *rest: real_save(tmp_path / "elsewhere.npz", *rest))
    assert cli.main(["train", "copy", "--steps", "40", *SMALL, "--out", str(out)]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "interrupted after step 2; nothing was saved; resume with: "
        f"tinygrad-attn train copy --resume {out}")


LEFTOVERS = [".checkpoint.npz.0123456789abcdef0123456789abcdef.tmp",
             ".metrics.json.fedcba9876543210fedcba9876543210.tmp"]
NOT_OURS = [".checkpoint.npz.notes.tmp", "notes.tmp", ".other.0123456789abcdef0123456789abcdef.tmp"]


def test_leftover_temporary_files_are_removed_when_a_run_starts_and_when_it_ends(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "4", "--stop-after", "2", *SMALL, "--out", str(out)]) == 0
    for name in LEFTOVERS + NOT_OURS:                   # as a killed run leaves them (237-307 KB)
        (out / name).write_bytes(b"\0" * 250_000)
    assert cli.main(["train", "copy", "--resume", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == sorted(NOT_OURS)
    for name in LEFTOVERS:
        (out / name).write_bytes(b"\0" * 250_000)
    assert cli.main(["train", "copy", "--steps", "2", *SMALL, "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == sorted(NOT_OURS)
    capsys.readouterr()
    with RunFolder(tmp_path / "other") as folder:       # written while the run holds the folder
        (folder.path / LEFTOVERS[0]).write_bytes(b"\0" * 100)
    assert not (tmp_path / "other" / LEFTOVERS[0]).exists()


def test_ctrl_c_while_the_commands_load_is_one_line(capsys, monkeypatch):
    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["train", "copy"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_ctrl_c_before_the_run_folder_is_taken_says_nothing_was_written(tmp_path, capsys, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(run_module.Run, "folder", interrupted)
    assert cli.main(["train", "copy", *SMALL, "--out", str(tmp_path / "run")]) == 130
    assert capsys.readouterr().err == "interrupted before training started; nothing was written\n"
    assert not (tmp_path / "run").exists()


def test_sigterm_handling_is_undone_after_the_command(tmp_path, capsys):
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert cli.main(["train", "copy", "--steps", "1", *SMALL, "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert checkpoint.load(tmp_path / "run" / "checkpoint.npz")[1]["step"] == 1
