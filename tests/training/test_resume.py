"""Runs that survive Ctrl-C exactly and never lose work: a real SIGINT at a random step
then --resume gives the uninterrupted run's losses exactly; Ctrl-C takes effect at a step
boundary (twice: at once, without saving); run folders are locked, never mixed, resumed in place."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tinygrad_attn.training.run as run_module
import tinygrad_attn.training.tasks as tasks_module
from tinygrad_attn.commands import cli
from tinygrad_attn.training import InterruptedMidStep, TrainConfig, TrainState, checkpoint, make_model, train
from tinygrad_attn.training.tasks import get_task

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]
ROOT = Path(__file__).resolve().parents[2]


# The train command in a child process that, at the batch of step AT, says so on a file and waits
# for Ctrl-C: the SIGINT lands inside that step, whatever the machine's speed (not in the final
# evaluation, as a timed signal sometimes did), and goes through the command's own handler.
PAUSING_CHILD = """
import signal, sys, threading, time
from pathlib import Path
from tinygrad_attn.commands import cli
from tinygrad_attn.training import tasks
at, ready, argv = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if started ignoring it
calls, real_batch = [0], tasks.ToyTask.batch
def batch(task, rng, size):
    calls[0] += 1
    if calls[0] == at:
        pressed, handler = threading.Event(), signal.getsignal(signal.SIGINT)
        def on_sigint(signum, frame):
            pressed.set()
            handler(signum, frame)                      # the command's handler: stop after this step
        signal.signal(signal.SIGINT, on_sigint)
        ready.write_text("waiting")
        while not pressed.is_set():
            time.sleep(0.001)
        signal.signal(signal.SIGINT, handler)
    return real_batch(task, rng, size)
tasks.ToyTask.batch = batch
sys.exit(cli.main(argv))
"""


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_sigint_at_a_random_step_then_resume_repeats_the_uninterrupted_losses_exactly(tmp_path, capsys):
    flags = ["train", "reverse", "--steps", "100", *SMALL, "--save-every", "10"]
    step = int(np.random.default_rng().integers(11, 100))          # a random step after a save
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", PAUSING_CHILD, str(step), str(ready), *flags, "--out",
                             str(tmp_path / "cut")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 300
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)                                       # the child is inside step `step`
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (f"interrupted after step {step}; saved it; resume with: "
                                            f"tinygrad-attn train reverse --resume {tmp_path}/cut")
    assert checkpoint.load(tmp_path / "cut" / "checkpoint.npz")[1]["step"] == step
    assert "Traceback" not in err

    assert cli.main(["train", "reverse", "--resume", str(tmp_path / "cut")]) == 0   # writes into cut/
    assert cli.main([*flags, "--out", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    cut, whole = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("cut", "whole"))
    assert len(cut["loss"]) == len(whole["loss"]) == 100
    largest = max(abs(a - b) for a, b in zip(cut["loss"], whole["loss"]))
    assert largest == 0.0, f"interrupted after step {step}: losses differ by up to {largest}"
    assert cut["grad_norm"] == whole["grad_norm"]
    assert cut["held_out_exact_match"] == whole["held_out_exact_match"]


TINY = TrainConfig(steps=6, d_model=16, num_heads=2, num_layers=1, batch_size=8, warmup=2)


class InterruptingTask(type(get_task("copy"))):
    """The copy task, pressing Ctrl-C `presses` times while drawing the batch of step `at`."""

    def __init__(self, at: int, presses: int):
        self.calls, self.at, self.presses = 0, at, presses

    def batch(self, rng, size):
        self.calls += 1
        if self.calls == self.at:
            for _ in range(self.presses):
                signal.raise_signal(signal.SIGINT)
        return super().batch(rng, size)


def test_ctrl_c_inside_a_step_takes_effect_after_it_and_twice_at_once():
    # Ctrl-C raises KeyboardInterrupt, as in a terminal, also when the suite was started in the
    # background of a non-interactive shell, which ignores SIGINT (the test then saw no interrupt).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_inside_a_step()
    finally:
        signal.signal(signal.SIGINT, before)


def _ctrl_c_inside_a_step():
    whole = make_model("copy", TINY)
    reference = train(whole, "copy", TINY, stop_after=3)
    model = make_model("copy", TINY)
    state = TrainState.fresh(model, TINY)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        train(model, InterruptingTask(at=3, presses=1), TINY, state=state,
              on_step=lambda step, history: seen.append(step))
    assert state.step == 3 and seen == [1, 2, 3] and state.history == reference
    for name, value in model.state_dict().items():          # step 3 finished: the weights match
        np.testing.assert_array_equal(value, whole.state_dict()[name], err_msg=name)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    model = make_model("copy", TINY)
    state = TrainState.fresh(model, TINY)
    with pytest.raises(InterruptedMidStep):
        train(model, InterruptingTask(at=2, presses=2), TINY, state=state)
    assert state.step == 1 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_folder_holding_a_run_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["train", "sort", "--steps", "2", "--stop-after", "1", *SMALL, "--out", str(out)]
    assert cli.main(flags) == 0
    capsys.readouterr()
    assert cli.main(flags + ["--seed", "1"]) == 2
    assert capsys.readouterr().err == (f"error: {out} already holds a run (checkpoint.npz); continue it "
                                       f"with --resume {out}, replace it with --overwrite, or choose "
                                       f"another --out\n")
    assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["seed"] == 0
    (out / "metrics.json").write_text("{}")                 # a file of the old run
    assert cli.main(flags + ["--seed", "1", "--overwrite"]) == 0
    assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["seed"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz"]   # nothing of the old run left


def test_resume_writes_to_its_own_folder_and_says_when_steps_leave_nothing_to_do(tmp_path, capsys,
                                                                                 monkeypatch):
    run = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "4", "--stop-after", "2", *SMALL, "--out", str(run)]) == 0
    hint = f"stopped at step 2 of 4; resume with: tinygrad-attn train copy --resume {run}"
    assert hint in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)     # a resume without --out writes to the checkpoint's folder, not ./runs
    assert cli.main(["train", "copy", "--resume", str(run / "checkpoint.npz")]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 4 and not (tmp_path / "runs").exists()
    capsys.readouterr()
    for steps in ("4", "3"):
        assert cli.main(["train", "copy", "--resume", str(run), "--steps", steps]) == 2
        assert capsys.readouterr().err == (f"error: {run}/checkpoint.npz has done 4 steps already, so "
                                           f"--steps {steps} leaves none to do; pass --steps above 4 to "
                                           f"train further\n")
    assert cli.main(["train", "copy", "--resume", str(run), "--steps", "5", "--stop-after", "1",
                     "--out", str(tmp_path / "elsewhere")]) == 0
    assert checkpoint.load(tmp_path / "elsewhere" / "checkpoint.npz")[1]["step"] == 5


def test_a_lock_refuses_a_second_run_into_a_folder_in_use(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "lock").write_text(str(os.getpid()))             # a live process holds it
    flags = ["train", "copy", "--steps", "2", "--stop-after", "1", *SMALL, "--out", str(out)]
    assert cli.main(flags) == 2
    assert capsys.readouterr().err == (f"error: {out} is in use by another run (process {os.getpid()}, see "
                                       f"{out}/lock); wait for it, or delete {out}/lock if no run is using "
                                       f"the folder\n")
    assert not (out / "checkpoint.npz").exists()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (out / "lock").write_text(str(gone.pid))                # left by a run that was killed
    assert cli.main(flags) == 0 and (out / "checkpoint.npz").exists() and not (out / "lock").exists()

    def second_run_inside(*args, **kwargs):                 # the lock is held while training
        assert cli.main(flags + ["--overwrite"]) == 2
        assert "is in use by another run (process" in capsys.readouterr().err
        raise KeyboardInterrupt

    flags2 = ["train", "copy", "--steps", "2", *SMALL, "--out", str(out), "--overwrite"]
    original = run_module.train
    run_module.train = second_run_inside
    try:
        assert cli.main(flags2) == 130
    finally:
        run_module.train = original
    assert not (out / "lock").exists()


def test_ctrl_c_during_evaluation_is_one_line_and_resume_evaluates(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tasks_module, "accuracy", interrupted)
    assert cli.main(["train", "copy", "--steps", "3", *SMALL, "--out", str(run)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"interrupted during evaluation; the trained model (step 3) is saved in {run}/checkpoint.npz; "
        f"evaluate it with: tinygrad-attn train copy --resume {run}")
    monkeypatch.undo()
    assert cli.main(["train", "copy", "--resume", str(run)]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 3


def _race_for(out, start, held, results):
    """One racer: wait for the start, try to take the folder, say whether it got it, hold it until
    every racer has tried."""
    from tinygrad_attn.training.run_folder import RunFolder, RunFolderError

    start.wait()
    try:
        with RunFolder(out):
            results.put(True)
            held.wait()
    except RunFolderError as error:
        results.put(str(error))
        held.wait()


@pytest.mark.skipif(os.name != "posix", reason="forks racing processes")
def test_processes_racing_for_a_folder_with_a_stale_lock_leave_it_to_exactly_one(tmp_path):
    """A lock left by a dead process and several runs starting at once: taking it over is atomic,
    so exactly one run gets the folder (with an unlink-then-create takeover two often did)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    racers = 6
    for trial in range(6):
        out = tmp_path / f"run{trial}"
        out.mkdir()
        (out / "lock").write_text(str(gone.pid))
        start, held, results = context.Barrier(racers), context.Barrier(racers), context.Queue()
        processes = [context.Process(target=_race_for, args=(out, start, held, results))
                     for _ in range(racers)]
        for p in processes:
            p.start()
        outcomes = [results.get(timeout=300) for _ in range(racers)]
        for p in processes:
            p.join(300)
        assert outcomes.count(True) == 1, (trial, outcomes)
        refusals = [o for o in outcomes if o is not True]
        assert all(o.startswith(f"{out} is in use by another run (process ") for o in refusals), refusals
        assert not (out / "lock").exists()


def _open_run_folder(path, start, held, errors):
    """One of several threads: wait for the others, then open `path` making its parent."""
    from tinygrad_attn.training.run_folder import RunFolder

    start.wait(300)
    try:
        with RunFolder(path, make_parent=True) as folder:
            held.append(folder.path.name)
    except Exception as error:       # noqa: BLE001 - collected for the assertion
        errors.append(error)


def test_runs_making_the_default_parent_folder_at_once_all_get_their_folders(tmp_path):
    """Eight threads opening runs/t0 … runs/t7 with make_parent: making runs/ raced ("File exists")."""
    import threading

    for trial in range(10):
        parent, start, held, errors = tmp_path / f"runs{trial}", threading.Barrier(8), [], []
        threads = [threading.Thread(target=_open_run_folder, args=(parent / f"t{i}", start, held, errors))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert errors == [] and sorted(held) == [f"t{i}" for i in range(8)]
