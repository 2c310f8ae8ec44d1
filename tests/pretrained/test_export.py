"""Our runs leave for the ecosystem: ``tinygrad-attn export RUN OUT`` writes a folder transformers
loads with the same logits (the LM head's bias folded into ln_f's), and ``sample --model`` reads a
Hugging Face folder."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hf_models import exact_float64  # noqa: E402

import tinygrad_attn as ta  # noqa: E402
from tinygrad_attn.commands.cli import main  # noqa: E402
from tinygrad_attn.training import Run, TrainConfig  # noqa: E402


def saved_run(folder, **options):
    run = Run.start("reverse", TrainConfig(d_model=16, num_heads=2, num_layers=1, **options))
    run.save(folder / "checkpoint.npz")
    return run.model


def test_export_a_run_and_load_it_in_transformers(tmp_path, capsys):
    model = saved_run(tmp_path / "run")
    assert model.head.bias is not None                  # our toy models have a head bias; gpt2 has none
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "out")]) == 0
    assert "a gpt2 model of" in capsys.readouterr().out
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    loaded, tokenizer = ta.load_pretrained(tmp_path / "run")
    ids = np.array([tokenizer.encode("3 1 4 1 5 |")])
    assert ids.tolist() == [[3, 1, 4, 1, 5, 12]]
    expected = model(ids).numpy()
    np.testing.assert_allclose(loaded(ids).numpy(), expected, rtol=0, atol=0)
    np.testing.assert_allclose(theirs(torch.tensor(ids)).logits.detach().numpy(), expected, rtol=0, atol=1e-4)
    again, tok = ta.load_pretrained(tmp_path / "out")
    assert tok.encode("31+4=") == [3, 1, 10, 4, 11] and tok.decode([4, 1, 3, 13]) == "4 1 3 ."
    np.testing.assert_allclose(again(ids).numpy(), expected, rtol=0, atol=1e-4)


def test_a_llama_run_exports_as_a_llama_folder_with_the_same_logits(tmp_path, capsys, monkeypatch):
    """Trained by the command (float32), compared in float64: the same float32 weights on both sides."""
    run, out = tmp_path / "run", tmp_path / "out"
    assert main(["train", "reverse", "--arch", "llama", "--steps", "3", "--d-model", "16", "--heads", "2",
                 "--layers", "2", "--batch-size", "8", "--eval-size", "10", "--out", str(run)]) == 0
    assert main(["export", str(run), str(out)]) == 0
    assert "a llama model of" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert (config["num_key_value_heads"], config["attention_bias"], config["tie_word_embeddings"]) == \
        (1, True, False)
    exact_float64(monkeypatch)
    ta.set_default_dtype(np.float64)
    try:
        ours, tokenizer = ta.load_pretrained(run)
        assert ours.head.bias is None and ours.tok_emb.weight.dtype == np.float64
        theirs = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float64,
                                                                   attn_implementation="sdpa").eval()
        ids = np.array([tokenizer.encode("3 1 4 1 5 9 2 |"), tokenizer.encode("2 7 1 8 2 8 1 |")])
        expected = ours(ids).numpy()
        np.testing.assert_allclose(theirs(torch.tensor(ids)).logits.detach().numpy(), expected,
                                   rtol=0, atol=1e-10)
        again, _ = ta.load_pretrained(out)
        np.testing.assert_allclose(again(ids).numpy(), expected, rtol=0, atol=1e-10)
    finally:
        ta.set_default_dtype(np.float32)


def test_sample_model_continues_greedily(tmp_path, capsys):
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(15, 16, 2, 1, 32, head_bias=False)
    from tinygrad_attn.pretrained.run_tokenizer import task_tokenizer

    ta.save_pretrained(model, tmp_path, task_tokenizer())
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "gpt2"
    assert main(["sample", "--model", str(tmp_path), "3 1 4", "--max-new-tokens", "5"]) == 0
    expected = model.generate(np.array([3, 1, 4]), 5).numpy()
    assert capsys.readouterr().out.split() == [str(i) if i < 10 else "+=|._"[i - 10] for i in expected]
    assert main(["sample", "--model", str(tmp_path), "3 1", "extra"]) == 2
    assert "with --model, give only the text" in capsys.readouterr().err
