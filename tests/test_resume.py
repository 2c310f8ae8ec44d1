"""Runs that survive Ctrl-C exactly and never lose work (issue #14): a real SIGINT at a random step
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

import tinygrad_attn.commands.train as train_command
from tinygrad_attn.commands import cli
from tinygrad_attn.training import InterruptedMidStep, TrainConfig, TrainState, checkpoint, make_model, train
from tinygrad_attn.training.tasks import get_task

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_sigint_at_a_random_step_then_resume_repeats_the_uninterrupted_losses_exactly(tmp_path, capsys):
    flags = ["train", "reverse", "--steps", "100", *SMALL, "--save-every", "10"]
    proc = subprocess.Popen([sys.executable, "-m", "tinygrad_attn", *flags, "--out", str(tmp_path / "cut")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "cut" / "checkpoint.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.005)                                       # training has begun: step 10 is saved
    time.sleep(np.random.default_rng().uniform(0, 0.3))         # a random step after it
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    step = checkpoint.load(tmp_path / "cut" / "checkpoint.npz")[1]["step"]
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (f"interrupted after step {step}; saved it; resume with: "
                                            f"tinygrad-attn train reverse --resume {tmp_path}/cut")
    assert 10 <= step < 100 and "Traceback" not in err

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
    original = train_command.train
    train_command.train = second_run_inside
    try:
        assert cli.main(flags2) == 130
    finally:
        train_command.train = original
    assert not (out / "lock").exists()


def test_ctrl_c_during_evaluation_is_one_line_and_resume_evaluates(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_command, "accuracy", interrupted)
    assert cli.main(["train", "copy", "--steps", "3", *SMALL, "--out", str(run)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"interrupted during evaluation; the trained model (step 3) is saved in {run}/checkpoint.npz; "
        f"evaluate it with: tinygrad-attn train copy --resume {run}")
    monkeypatch.undo()
    assert cli.main(["train", "copy", "--resume", str(run)]) == 0
    assert json.loads((run / "metrics.json").read_text())["steps"] == 3
