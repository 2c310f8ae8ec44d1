"""`--arch llama`: the model it builds (no LM-head bias, as Llama's), checkpoints that record it
(read back by `sample` and `--resume`), and the refusals."""

import json

import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.nn import RMSNorm, SwiGLU
from tinygrad_attn.training import Run, TrainConfig, checkpoint, make_model

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]


def test_llama_arch_builds_rmsnorm_swiglu_rope_and_half_the_kv_heads():
    model = make_model("copy", TrainConfig(d_model=16, num_heads=4, num_layers=1, arch="llama"))
    block = model.blocks[0]
    assert isinstance(block.ln1, RMSNorm) and isinstance(block.mlp, SwiGLU) and model.pos_emb is None
    assert block.attn.rope and (block.attn.num_heads, block.attn.n_kv_heads) == (4, 2)
    assert model.head.bias is None and block.attn.q_proj.bias is not None      # attention keeps its biases
    default = make_model("copy", TrainConfig(d_model=16, num_heads=4, num_layers=1))
    assert default.pos_emb is not None and default.blocks[0].attn.n_kv_heads == 4
    with pytest.raises(ValueError, match=r"TrainConfig: unknown arch 'gpt': expected one of \('default', "):
        TrainConfig(arch="gpt")


def test_checkpoint_records_the_arch_and_sample_and_resume_read_it(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["train", "copy", "--arch", "llama", "--steps", "4", *SMALL, "--out", str(out)]
    assert cli.main(flags + ["--stop-after", "2"]) == 0
    _, meta = checkpoint.load(out / "checkpoint.npz")
    assert meta["config"]["arch"] == "llama" and meta["config"]["model"]["positions"] == "rope"
    run = Run.load(out / "checkpoint.npz")
    assert run.model.pos_emb is None and run.model.blocks[0].attn.n_kv_heads == 1
    assert cli.main(["train", "copy", "--resume", str(out), "--arch", "default"]) == 2
    assert "cannot change arch when resuming (the checkpoint has arch=llama)" in capsys.readouterr().err
    assert cli.main(["train", "copy", "--resume", str(out)]) == 0             # resumes as llama
    assert json.loads((out / "metrics.json").read_text())["config"]["arch"] == "llama"
    capsys.readouterr()
    assert cli.main(["sample", str(out / "checkpoint.npz"), "3 1"]) == 0
    assert capsys.readouterr().out.startswith("3 1 |  →  ")
