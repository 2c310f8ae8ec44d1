"""Bad input on the training side (issues #13 and #14): module sizes, optimizer settings, training
settings, NaN training, output folders, devices, memory and files that are not checkpoints. Each
case asserts the error's type and words; CLI cases also the exit code and a one-line message."""

import itertools
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import nn, optim
from tinygrad_attn.commands import cli
from tinygrad_attn.errors import DeviceError
from tinygrad_attn.training import DivergedError, TrainConfig, TrainState, checkpoint, make_model, train
from tinygrad_attn.training.tasks import EQUALS, PLUS, SEP, _count_held_out, get_task, is_held_out

SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]
NAN, INF = math.nan, math.inf
MHA, TT, POS = "MultiHeadAttention", "TinyTransformer", "must be an integer >= 1, got"


@pytest.mark.parametrize("make, message", [
    (lambda: nn.Linear(-1, 3), f"Linear: in_features {POS} -1"),
    (lambda: nn.Linear(3, 0), f"Linear: out_features {POS} 0"),
    (lambda: nn.Linear(2.5, 3), f"Linear: in_features {POS} 2.5"),
    (lambda: nn.Embedding(0, 4), f"Embedding: num_embeddings {POS} 0"),
    (lambda: nn.Embedding(5, -4), f"Embedding: embedding_dim {POS} -4"),
    (lambda: nn.LayerNorm(0), f"LayerNorm: dim {POS} 0"),
    (lambda: nn.LayerNorm(4, eps=-1e-5), "LayerNorm: eps must be a finite number >= 0, got -1e-05"),
    (lambda: nn.Dropout(-0.1), "Dropout: p must be in [0, 1), got -0.1"),
    (lambda: nn.Dropout(NAN), "Dropout: p must be in [0, 1), got nan"),
    (lambda: nn.MultiHeadAttention(8, 0), f"{MHA}: num_heads {POS} 0"),
    (lambda: nn.MultiHeadAttention(8, -2), f"{MHA}: num_heads {POS} -2"),
    (lambda: nn.MultiHeadAttention(0, 2), f"{MHA}: d_model {POS} 0"),
    (lambda: nn.MultiHeadAttention(8, 2, dropout=-1), f"{MHA}: dropout must be in [0, 1), got -1"),
    (lambda: nn.MultiHeadAttention(8, 2, dropout=1.5), f"{MHA}: dropout must be in [0, 1), got 1.5"),
    (lambda: nn.MultiHeadAttention(8, 2, scale=NAN), f"{MHA}: scale must be a finite number"),
    (lambda: nn.MLP(8, 0), f"MLP: d_ff {POS} 0"),
    (lambda: nn.TransformerBlock(8, 2, -32), f"TransformerBlock: d_ff {POS} -32"),
    (lambda: nn.TransformerBlock(8, 2, 32, dropout=-1), f"{MHA}: dropout must be in [0, 1)"),
    (lambda: nn.TinyTransformer(0), f"{TT}: vocab_size {POS} 0"),
    (lambda: nn.TinyTransformer(5, d_model=-8), f"{TT}: d_model {POS} -8"),
    (lambda: nn.TinyTransformer(5, 8, 2, num_layers=-1), f"{TT}: num_layers must be an integer >= 0"),
    (lambda: nn.TinyTransformer(5, 8, 2, max_len=0), f"{TT}: max_len {POS} 0"),
    (lambda: nn.TinyTransformer(5, 8, 2, d_ff=0), f"{TT}: d_ff {POS} 0"),
])
def test_module_constructors_refuse_bad_sizes(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert str(error.value).startswith(message)


def test_module_to_an_unknown_device_and_generate_without_a_prompt():
    layer = nn.Linear(2, 3)
    before = layer.weight.data
    with pytest.raises(DeviceError, match=r"unknown device 'gpu': expected one of \('cpu', 'cuda'\)"):
        layer.to("gpu")
    assert layer.weight.data is before
    model = nn.TinyTransformer(5, 8, 2, 1, max_len=6)
    for empty in ([], np.zeros((2, 0), dtype=int)):
        with pytest.raises(ValueError, match=r"generate: the prompt is empty \(ids of shape \((0,|2, 0)\)\)"):
            model.generate(empty, 3)


def test_optimizers_refuse_one_tensor_and_bad_settings():
    w = ta.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"SGD: params must be an iterable of Tensors such as "
                                        r"model.parameters\(\) or \[w, b\], got one Tensor"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="Adam: params must be Tensors, got float at position 1"):
        optim.Adam([w, 1.0])
    cases = [(lambda: optim.SGD([w], lr=NAN), "SGD: lr must be a finite number >= 0, got nan"),
             (lambda: optim.SGD([w], lr=0.1, momentum=-1), "SGD: momentum must be a finite number >= 0"),
             (lambda: optim.SGD([w], lr=0.1, weight_decay=-1), "SGD: weight_decay must be a finite number"),
             (lambda: optim.Adam([w], lr=INF), "Adam: lr must be a finite number >= 0, got inf"),
             (lambda: optim.Adam([w], eps=NAN), "Adam: eps must be a finite number >= 0, got nan"),
             (lambda: optim.Adam([w], betas=(0.9, NAN)), r"Adam: betas must be in \[0, 1\)"),
             (lambda: optim.AdamW([w], weight_decay=-1), "AdamW: weight_decay must be a finite number >= 0"),
             (lambda: optim.AdamW([w], lr=-1e-3), "AdamW: lr must be a finite number >= 0, got -0.001")]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()


def test_clip_grad_norm_error_if_nonfinite_as_in_pytorch():
    a, b = ta.Tensor([0.0, 0.0], requires_grad=True), ta.Tensor([0.0], requires_grad=True)
    a.grad, b.grad = np.array([3.0, np.inf]), np.array([1.0])
    with pytest.raises(RuntimeError, match="clip_grad_norm: the total norm of the gradients is inf, so "
                                           "they cannot be clipped"):
        optim.clip_grad_norm([a, b], 1.0, error_if_nonfinite=True)
    assert a.grad.tolist() == [3.0, np.inf] and b.grad.tolist() == [1.0]      # unchanged
    assert optim.clip_grad_norm([a, b], 1.0) == INF                            # default: no error
    assert a.grad.tolist() == [3.0, np.inf] and b.grad.tolist() == [1.0]
    b.grad = np.array([3.0, 4.0])
    assert optim.clip_grad_norm(b, 1.0, error_if_nonfinite=True) == 5.0       # one tensor, as in torch
    assert b.grad.round(6).tolist() == [0.6, 0.8]
    with pytest.raises(ValueError, match="clip_grad_norm: max_norm must be >= 0, got nan"):
        optim.clip_grad_norm([b], NAN)


@pytest.mark.parametrize("field, value, message", [
    ("lr", NAN, "TrainConfig: lr must be a finite number, got nan"),
    ("lr", INF, "TrainConfig: lr must be a finite number, got inf"),
    ("min_lr", NAN, "TrainConfig: min_lr must be a finite number, got nan"),
    ("clip", INF, "TrainConfig: clip must be a finite number, got inf"),
    ("weight_decay", -INF, "TrainConfig: weight_decay must be a finite number, got -inf"),
    ("dropout", NAN, "TrainConfig: dropout must be a finite number, got nan"),
    ("weight_decay", -0.1, "weight_decay >= 0"),
    ("seed", -1, "seed >= 0"),
    ("device", "gpu", "TrainConfig: unknown device 'gpu': expected one of ('cpu', 'cuda')"),
])
def test_train_config_refuses_non_finite_and_impossible_settings(field, value, message):
    with pytest.raises(ValueError) as error:
        TrainConfig(**{field: value})
    assert message in str(error.value)


TINY = TrainConfig(steps=6, d_model=16, num_heads=2, num_layers=1, batch_size=8, warmup=2)


def test_a_nan_loss_stops_training_at_that_step_leaving_the_last_good_state():
    model = make_model("copy", TINY)
    state = TrainState.fresh(model, TINY)
    train(model, "copy", TINY, state=state, stop_after=3)
    weights, rngs = model.state_dict(), checkpoint_rngs(state)
    model.head.bias.data[0] = np.nan
    with pytest.raises(DivergedError) as error:
        train(model, "copy", TINY, state=state)
    last = state.history.loss[-1]
    assert str(error.value).startswith(f"training diverged at step 4: the loss is nan and the gradient "
                                       f"norm nan (last finite loss {last:.4g}, at step 3); try a lower "
                                       f"learning rate (lr=0.003)")
    assert state.step == 3 and len(state.history.loss) == 3 and checkpoint_rngs(state) == rngs
    for name, value in model.state_dict().items():         # the failing step changed no weight
        if name != "head.bias":
            np.testing.assert_array_equal(value, weights[name], err_msg=name)


def test_a_non_finite_gradient_norm_stops_training_before_the_update(monkeypatch):
    import tinygrad_attn.training.loop as train_module

    model = make_model("copy", TINY)
    weights = model.state_dict()
    monkeypatch.setattr(train_module, "clip_grad_norm", lambda params, max_norm: INF)
    with pytest.raises(DivergedError, match=r"training diverged at step 1: the loss is \d\.\d+ and the "
                                            r"gradient norm inf \(no step before it\)"):
        train(model, "copy", TINY)
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)


def checkpoint_rngs(state):
    from tinygrad_attn.training.random_state import rng_states

    return json.dumps(rng_states(state), sort_keys=True)


def test_cli_nan_training_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    code = cli.main(["train", "copy", "--steps", "20", *SMALL, "--lr", "1e30", "--warmup", "0",
                     "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert err.startswith("error: training diverged at step 2: the loss is nan")
    assert "(last finite loss" in err
    arrays, meta = checkpoint.load(out / "checkpoint.npz")
    assert meta["step"] == 1 and all(np.isfinite(a).all() for a in arrays.values())
    assert f"{out}/checkpoint.npz holds step 1; resume with other settings, e.g. tinygrad-attn train copy " \
           f"--resume {out} --lr 1e+29" in err
    assert not (out / "metrics.json").exists()


@pytest.mark.parametrize("flags, message", [
    (["--lr", "nan"], "error: TrainConfig: lr must be a finite number, got nan"),
    (["--lr", "inf"], "error: TrainConfig: lr must be a finite number, got inf"),
    (["--dropout", "nan"], "error: TrainConfig: dropout must be a finite number, got nan"),
    (["--stop-after", "-3"], "error: --stop-after must be at least 1, got -3"),
    (["--stop-after", "0"], "error: --stop-after must be at least 1, got 0"),
    (["--save-every", "-1"], "error: --save-every must be 0 (only at the end) or more, got -1"),
    (["--device", "gpu"], "error: TrainConfig: unknown device 'gpu': expected one of ('cpu', 'cuda')"),
])
def test_cli_refuses_bad_settings_in_one_line_before_writing(tmp_path, capsys, flags, message):
    out = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "1", *flags, "--out", str(out)]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not out.exists()


def test_cli_eval_size_above_the_pool_returns_at_once(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "add", "--steps", "1", "--eval-size", "60000", "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("error: add: asked for 60000 held-out prompts, but only 49607 exist "
                                       "(1 prompt in 20 is held out); ask for at most 49607\n")
    assert not out.exists()


def test_cli_device_cuda_without_cupy_and_a_model_too_big_for_memory(tmp_path, capsys, monkeypatch):
    if ta.cuda_available():
        pytest.skip("CuPy and a GPU are present")
    assert cli.main(["train", "copy", "--device", "cuda", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: device 'cuda' ") and err.count("\n") == 1
    assert cli.main(["train", "copy", "--d-model", "100000", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the model (d_model=100000, 2 layers) does not fit in memory (")
    assert err.count("\n") == 1


def test_cli_unwritable_out_is_one_line_before_training(tmp_path, capsys, monkeypatch):
    flags = ["train", "copy", "--steps", "2", *SMALL, "--out"]
    assert cli.main(flags + [str(tmp_path / "missing" / "run")]) == 2
    assert capsys.readouterr().err == f"error: cannot write to {tmp_path}/missing/run: the folder " \
                                      f"{tmp_path}/missing does not exist\n"
    (tmp_path / "file").write_text("in the way")
    assert cli.main(flags + [str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err == f"error: cannot write to {tmp_path}/file: it is a file, not a folder\n"

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)      # root may write anywhere, so deny it this way
    assert cli.main(flags + [str(tmp_path / "locked")]) == 2
    assert capsys.readouterr().err == f"error: cannot write to {tmp_path}/locked: Permission denied\n"


def test_files_that_are_not_checkpoints_and_bad_sample_devices(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros(3))
    assert cli.main(["sample", str(tmp_path / "x.npy"), "1 2"]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path}/x.npy: not a readable tinygrad_attn checkpoint "
                                       f"(a single .npy array, not an .npz archive)\n")
    out = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "2", "--stop-after", "1", *SMALL, "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["sample", str(out / "checkpoint.npz"), "1 2", "--device", "gpu"]) == 2
    assert capsys.readouterr().err == "error: unknown device 'gpu': expected one of ('cpu', 'cuda')\n"
    assert cli.main(["train", "copy", "--resume", str(out), "--device", "gpu"]) == 2
    assert capsys.readouterr().err == "error: unknown device 'gpu': expected one of ('cpu', 'cuda')\n"


def test_checkpoints_get_the_mode_of_the_runs_other_files(tmp_path):
    old = os.umask(0o022)
    try:
        path = checkpoint.save(tmp_path / "c.npz", {"w": np.zeros(2)}, {"step": 1})
        (tmp_path / "other.json").write_text("{}")
    finally:
        os.umask(old)
    mode = oct((tmp_path / "other.json").stat().st_mode & 0o777)
    assert oct(path.stat().st_mode & 0o777) == mode == "0o644"


def test_held_out_pools_are_counted_exactly_and_bound_the_eval_size():
    digits = range(10)
    family = (digits,) * 3 + ((PLUS,),) + (digits,) * 2 + ((EQUALS,),)         # 10⁵ prompts
    brute = sum(is_held_out(list(p)) for p in itertools.product(*family))
    assert _count_held_out(family) == brute > 0
    lists = get_task("sort").families()[:4]                                    # 1-4 digits, then "|"
    assert sum(map(_count_held_out, lists)) == sum(
        is_held_out(list(p) + [SEP]) for n in range(1, 5) for p in itertools.product(digits, repeat=n))
    add = get_task("add")
    with pytest.raises(ValueError, match="add: asked for 60000 held-out prompts, but only 49607 exist"):
        add.held_out(60000)
    assert add.count_held_out() == 49607 and len(add.held_out(300)) == 300
    assert get_task("copy").count_held_out(stop_at=500) >= 500
