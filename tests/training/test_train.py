"""The training loop from Python: a small run reaches a held-out accuracy threshold on a fixed seed,
runs are deterministic, a run continued from a checkpoint repeats the uninterrupted losses exactly,
and accuracy is measured by real greedy decoding."""

import contextlib
import dataclasses
import json

import numpy as np
import pytest

from tinygrad_attn import textbook
from tinygrad_attn.errors import CheckpointError
from tinygrad_attn.optim import warmup_cosine
from tinygrad_attn.training import (
    Run,
    TrainConfig,
    TrainState,
    accuracy,
    answer,
    checkpoint,
    make_model,
    train,
)
from tinygrad_attn.training.tasks import END, SEP, get_task

TINY = dict(steps=24, d_model=16, num_heads=2, num_layers=1, batch_size=16, warmup=4)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["kernels", "textbook"])
def test_reverse_learns_within_200_steps(form):
    """The threshold test: a small model on the held-out reverse prompts (~2 s), with the kernels
    and with every op in its textbook form (``ta.textbook()``): the same accuracy either way."""
    config = TrainConfig(steps=200, d_model=32, batch_size=32, warmup=20, lr=1e-2)
    model = make_model("reverse", config)
    with textbook() if form == "textbook" else contextlib.nullcontext():
        history = train(model, "reverse", config)
    assert np.mean(history.loss[:10]) > 1.5 and np.mean(history.loss[-10:]) < 0.05
    assert accuracy(model, "reverse", get_task("reverse").held_out(200)) >= 0.9


def test_runs_are_deterministic_given_the_seed():
    config = TrainConfig(**TINY)
    first = train(make_model("sort", config), "sort", config)
    second = train(make_model("sort", config), "sort", config)
    assert first == second and len(first.loss) == 24
    other = dataclasses.replace(config, seed=1)
    assert train(make_model("sort", other), "sort", other).loss != first.loss


def test_history_and_callback_follow_the_schedule():
    config = TrainConfig(**TINY)
    seen = []
    history = train(make_model("add", config), "add", config,
                    on_step=lambda step, h: seen.append((step, h.loss[-1])))
    assert seen == list(zip(range(1, 25), history.loss))
    assert history.lr == [warmup_cosine(s, config.lr, 4, 24, config.min_lr) for s in range(24)]
    assert all(n > 0 for n in history.grad_norm)


def test_continuing_from_a_checkpoint_repeats_the_losses_exactly(tmp_path, device):
    config = TrainConfig(dropout=0.1, device=device, **TINY)   # dropout draws from the library RNG
    whole_model = make_model("copy", config)
    whole = train(whole_model, "copy", config)

    model = make_model("copy", config)
    state = TrainState.fresh(model, config)
    train(model, "copy", config, state=state, stop_after=10)
    Run(model, state, config.with_model_for(get_task("copy")), get_task("copy")).save(tmp_path / "c.npz")
    make_model("copy", dataclasses.replace(config, seed=5))      # disturb the global generator
    run = Run.load(tmp_path / "c.npz")
    assert run.state.step == 10 and run.task.name == "copy" and run.config == config.with_model_for(run.task)
    resumed = train(run.model, run.task, run.config, state=run.state)
    assert resumed.loss == whole.loss and resumed.grad_norm == whole.grad_norm
    for name, value in whole_model.state_dict().items():
        np.testing.assert_array_equal(run.model.state_dict()[name], value, err_msg=name)


def test_a_run_whose_arrays_do_not_fit_its_config_is_refused(tmp_path):
    config = TrainConfig(d_model=16, num_heads=2, num_layers=1)
    path = Run.start("copy", config).save(tmp_path / "c.npz")
    arrays, meta = checkpoint.load(path)
    assert Run.load(path).config == config.with_model_for(get_task("copy"))
    arrays["model/head.weight"] = arrays["model/head.weight"][:, :3]
    checkpoint.save(tmp_path / "shape.npz", arrays, meta)
    with pytest.raises(CheckpointError, match="shape.npz: .*does not fit.*head.weight"):
        Run.load(tmp_path / "shape.npz")
    arrays, meta = checkpoint.load(path)
    del meta["step"]
    checkpoint.save(tmp_path / "nostep.npz", arrays, meta)
    with pytest.raises(CheckpointError, match="nostep.npz: .*KeyError"):
        Run.load(tmp_path / "nostep.npz")


class _Scripted:
    """A stand-in model whose greedy decoding writes fixed tokens after every prompt."""

    def __init__(self, tokens):
        self.tokens = tokens

    def generate(self, ids, max_new_tokens):
        new = np.tile(self.tokens[:max_new_tokens], (ids.shape[0], 1))
        return type("Out", (), {"numpy": lambda _: np.concatenate([ids, new], axis=1)})()


def test_accuracy_is_exact_match_of_the_generated_answer_through_the_end_token():
    prompts = [[1, 2, SEP], [2, 1, SEP], [3, 1, 2, SEP]]
    model = _Scripted([2, 1, END, 7, 7, 7, 7, 7, 7])          # reads as "2 1 ." for every prompt
    assert answer(model, "reverse", prompts) == [[2, 1, END]] * 3
    assert accuracy(model, "reverse", prompts) == pytest.approx(1 / 3)
    assert accuracy(_Scripted([2, 1, 5, 5, 5, 5, 5, 5, 5]), "reverse", prompts[:1]) == 0.0  # no "."


@pytest.mark.parametrize("bad, match", [(dict(steps=0), "steps must be at least 1"),
                                        (dict(d_model=30, num_heads=4), "not divisible"),
                                        (dict(lr=-1.0), "lr must be above 0, got -1.0")])
def test_bad_configs_are_refused_before_training(bad, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**bad)
    config = TrainConfig()
    with pytest.raises(ValueError, match="steps must be at least 1"):
        dataclasses.replace(config, steps=-3)


def test_train_keeps_freed_memory_for_the_next_steps_arrays(monkeypatch):
    """train() sets the process's malloc to keep freed memory (host_memory), once per call, before
    its first step; the engine itself never does (tests/engine/test_host_memory.py checks the setting)."""
    from tinygrad_attn.training import loop

    calls = []
    monkeypatch.setattr(loop, "keep_freed_memory", lambda: calls.append(True) or True)
    config = TrainConfig(**{**TINY, "steps": 2})
    train(make_model("copy", config), "copy", config,
          on_step=lambda step, history: calls.append(step))
    assert calls == [True, 1, 2]


def test_a_script_trains_checkpoints_resumes_and_evaluates_with_the_run_object(tmp_path):
    """What the train command does, from Python: the run saves every 2 steps, stops after 3 with
    step 3 saved, goes on from its checkpoint to the uninterrupted run's losses exactly, and
    writes its report; the checkpoint holds the whole model config."""
    from tinygrad_attn.training import Run

    config = TrainConfig(steps=6, d_model=16, num_heads=2, num_layers=1, batch_size=8, warmup=2, eval_size=10,
                         dropout=0.1)
    whole = Run.start("sort", config)
    whole.train(tmp_path / "whole.npz")
    run = Run.start("sort", config)
    run.train(tmp_path / "run" / "checkpoint.npz", save_every=2, stop_after=3)
    meta = checkpoint.load(tmp_path / "run" / "checkpoint.npz")[1]
    assert meta["step"] == 3 and meta["config"]["model"]["num_layers"] == 1
    assert meta["config"]["model"] == dataclasses.asdict(run.config.model)
    assert run.config.model.max_len == 18                   # sort: 9 prompt + 9 answer tokens
    again = Run.load(tmp_path / "run").resumed({"lr": 1e-5})          # below min_lr: lowers it too
    assert again.config.lr == again.config.min_lr == 1e-5 and again.state.step == 3
    again = Run.load(tmp_path / "run").resumed({})
    again.train(tmp_path / "run" / "checkpoint.npz")
    assert again.state.history == whole.state.history and len(again.state.history.loss) == 6
    again.seconds = 1.25                                    # the report's time, fixed for the check
    lines = again.evaluate(tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert lines[0] == (f"sort: held-out exact-match accuracy {metrics['held_out_exact_match']:.2%} on 10 "
                        f"sequences after 6 steps (1.2 s of training, steps 4-6: resumed at step 3); wrote "
                        f"{tmp_path / 'run'}/")
    assert metrics["loss"] == whole.state.history.loss and metrics["resumed_from_step"] == 3
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["attention.png", "checkpoint.npz",
                                                                    "loss.png", "metrics.json"]
    with pytest.raises(ValueError, match=r"cannot change d_model when resuming \(the checkpoint has "
                                         r"d_model=16\)"):
        Run.load(tmp_path / "run").resumed({"d_model": 32})


def test_what_a_sane_loss_is_comes_from_each_tasks_own_vocabulary():
    """Ten times the loss of guessing uniformly: ln 15 for the toy tasks' 15 tokens, ln V for a
    text's V (it was the toy tasks' bound for every run)."""
    from tinygrad_attn.text import CharTokenizer
    from tinygrad_attn.training import TextTask

    text = "".join(chr(ord("a") + i % 40) for i in range(2000))
    task = TextTask.from_text(text, CharTokenizer.from_text(text), block_size=8)
    assert task.vocab_size == 40 and task.sane_loss == pytest.approx(10 * np.log(40))
    assert get_task("add").sane_loss == pytest.approx(10 * np.log(15))
