"""The `train` and `sample` commands: the files a run writes, `--resume` giving exactly the losses
of an uninterrupted run, the help text, and clear errors for bad checkpoints and flags."""

import json

import numpy as np
import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.training import checkpoint

PNG = b"\x89PNG\r\n\x1a\n"
SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]


@pytest.mark.slow
def test_train_writes_checkpoint_metrics_and_plots_and_sample_answers(tmp_path, capsys):
    out = tmp_path / "copy"
    # A model of width 32 at a high learning rate learns copy in 250 steps (the default run: 1000).
    fast = ["--steps", "250", "--d-model", "32", "--batch-size", "32", "--warmup", "25", "--lr", "0.01"]
    assert cli.main(["train", "copy", *fast, "--eval-size", "200", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "copy: held-out exact-match accuracy" in printed.out and "loss=" in printed.err  # tqdm
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["held_out_exact_match"] >= 0.95 and metrics["held_out_size"] == 200
    assert metrics["steps"] == 250 and len(metrics["loss"]) == len(metrics["lr"]) == 250
    assert metrics["loss"][-1] < 0.05 < metrics["loss"][0]
    assert f"{metrics['held_out_exact_match']:.2%}" in printed.out
    assert (out / "loss.png").read_bytes()[:8] == PNG and (out / "attention.png").read_bytes()[:8] == PNG

    arrays, meta = checkpoint.load(out / "checkpoint.npz")
    assert meta["task"] == {"name": "copy"} and meta["step"] == 250 and meta["config"]["steps"] == 250
    assert {"model/head.weight", "optim/steps", "history/loss"} <= set(arrays)
    assert set(meta["rng"]) == {"data", "library"}

    assert cli.main(["sample", str(out / "checkpoint.npz"), "7 0 3 3"]) == 0
    assert capsys.readouterr().out == "7 0 3 3 |  →  7 0 3 3 .\n"


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tmp_path):
    flags = ["train", "reverse", "--steps", "8", *SMALL]
    assert cli.main(flags + ["--out", str(tmp_path / "whole")]) == 0
    assert cli.main(flags + ["--out", str(tmp_path / "split"), "--stop-after", "4"]) == 0
    assert not (tmp_path / "split" / "metrics.json").exists()
    assert checkpoint.load(tmp_path / "split" / "checkpoint.npz")[1]["step"] == 4
    assert cli.main(["train", "reverse", "--out", str(tmp_path / "split"),
                     "--resume", str(tmp_path / "split")]) == 0
    whole, split = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("whole", "split"))
    assert len(split["loss"]) == 8
    assert split["loss"] == whole["loss"] and split["grad_norm"] == whole["grad_norm"]
    assert split["held_out_exact_match"] == whole["held_out_exact_match"]
    weights = [checkpoint.load(tmp_path / d / "checkpoint.npz")[0] for d in ("whole", "split")]
    for name, value in weights[0].items():
        np.testing.assert_array_equal(weights[1][name], value, err_msg=name)


def test_help_states_lengths_and_vocabulary(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    assert "vocabulary of 15 tokens" in text and "1-8 digits" in text
    assert "prompt ≤ 8 tokens, answer ≤ 5" in text and "2 4 0 + 9 9 1 =  →  1 4 2 0 ." in text


def test_bad_checkpoints_inputs_and_flags_are_clear_errors(tmp_path, capsys):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert cli.main(["sample", str(tmp_path / "bad.npz"), "1 2"]) == 2
    assert "bad.npz: not a readable tinygrad_attn checkpoint" in capsys.readouterr().err
    np.savez(tmp_path / "foreign.npz", x=np.zeros(1))
    assert cli.main(["train", "copy", "--resume", str(tmp_path / "foreign.npz")]) == 2
    assert "foreign.npz: not a tinygrad_attn checkpoint" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "juggle"])
    capsys.readouterr()

    run = tmp_path / "run"
    assert cli.main(["train", "sort", "--steps", "2", *SMALL, "--out", str(run)]) == 0
    capsys.readouterr()
    assert cli.main(["train", "copy", "--resume", str(run)]) == 2
    assert "is a 'sort' checkpoint, not 'copy'" in capsys.readouterr().err
    assert cli.main(["train", "sort", "--resume", str(run), "--d-model", "32"]) == 2
    assert "cannot change d_model when resuming (the checkpoint has d_model=16)" in capsys.readouterr().err
    assert cli.main(["sample", str(run / "checkpoint.npz"), "1 2 x"]) == 2
    assert "sort: expected single digits" in capsys.readouterr().err
    assert cli.main(["train", "copy", "--heads", "3"]) == 2
    assert "d_model 64 is not divisible by num_heads 3" in capsys.readouterr().err


def test_every_config_field_is_a_flag_with_its_help_and_default(tmp_path, capsys, monkeypatch):
    import dataclasses

    from tinygrad_attn.commands.train_flags import flag
    from tinygrad_attn.training import TrainConfig

    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())          # argparse wraps the help lines
    settings = [f for f in dataclasses.fields(TrainConfig) if f.name != "model"]   # model: no setting
    assert len(settings) == len(dataclasses.fields(TrainConfig)) - 1
    assert f"{flag('model')} MODEL" not in text
    for field in settings:
        default = ("the task's: copy 1000, reverse 1000, sort 1000, add 3000" if field.name == "steps"
                   else field.default)
        assert f"{flag(field.name)} {field.name.upper()} {field.metadata['help']} (default {default})" \
            in text, field.name
    assert flag("num_heads") == "--heads" and flag("batch_size") == "--batch-size"

    run = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "2", *SMALL, "--clip", "0.5", "--min-lr", "0.002",
                     "--out", str(run), "--stop-after", "1"]) == 0
    config = checkpoint.load(run / "checkpoint.npz")[1]["config"]
    assert (config["clip"], config["min_lr"], config["d_model"]) == (0.5, 0.002, 16)
    assert config["weight_decay"] == 0.01
    capsys.readouterr()
    assert cli.main(["train", "copy", "--resume", str(run), "--weight-decay", "0.1"]) == 2
    assert "cannot change weight_decay when resuming (the checkpoint has weight_decay=0.01)" in \
        capsys.readouterr().err


def test_the_attention_plot_of_add_names_the_sum_it_shows(tmp_path, monkeypatch):
    """add's tokens write numbers backwards, so the title also reads the example as a sum."""
    from tinygrad_attn.training import plots
    titles = []
    monkeypatch.setattr(plots, "attention_grid", lambda maps, tokens, path, title="": titles.append(title))
    for task in ("add", "copy"):
        assert cli.main(["train", task, "--steps", "2", *SMALL, "--out", str(tmp_path / task)]) == 0
    add, copy = titles
    shown = add.split("'")[1]                               # a held-out prompt, e.g. '2 9 0 + 4 1 2 ='
    digits = [int(t) for t in shown.split() if t.isdigit()]
    a, b = (sum(d * 10**i for i, d in enumerate(digits[k:k + 3])) for k in (0, 3))
    assert add.endswith(f"on held-out '{shown}' ({a} + {b} = {a + b})"), add
    assert copy.endswith("'"), copy                         # copy's tokens read as they are


@pytest.mark.parametrize("edit", [{"num_heads": 8}, {"num_heads": 1}, {"num_heads": 4}, {"d_model": 32},
                                  {"num_layers": 2}, {"arch": "llama"}])
@pytest.mark.parametrize("whole", [False, True])
def test_a_checkpoint_whose_config_was_edited_after_saving_is_refused(tmp_path, capsys, edit, whole):
    """An edited setting no longer describes the saved model; edited with the model it describes
    (`whole`), num_heads changes no weight's shape, so the edit loaded silently: the logits saved
    with the weights show the config does not rebuild the model."""
    import dataclasses

    from tinygrad_attn.training import config_from_dict
    run = tmp_path / "run"
    assert cli.main(["train", "sort", "--steps", "3", *SMALL, "--out", str(run)]) == 0
    assert cli.main(["sample", str(run / "checkpoint.npz"), "3 1 2"]) == 0
    capsys.readouterr()
    arrays, meta = checkpoint.load(run / "checkpoint.npz")
    meta.pop("format")
    edited = {**meta["config"], **edit}
    if whole:
        saved = config_from_dict(meta["config"]).model
        edited["model"] = dataclasses.asdict(config_from_dict({**edited, "model": None}).model_for(
            saved.vocab_size, saved.max_len))
    checkpoint.save(tmp_path / "edited.npz", arrays, {**meta, "config": edited})
    assert cli.main(["sample", str(tmp_path / "edited.npz"), "3 1 2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path}/edited.npz: ") and err.count("\n") == 1
    if not whole:
        assert "(ValueError: TrainConfig: model is not the one arch=" in err and " describe (it has " in err
    elif "num_heads" in edit:
        assert (f"its config (d_model=16, num_heads={edit['num_heads']}, num_layers=1, arch='default') does "
                "not rebuild the model it saved: with its weights that model gives other logits than it "
                "did when saved (they differ by up to ") in err
        assert err.endswith("); the config was edited or the file is damaged\n")
    assert cli.main(["train", "sort", "--steps", "4", "--resume", str(tmp_path / "edited.npz"),
                     "--out", str(tmp_path / "more")]) == 2
    assert capsys.readouterr().err == err


def test_sample_takes_a_run_folder_as_resume_does(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", "sort", "--steps", "2", *SMALL, "--out", str(run)]) == 0
    capsys.readouterr()
    assert cli.main(["sample", str(run / "checkpoint.npz"), "3 1 2"]) == 0
    from_file = capsys.readouterr().out
    assert cli.main(["sample", str(run), "3 1 2"]) == 0
    assert capsys.readouterr().out == from_file and from_file.startswith("3 1 2 |  →  ")
    (tmp_path / "empty").mkdir()
    empty = str(tmp_path / "empty")
    for command in (["sample", empty, "3 1 2"], ["train", "sort", "--resume", empty]):
        assert cli.main(command) == 2
        assert capsys.readouterr().err == (f"error: {tmp_path}/empty is a folder without a checkpoint.npz: "
                                           "name a checkpoint file, or the folder of a run that saved one\n")
