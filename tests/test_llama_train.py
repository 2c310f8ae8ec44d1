"""`--arch llama`: the model it builds, checkpoints that record it (read back by `sample` and
`--resume`), old checkpoints without it meaning the default, and the refusals."""

import json

import numpy as np
import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.nn import RMSNorm, SwiGLU
from tinygrad_attn.training import checkpoint
from tinygrad_attn.training.config import ARCHS, TrainConfig
from tinygrad_attn.training.loop import make_model
from tinygrad_attn.training.saved_run import load_run

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]


def test_llama_arch_builds_rmsnorm_swiglu_rope_and_half_the_kv_heads():
    model = make_model("copy", TrainConfig(d_model=16, num_heads=4, num_layers=1, arch="llama"))
    block = model.blocks[0]
    assert isinstance(block.ln1, RMSNorm) and isinstance(block.mlp, SwiGLU) and model.pos_emb is None
    assert block.attn.rope and (block.attn.num_heads, block.attn.n_kv_heads) == (4, 2)
    default = make_model("copy", TrainConfig(d_model=16, num_heads=4, num_layers=1))
    assert default.pos_emb is not None and default.blocks[0].attn.n_kv_heads == 4
    with pytest.raises(ValueError, match=r"TrainConfig: unknown arch 'gpt': expected one of \('default', "):
        TrainConfig(arch="gpt")


def test_checkpoint_records_the_arch_and_sample_and_resume_read_it(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["train", "copy", "--arch", "llama", "--steps", "4", *SMALL, "--out", str(out)]
    assert cli.main(flags + ["--stop-after", "2"]) == 0
    _, meta = checkpoint.load(out / "checkpoint.npz")
    assert meta["config"]["arch"] == "llama"
    run = load_run(out / "checkpoint.npz")
    assert run.model.pos_emb is None and run.model.blocks[0].attn.n_kv_heads == 1
    assert cli.main(["train", "copy", "--resume", str(out), "--arch", "default"]) == 2
    assert "cannot change arch when resuming (the checkpoint has arch=llama)" in capsys.readouterr().err
    assert cli.main(["train", "copy", "--resume", str(out)]) == 0             # resumes as llama
    assert json.loads((out / "metrics.json").read_text())["config"]["arch"] == "llama"
    capsys.readouterr()
    assert cli.main(["sample", str(out / "checkpoint.npz"), "3 1"]) == 0
    assert capsys.readouterr().out.startswith("3 1 |  →  ")


def test_a_checkpoint_without_arch_is_the_default_architecture(tmp_path):
    path = tmp_path / "old.npz"
    assert cli.main(["train", "copy", "--steps", "2", *SMALL, "--out", str(tmp_path / "run")]) == 0
    arrays, meta = checkpoint.load(tmp_path / "run" / "checkpoint.npz")
    del meta["config"]["arch"]                                    # as written before the field existed
    checkpoint.save(path, arrays, meta)
    run = load_run(path)
    assert run.config.arch == "default" and run.model.pos_emb is not None
    np.testing.assert_array_equal(run.model.pos_emb.weight.numpy(), arrays["model/pos_emb.weight"])


def test_llama_runs_have_no_head_bias_and_older_ones_with_it_resume_exactly(tmp_path, monkeypatch, capsys):
    """--arch llama models used to have an LM-head bias (no Hugging Face llama folder holds one).
    A run saved then is rebuilt with it: stopped and resumed, it repeats the uninterrupted run's
    losses exactly."""
    llama = TrainConfig(d_model=16, num_heads=2, num_layers=1, arch="llama")
    assert make_model("copy", llama).head.bias is None
    flags = ["train", "copy", "--arch", "llama", "--steps", "6", *SMALL]
    with monkeypatch.context() as earlier:
        earlier.setitem(ARCHS["llama"], "head_bias", True)             # how those runs were built
        assert cli.main([*flags, "--out", str(tmp_path / "whole")]) == 0
        assert cli.main([*flags, "--stop-after", "3", "--out", str(tmp_path / "cut")]) == 0
    assert "model/head.bias" in checkpoint.load(tmp_path / "cut" / "checkpoint.npz")[0]
    assert cli.main(["train", "copy", "--resume", str(tmp_path / "cut")]) == 0
    capsys.readouterr()
    cut, whole = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("cut", "whole"))
    assert len(cut["loss"]) == 6 and cut["loss"] == whole["loss"] and cut["grad_norm"] == whole["grad_norm"]
    assert load_run(tmp_path / "cut").model.head.bias is not None
    assert cli.main(["sample", str(tmp_path / "cut"), "3 1"]) == 0
    assert capsys.readouterr().out.startswith("3 1 |  →  ")
