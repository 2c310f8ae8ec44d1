"""Training end to end: a small run reaches a held-out accuracy threshold on a fixed seed, the
command writes its files, and a resumed run gives exactly the losses of an uninterrupted one."""

import json

import numpy as np
import pytest

from tinygrad_attn import cli
from tinygrad_attn.tasks import get_task
from tinygrad_attn.train import TrainConfig, accuracy, build, train

PNG = b"\x89PNG\r\n\x1a\n"


def test_copy_task_learns_within_300_steps(tmp_path, capsys):
    out = tmp_path / "copy"
    assert cli.main(["train", "copy", "--steps", "300", "--eval-size", "200", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["held_out_exact_match"] >= 0.95 and metrics["steps"] == 300
    assert len(metrics["losses"]) == 300 and metrics["losses"][-1] < 0.05 < metrics["losses"][0]
    assert (out / "loss.png").read_bytes()[:8] == PNG and (out / "attention.png").read_bytes()[:8] == PNG
    assert "held-out exact-match accuracy" in capsys.readouterr().out
    assert cli.main(["sample", str(out / "checkpoint.npz"), "7 0 3 3"]) == 0
    assert capsys.readouterr().out.startswith("7 0 3 3 |  →  7 0 3 3 .")


def test_resume_gives_the_same_losses(tmp_path):
    flags = ["train", "reverse", "--steps", "30", "--d-model", "16", "--layers", "1", "--eval-size", "20"]
    assert cli.main(flags + ["--out", str(tmp_path / "whole")]) == 0
    assert cli.main(flags + ["--out", str(tmp_path / "split"), "--stop-after", "12"]) == 0
    assert not (tmp_path / "split" / "metrics.json").exists()
    assert cli.main(flags + ["--out", str(tmp_path / "split"), "--resume", str(tmp_path / "split")]) == 0
    whole, split = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("whole", "split"))
    assert len(split["losses"]) == 30
    assert split["losses"] == whole["losses"]
    assert split["held_out_exact_match"] == whole["held_out_exact_match"]


def test_train_api_is_seeded():
    config = TrainConfig(task="sort", steps=5, d_model=16, num_layers=1)
    first, second = build(config), build(config)
    assert train(first, config).losses == train(second, config).losses
    assert 0.0 <= accuracy(first.model, get_task("sort"), get_task("sort").held_out(10)) <= 1.0


def test_cli_errors(tmp_path, capsys):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert cli.main(["sample", str(tmp_path / "bad.npz"), "1 2"]) == 2
    assert "not a readable tinygrad_attn checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "juggle"])
    np.savez(tmp_path / "foreign.npz", x=np.zeros(1))
    assert cli.main(["train", "copy", "--resume", str(tmp_path / "foreign.npz")]) == 2
    assert "foreign.npz: not a tinygrad_attn checkpoint" in capsys.readouterr().err
