"""Bad input on the training side: module sizes, optimizer settings, training
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
from tinygrad_attn.training.config import ConfigError
from tinygrad_attn.training.held_out import family_held_out_count, is_held_out
from tinygrad_attn.training.tasks import END, EQUALS, PLUS, SEP, get_task

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
    b = ta.Tensor([0.0, 0.0], requires_grad=True)
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
    ("weight_decay", -0.1, "TrainConfig: weight_decay must be 0 or more, got -0.1"),
    ("seed", -1, "TrainConfig: seed must be 0 or more, got -1"),
    ("lr", 0.0, "TrainConfig: lr must be above 0, got 0.0"),
    ("warmup", -1, "TrainConfig: warmup must be 0 or more, got -1"),
    ("dropout", 1.0, "TrainConfig: dropout must be in [0, 1), got 1.0"),
    ("clip", 0.0, "TrainConfig: clip must be above 0, got 0.0"),
    ("device", "gpu", "TrainConfig: unknown device 'gpu': expected one of ('cpu', 'cuda')"),
])
def test_train_config_refuses_non_finite_and_impossible_settings(field, value, message):
    with pytest.raises(ValueError) as error:
        TrainConfig(**{field: value})
    assert message in str(error.value)
    if isinstance(error.value, ConfigError):                 # one field at fault: the train command's flag
        assert (error.value.field, f"TrainConfig: {field} {error.value.problem}") == (field, str(error.value))


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


def test_cli_nan_training_keeps_no_weights_that_cannot_train_and_says_start_afresh(tmp_path, capsys):
    """--lr 1e30: step 1 blows the weights up to ~1e30 and step 2's loss is NaN. Those weights give
    that NaN again whatever the learning rate, so they are not kept."""
    out = tmp_path / "run"
    code = cli.main(["train", "copy", "--steps", "20", *SMALL, "--lr", "1e30", "--warmup", "0",
                     "--save-every", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert err.startswith("error: training diverged at step 2: the loss is nan")
    assert "(last finite loss" in err
    assert err.endswith(f"no state of this run trained sanely, so none was kept; start afresh with a lower "
                        f"learning rate, e.g. tinygrad-attn train copy --out {out} --lr 0.003")
    assert not (out / "checkpoint.npz").exists() and not (out / "metrics.json").exists()


def diverging_at(step, monkeypatch, loss_blows_up_at=None):
    """Make the gradient norm of training step `step` infinite (the run diverges there), and the
    loss of step `loss_blows_up_at` 100 times larger (finite, but far above any sane loss)."""
    import tinygrad_attn.training.loop as loop

    calls, real = [], loop.clip_grad_norm
    losses, real_loss = [], loop.F.cross_entropy

    def clip(params, max_norm):
        calls.append(1)
        return INF if len(calls) == step else real(params, max_norm)

    def loss(*args, **kwargs):
        losses.append(1)
        return real_loss(*args, **kwargs) * (100.0 if len(losses) == loss_blows_up_at else 1.0)

    monkeypatch.setattr(loop, "clip_grad_norm", clip)
    monkeypatch.setattr(loop.F, "cross_entropy", loss)


@pytest.mark.parametrize("diverges, insane, kept", [(6, None, 4), (5, None, 2), (6, 5, 2)])
def test_cli_diverged_run_keeps_the_last_checkpoint_whose_next_step_trained(tmp_path, capsys, monkeypatch,
                                                                           diverges, insane, kept):
    """Saves every 2 steps. Diverging at 6 keeps step 4 (step 5 trained from it); at 5, step 2 (the
    state of step 4 gave the infinite norm); a loss of ~270 at step 5 makes step 4 no sane state."""
    out = tmp_path / "run"
    diverging_at(diverges, monkeypatch, insane)
    code = cli.main(["train", "copy", "--steps", "20", *SMALL, "--save-every", "2", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and err.startswith(f"error: training diverged at step {diverges}: the loss is ")
    # The state of step diverges − 1 gave the infinite norm; a checkpoint of it (step 4 when
    # diverging at 5) is never written.
    assert err.endswith(f"{out}/checkpoint.npz holds step {kept}, the last state that trained sanely; "
                        f"resume from it with a lower learning rate, e.g. tinygrad-attn train copy "
                        f"--resume {out} --lr 0.0003")
    arrays, meta = checkpoint.load(out / "checkpoint.npz")
    assert meta["step"] == kept and all(np.isfinite(a).all() for a in arrays.values())
    monkeypatch.undo()
    assert cli.main(["train", "copy", "--resume", str(out), "--lr", "0.0003", "--steps", "8"]) == 0
    assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["min_lr"] == 0.0001


def test_cli_a_resumed_checkpoint_that_diverges_at_once_is_named_as_the_cause(tmp_path, capsys,
                                                                              monkeypatch):
    out = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "20", "--stop-after", "3", *SMALL, "--out", str(out)]) == 0
    diverging_at(1, monkeypatch)
    assert cli.main(["train", "copy", "--resume", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"{out}/checkpoint.npz holds step 3, whose weights gave that loss, so resuming "
                        f"cannot help; start afresh with a lower learning rate, e.g. tinygrad-attn train "
                        f"copy --out {out} --lr 0.0003 --overwrite")
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 3        # left as it was


@pytest.mark.parametrize("flags, message", [
    (["--lr", "nan"], "error: --lr must be a finite number, got nan"),
    (["--lr", "inf"], "error: --lr must be a finite number, got inf"),
    (["--dropout", "nan"], "error: --dropout must be a finite number, got nan"),
    (["--seed", "-1"], "error: --seed must be 0 or more, got -1"),
    (["--heads", "0"], "error: --heads must be at least 1, got 0"),
    (["--min-lr=-1e-4"], "error: --min-lr must be 0 or more, got -0.0001"),
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
    assert family_held_out_count(family) == brute > 0
    lists = get_task("sort").families()[:4]                                    # 1-4 digits, then "|"
    assert sum(map(family_held_out_count, lists)) == sum(
        is_held_out(list(p) + [SEP]) for n in range(1, 5) for p in itertools.product(digits, repeat=n))
    add = get_task("add")
    with pytest.raises(ValueError, match="add: asked for 60000 held-out prompts, but only 49607 exist"):
        add.held_out(60000)
    assert add.count_held_out() == 49607 and len(add.held_out(300)) == 300
    assert get_task("copy").count_held_out(stop_at=500) >= 500


# ----- inputs that once failed silently on the training side: task prompts, run files, settings -----
@pytest.mark.parametrize("task, text, expected", [
    ("add", "1 + 2 = 3", "add: expected 'a + b' (optionally ending in '='), a and b whole numbers of 1 to 3 "
                         "digits 0-9, like '42 + 199'; got '1 + 2 = 3'"),
    ("add", "1 2 + 3", "got '1 2 + 3'"),
    ("add", "² + 1", "got '² + 1'"),
    ("add", "1000 + 1", "got '1000 + 1'"),
    ("add", "1 + 2 + 3", "got '1 + 2 + 3'"),
    ("sort", "²", "sort: expected single digits separated by spaces, like '3 1 2', got '²'"),
    ("copy", "3 ٣", "copy: expected single digits separated by spaces, like '3 1 2', got '3 ٣'"),
    ("reverse", "1 2 | 3", "got '1 2 | 3'"),
])
def test_prompts_outside_a_tasks_grammar_are_refused_naming_the_form(task, text, expected):
    with pytest.raises(ValueError) as error:
        get_task(task).parse(text)
    assert expected in str(error.value)


def test_prompts_inside_the_grammar_still_parse():
    add = get_task("add")
    assert add.parse("42 + 199") == add.parse(" 42+199 = ") == [2, 4, 0, PLUS, 9, 9, 1, EQUALS]
    assert get_task("sort").parse("3, 1, 2 |") == [3, 1, 2, SEP]


@pytest.fixture(scope="module")
def add_run(tmp_path_factory):
    """A checkpoint of one step of the add task, and the folder holding it."""
    out = tmp_path_factory.mktemp("add") / "run"
    assert cli.main(["train", "add", "--steps", "2", "--stop-after", "1", *SMALL, "--out", str(out)]) == 0
    return out


def test_sample_refuses_a_sum_it_would_misread(add_run, capsys):
    capsys.readouterr()
    for text in ("1 + 2 = 3", "1 2 + 3", "²"):
        assert cli.main(["sample", str(add_run / "checkpoint.npz"), text]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: add: expected 'a + b'") and err.endswith(f"got {text!r}\n")


@pytest.mark.parametrize("said, printed", [
    ([1, 4, 2, 0, END], "2 4 0 + 9 9 1 =  →  1 4 2 0 .  (read as 42 + 199 = 241)\n"),
    ([1, 5, 2, 0, END], "2 4 0 + 9 9 1 =  →  1 5 2 0 .  (read as 42 + 199 = 251)\n"
                        "(the right answer is 1 4 2 0 ., read as 42 + 199 = 241)\n"),
    ([1, 4, PLUS], "2 4 0 + 9 9 1 =  →  1 4 +\n(the right answer is 1 4 2 0 ., read as 42 + 199 = 241)\n")])
def test_sample_reads_an_add_answer_back_as_the_sum(add_run, capsys, monkeypatch, said, printed):
    """What the model said (its answer replaced by `said`) is printed as tokens and, when it is
    digits then ".", read back as the sum in the usual order; a wrong answer is followed by the right one."""
    from tinygrad_attn.training import tasks
    monkeypatch.setattr(tasks, "answer", lambda model, task, prompts: [said])
    capsys.readouterr()
    assert cli.main(["sample", str(add_run / "checkpoint.npz"), "42 + 199"]) == 0
    assert capsys.readouterr().out == printed


def test_files_that_are_not_checkpoints_say_what_they_are(add_run, tmp_path, capsys):
    capsys.readouterr()
    (add_run / "metrics.json").write_text("{}")
    (tmp_path / "garbage.bin").write_bytes(bytes(range(7, 107)))
    (tmp_path / "empty.npz").write_bytes(b"")
    cases = [(add_run / "metrics.json", "a JSON file, not an .npz archive); the checkpoint of this run is "
                                        f"{add_run}/checkpoint.npz"),
             (tmp_path / "garbage.bin", "a file of another format, not an .npz archive)"),
             (tmp_path / "empty.npz", "an empty file, not an .npz archive)")]
    for path, said in cases:
        assert cli.main(["sample", str(path), "1 + 2"]) == 2
        assert capsys.readouterr().err == f"error: {path}: not a readable tinygrad_attn checkpoint ({said}\n"
    (add_run / "metrics.json").unlink()


def tampered(source, target, change):
    """A copy of checkpoint `source` at `target`, its arrays and metadata changed by `change`."""
    arrays, meta = checkpoint.load(source)
    change(arrays, meta)
    checkpoint.save(target, arrays, meta)
    return target


def test_resume_refuses_a_checkpoint_missing_optimizer_state(add_run, tmp_path, capsys):
    capsys.readouterr()
    buffers = tampered(add_run / "checkpoint.npz", tmp_path / "a" / "checkpoint.npz",
                       lambda arrays, meta: [arrays.pop(k) for k in ("optim/0.m", "optim/3.v")])
    assert cli.main(["train", "add", "--resume", str(buffers)]) == 2
    assert capsys.readouterr().err == (f"error: {buffers}: a tinygrad_attn checkpoint that does not fit its "
                                       f"own model or run (ValueError: the optimizer state lacks 2 of its "
                                       f"buffers (0.m, 3.v), so the run cannot continue exactly)\n")
    steps = tampered(add_run / "checkpoint.npz", tmp_path / "b" / "checkpoint.npz",
                     lambda arrays, meta: arrays.pop("optim/steps"))
    assert cli.main(["train", "add", "--resume", str(steps)]) == 2
    assert "(ValueError: the optimizer state is missing or not of step 1 (its step count is None))" in \
        capsys.readouterr().err


def test_a_checkpoint_saved_by_another_version_is_one_line_saying_train_again(add_run, tmp_path, capsys):
    """No code reads the layouts of earlier versions (their task encodings, configs without a
    model, llama heads with a bias): such a file is refused whole, by its format."""
    capsys.readouterr()
    arrays, meta = checkpoint.load(add_run / "checkpoint.npz")
    assert meta["format"] == checkpoint.FORMAT == "tinygrad_attn-checkpoint-2"
    older = {**meta, "format": "tinygrad_attn-checkpoint-1", "task": "add", "task_encoding": 2}
    for saved in (older, {**meta, "format": "tinygrad_attn-checkpoint-3"}):
        path = tmp_path / f"{saved['format']}.npz"
        np.savez(path, **arrays, __meta__=np.frombuffer(json.dumps(saved).encode(), dtype=np.uint8))
        for command in (["sample", str(path), "1 + 2"], ["train", "add", "--resume", str(path)],
                        ["export", str(path), str(tmp_path / "out")]):
            assert cli.main(command) == 2
            err = capsys.readouterr().err
            assert err.endswith(f"{path}: saved by another version of tinygrad_attn ({saved['format']}; "
                                f"this version reads tinygrad_attn-checkpoint-2), whose runs it does not "
                                f"read: train it again\n") and err.count("\n") == 1, err


def test_train_takes_each_tasks_own_steps_unless_told(tmp_path, capsys):
    for task, steps in (("add", 3000), ("copy", 1000)):
        out = tmp_path / task
        assert cli.main(["train", task, "--stop-after", "1", *SMALL, "--out", str(out)]) == 0
        assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["steps"] == steps
        assert f"stopped at step 1 of {steps}" in capsys.readouterr().out
    out = tmp_path / "told"
    assert cli.main(["train", "add", "--steps", "5", "--stop-after", "1", *SMALL, "--out", str(out)]) == 0
    assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["steps"] == 5


def test_a_tampered_generator_state_is_a_checkpoint_error(add_run, tmp_path, capsys):
    capsys.readouterr()

    def overflow(arrays, meta):
        meta["rng"]["data"]["state"]["state"] = 2**200

    path = tampered(add_run / "checkpoint.npz", tmp_path / "c.npz", overflow)
    assert cli.main(["sample", str(path), "1 + 2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: a tinygrad_attn checkpoint that does not fit its own model or run "
                          f"(OverflowError: ") and err.count("\n") == 1


def test_a_gpu_checkpoint_on_a_machine_without_one_says_to_load_it_on_the_cpu(add_run, tmp_path, capsys):
    if ta.cuda_available():
        pytest.skip("CuPy and a GPU are present")
    capsys.readouterr()
    path = tampered(add_run / "checkpoint.npz", tmp_path / "gpu.npz",
                    lambda arrays, meta: meta["config"].update(device="cuda"))
    assert cli.main(["sample", str(path), "1 + 2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path} was trained on cuda, which cannot be used here (device 'cuda' ")
    assert err.endswith("; load it on the CPU with --device cpu (device='cpu')\n") and err.count("\n") == 1
    assert cli.main(["sample", str(path), "1 + 2", "--device", "cpu"]) == 0


@pytest.mark.parametrize("content", ["99999999999", "0", "-1", "not a number", ""])
def test_a_lock_holding_no_possible_process_is_taken_over(tmp_path, capsys, content):
    out = tmp_path / "run"
    out.mkdir()
    (out / "lock").write_text(content)
    assert cli.main(["train", "copy", "--steps", "2", "--stop-after", "1", *SMALL, "--out", str(out)]) == 0
    assert (out / "checkpoint.npz").exists() and not (out / "lock").exists()


def test_the_output_folder_default_and_empty_and_blocked_are_one_line(tmp_path, capsys, monkeypatch):
    flags = ["train", "copy", "--steps", "1", *SMALL]
    monkeypatch.chdir(tmp_path)
    assert cli.main([*flags, "--out", ""]) == 2
    assert capsys.readouterr().err == ("error: --out is empty: name a folder, or leave --out out to write to "
                                       "runs/TASK\n")
    (tmp_path / "file").write_text("in the way")
    assert cli.main([*flags, "--out", "file/sub"]) == 2
    assert capsys.readouterr().err == "error: cannot write to file/sub: file is a file, not a folder\n"
    (tmp_path / "runs").write_text("a file named runs")
    assert cli.main(flags) == 2
    assert capsys.readouterr().err == "error: cannot write to runs/copy: runs is a file, not a folder\n"
    (tmp_path / "runs").unlink()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:                 # a read-only working directory
        patch.setattr(Path, "mkdir", refuse)
        assert cli.main(flags) == 2
    assert capsys.readouterr().err == "error: cannot write to runs/copy: Permission denied\n"
    assert not (tmp_path / "runs").exists()
    assert cli.main(flags) == 0 and (tmp_path / "runs" / "copy" / "checkpoint.npz").exists()


def test_min_lr_above_lr_is_refused_and_a_low_lr_lowers_the_default_min_lr(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^TrainConfig: min_lr 0.01 is above lr 0.001; the cosine decays "
                                         r"from lr down to min_lr, so min_lr must be at most lr$"):
        TrainConfig(lr=1e-3, min_lr=1e-2)
    out = tmp_path / "run"
    assert cli.main(["train", "copy", "--steps", "1", "--min-lr", "0.01", "--out", str(out)]) == 2
    assert capsys.readouterr().err == ("error: TrainConfig: min_lr 0.01 is above lr 0.003; the cosine decays "
                                       "from lr down to min_lr, so min_lr must be at most lr\n")
    assert cli.main(["train", "copy", "--steps", "2", "--stop-after", "1", *SMALL, "--lr", "1e-5",
                     "--out", str(out)]) == 0
    assert checkpoint.load(out / "checkpoint.npz")[1]["config"]["min_lr"] == 1e-5


def test_a_large_eval_size_lists_the_held_out_pool_instead_of_drawing(monkeypatch):
    """--eval-size 49607, the whole add pool, took 138 s of rejection sampling (coupon collecting):
    asked for a quarter of the pool or more, held_out lists the pool and chooses from it."""
    add = type(get_task("add"))()

    def no_draws(rng):
        raise AssertionError("drew a prompt")

    monkeypatch.setattr(add, "draw", no_draws)
    every = add.held_out(49607)
    assert len(set(map(tuple, every))) == 49607 and all(is_held_out(p) for p in every)
    some = add.held_out(20000)
    assert len(set(map(tuple, some))) == 20000 and set(map(tuple, some)) <= set(map(tuple, every))
    assert add.held_out(20000) == some                            # the same for the same seed
    with pytest.raises(AssertionError, match="drew a prompt"):
        add.held_out(500)                                          # a small share is still drawn


def test_running_out_of_memory_while_evaluating_keeps_the_model_and_says_evaluate_fewer(tmp_path, capsys,
                                                                                      monkeypatch):
    import tinygrad_attn.training.tasks as tasks_module

    def out_of_memory(*args):
        raise MemoryError("Unable to allocate 3.0 GiB")

    out = tmp_path / "run"
    monkeypatch.setattr(tasks_module, "accuracy", out_of_memory)
    assert cli.main(["train", "copy", "--steps", "2", *SMALL, "--out", str(out)]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: out of memory while evaluating on 20 held-out prompts (Unable to allocate 3.0 GiB); the "
        f"trained model (step 2) is saved in {out}/checkpoint.npz; evaluate it with fewer: tinygrad-attn "
        f"train copy --resume {out} --eval-size 5")
    monkeypatch.undo()
    assert cli.main(["train", "copy", "--resume", str(out), "--eval-size", "5"]) == 0
    assert json.loads((out / "metrics.json").read_text())["held_out_size"] == 5


def test_running_out_of_memory_in_a_step_names_the_batch_and_keeps_an_exact_resume(tmp_path, capsys,
                                                                                  monkeypatch):
    """Not "the model does not fit": the batch does. The step changed nothing, so the state of the
    step before it is saved, and a resumed run repeats the uninterrupted run's losses exactly."""
    import tinygrad_attn.training.loop as loop

    out, whole = tmp_path / "run", tmp_path / "whole"
    calls, real = [], loop.F.cross_entropy

    def out_of_memory_at_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("Unable to allocate 1.2 GiB for an array with shape (20000, 4, 16, 16)")
        return real(*args, **kwargs)

    flags = ["train", "copy", "--steps", "4", *SMALL, "--dropout", "0.1"]
    with monkeypatch.context() as patch:
        patch.setattr(loop.F, "cross_entropy", out_of_memory_at_3)
        assert cli.main([*flags, "--out", str(out)]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: step 3 ran out of memory (Unable to allocate 1.2 GiB for an array with shape (20000, 4, 16, "
        "16)): a batch of 16 sequences with d_model=16 and 1 layers needs more memory than is free; "
        f"{out}/checkpoint.npz holds step 2 (resume it where more memory is free: tinygrad-attn train copy "
        f"--resume {out}, or start afresh with a smaller --batch-size)")
    assert cli.main(["train", "copy", "--resume", str(out)]) == 0
    assert cli.main([*flags, "--out", str(whole)]) == 0
    cut, full = (json.loads((d / "metrics.json").read_text()) for d in (out, whole))
    assert cut["loss"] == full["loss"] and len(cut["loss"]) == 4


def test_check_of_a_missing_file_says_there_is_no_such_file(tmp_path, capsys):
    missing = tmp_path / "01_softmax_backward.py"
    assert cli.main(["check", str(missing)]) == 2
    from tinygrad_attn.exercises.cases import EXERCISES

    assert capsys.readouterr().err == (f"check: {missing}: no such file; the exercises are "
                                       f"exercises/NN_name.py with name one of: {', '.join(EXERCISES)}\n")
