"""Sampling the next token with a temperature and top-k: the distribution it draws from, seeded
reproducibility, generating past the context, and the `sample` command on a text run."""

import sys
import warnings

import numpy as np
import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.nn import TinyTransformer
from tinygrad_attn.nn.sampling import generate_beyond_context, next_token
from tinygrad_attn.training import Run, text_task

LOGITS = np.array([[2.0, 0.5, -1.0, 1.0, 0.0]])


def test_temperature_zero_and_top_k_one_take_the_argmax():
    rng = np.random.default_rng(0)
    logits = np.random.default_rng(1).normal(size=(6, 9))
    np.testing.assert_array_equal(next_token(logits), logits.argmax(-1))
    for temperature in (0.3, 1.0, 5.0):
        np.testing.assert_array_equal(next_token(logits, temperature, top_k=1, rng=rng), logits.argmax(-1))


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.5, None), (2.0, 3)])
def test_draws_follow_the_softmax_of_the_scaled_top_k_logits(temperature, top_k):
    rng = np.random.default_rng(0)
    draws = next_token(np.repeat(LOGITS, 40_000, axis=0), temperature, top_k, rng)
    scaled = LOGITS[0] / temperature
    if top_k is not None:
        scaled = np.where(scaled >= np.sort(scaled)[-top_k], scaled, -np.inf)
    expected = np.exp(scaled - scaled.max()) / np.exp(scaled - scaled.max()).sum()
    frequencies = np.bincount(draws, minlength=5) / len(draws)
    np.testing.assert_allclose(frequencies, expected, atol=0.01)        # ~5 standard errors
    assert (frequencies[expected == 0] == 0).all()                       # never outside the top k


def test_bad_sampling_arguments_name_themselves():
    with pytest.raises(ValueError, match="temperature must be a finite number ≥ 0.*got -1"):
        next_token(LOGITS, -1.0)
    with pytest.raises(ValueError, match="top_k must be at least 1.*got 0"):
        next_token(LOGITS, 1.0, top_k=0, rng=np.random.default_rng())
    with pytest.raises(ValueError, match="needs a random generator"):
        next_token(LOGITS, 1.0)


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-300, 1e-30])
def test_a_tiny_temperature_takes_the_argmax_without_overflow(temperature):
    """softmax(z / T) → the argmax as T → 0: the largest logit goes first, so (z − max) / T is at
    worst −∞ (probability 0), never +∞ (NaN); below the smallest normal float T is the argmax itself."""
    logits = np.random.default_rng(1).normal(size=(6, 9)) * np.array([[1.0], [1e-3], [1e3], [1e300],
                                                                        [1.0], [1.0]])
    logits[4, 3] = logits[4].max() + 1e-9                    # a lead of 1e-9 still decides
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no overflow or invalid-value warning
        for top_k in (None, 3):
            drawn = next_token(logits, temperature, top_k, np.random.default_rng(0))
            np.testing.assert_array_equal(drawn, logits.argmax(-1))


def test_logits_far_apart_sample_as_their_softmax():
    """Logits of ±1e308 (their difference overflows) at T = 1: the largest always wins, no NaN."""
    logits = np.array([[1e308, -1e308, 0.0], [-np.inf, 2.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draws = next_token(np.repeat(logits, 500, axis=0), 1.0, rng=np.random.default_rng(0))
    assert (draws[:500] == 0).all()                                           # row 0, 500 times
    assert set(draws[500:].tolist()) == {1, 2}                                # a tie: both drawn, never −∞


def _model(max_len=12):
    return TinyTransformer(vocab_size=7, d_model=16, num_heads=2, num_layers=1, max_len=max_len)


def test_seeded_generation_is_reproducible_and_greedy_at_temperature_zero():
    model = _model()
    prompt = np.array([1, 2, 3])
    one, again, other = (model.generate(prompt, 8, temperature=1.0, top_k=5, rng=np.random.default_rng(s))
                         .numpy() for s in (7, 7, 8))
    np.testing.assert_array_equal(one, again)
    assert one[:3].tolist() == [1, 2, 3] and len(one) == 11 and not np.array_equal(one, other)
    np.testing.assert_array_equal(model.generate(prompt, 8, temperature=0.0).numpy(),
                                  model.generate(prompt, 8).numpy())


def test_generation_goes_on_past_the_context_with_its_last_half():
    model = _model(max_len=8)
    prompt = np.array([4, 1])
    ids = generate_beyond_context(model, prompt, 20)                      # greedy
    assert len(ids) == 22
    np.testing.assert_array_equal(ids[:8], model.generate(prompt, 6).numpy())   # first stretch
    np.testing.assert_array_equal(ids[8:12], model.generate(ids[4:8], 4).numpy()[4:])  # last 4 kept
    with pytest.raises(ValueError, match="the prompt has 8 tokens; the model reads at most 8"):
        generate_beyond_context(model, np.zeros(8, dtype=int), 1)


def _recording_forwards(monkeypatch, events):
    """Every forward pass of generation (the prompt's, then one position per token) noted in `events`."""
    real = TinyTransformer._logits

    def recording(self, *args):
        events.append("forward")
        return real(self, *args)
    monkeypatch.setattr(TinyTransformer, "_logits", recording)


@pytest.mark.parametrize("batch", [False, True])
def test_on_token_gets_each_token_as_soon_as_it_is_chosen(monkeypatch, batch):
    model, events = _model(), []
    prompt = np.array([[1, 2, 3], [4, 0, 6]]) if batch else np.array([1, 2, 3])
    expected = model.generate(prompt, 6, temperature=1.0, rng=np.random.default_rng(5)).numpy()
    _recording_forwards(monkeypatch, events)
    out = model.generate(prompt, 6, temperature=1.0, rng=np.random.default_rng(5),
                         on_token=lambda token: events.append(np.asarray(token).tolist()))
    np.testing.assert_array_equal(out.numpy(), expected)          # the callback changes nothing
    new = expected[..., 3:].T.tolist()                              # per step: a row's id, or each row's
    assert events == ["forward", new[0]] + [e for t in new[1:] for e in ("forward", t)]


def test_on_token_follows_generation_past_the_context():
    model, got = _model(max_len=8), []
    ids = generate_beyond_context(model, np.array([4, 1]), 20, temperature=1.0, top_k=3,
                                  rng=np.random.default_rng(2), on_token=got.append)
    assert got == ids[2:].tolist()
    np.testing.assert_array_equal(ids, generate_beyond_context(model, np.array([4, 1]), 20, temperature=1.0,
                                                               top_k=3, rng=np.random.default_rng(2)))


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("text")
    (path / "corpus.txt").write_text("the cat sat on the mat. " * 60)
    out = path / "run"
    assert cli.main(["train", "text", "--file", str(path / "corpus.txt"), "--steps", "20", "--d-model", "16",
                     "--heads", "2", "--layers", "1", "--batch-size", "8", "--block-size", "16",
                     "--eval-size", "4", "--out", str(out)]) == 0
    return out


def test_sample_command_continues_a_prompt_reproducibly_with_a_seed(text_run, capsys):
    capsys.readouterr()
    flags = ["sample", str(text_run), "the c", "--max-new-tokens", "40", "--temperature", "1.0",
             "--top-k", "5"]
    outputs = []
    for seed in ("3", "3", "4"):
        assert cli.main(flags + ["--seed", seed]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] != outputs[2]
    assert outputs[0].startswith("the c") and len(outputs[0]) == len("the c") + 40 + 1      # a newline
    assert cli.main(["sample", str(text_run / "checkpoint.npz"), "the", "--temperature", "0",
                     "--max-new-tokens", "5"]) == 0
    assert len(capsys.readouterr().out) == 3 + 5 + 1


class _Terminal:
    """sys.stdout that notes each write and flush in `events`, in order with the forward passes."""

    def __init__(self, events):
        self.events = events

    def write(self, text):
        if text:
            self.events.append(("write", text))
        return len(text)

    def flush(self):
        self.events.append("flush")


def test_sample_command_prints_each_token_before_the_next_is_computed(text_run, monkeypatch):
    """Past the context too (16 tokens a stretch), and the whole text as generating it at once."""
    events = []
    _recording_forwards(monkeypatch, events)
    monkeypatch.setattr(sys, "stdout", _Terminal(events))
    assert cli.main(["sample", str(text_run), "the c", "--max-new-tokens", "30", "--temperature", "1.0",
                     "--top-k", "5", "--seed", "3"]) == 0
    shown = events[events.index(("write", "the c")):]          # the run's loading ran forwards too
    saved = Run.load(text_run)
    model, task = saved.model, saved.task
    ids = generate_beyond_context(model, np.array(task.tokenizer.encode("the c")), 30, 1.0, 5,
                                  np.random.default_rng(3))
    assert "".join(e[1] for e in shown if e[0] == "write") == task.tokenizer.decode(ids.tolist()) + "\n"
    stretches = [11, 8, 8, 3]            # a new forward of the kept half (8 tokens) starts each stretch
    expected, chars = [("write", "the c"), "flush"], iter(task.tokenizer.decode(ids[5:].tolist()))
    for new in stretches:
        for _ in range(new):
            expected += ["forward", ("write", next(chars)), "flush"]
    assert shown == expected + [("write", "\n")]


def test_ctrl_c_while_writing_ends_the_line_of_text_then_says_interrupted(text_run, monkeypatch, capsys,
                                                                          threads_line):
    def two_tokens_then_ctrl_c(model, ids, new, temperature, top_k, rng, on_token):
        on_token(ids[0])
        on_token(ids[1])
        raise KeyboardInterrupt
    monkeypatch.setattr(text_task, "generate_beyond_context", two_tokens_then_ctrl_c)
    capsys.readouterr()
    assert cli.main(["sample", str(text_run), "the c", "--seed", "3"]) == 130
    assert capsys.readouterr() == ("the cth\n", threads_line + "interrupted\n")


@pytest.mark.parametrize("flags, message", [
    (["the dog"], "the vocabulary has no character 'd' (at position 4 of the text)"),
    ([""], "the prompt is empty"),
    (["the cat " * 3], "the prompt is 24 tokens; this model reads 16 at once, so give at most 15"),
    (["the", "--temperature", "-0.5"], "temperature must be a finite number ≥ 0"),
    (["the", "--top-k", "0"], "top_k must be at least 1"),
    (["the", "--max-new-tokens", "-1"], "--max-new-tokens must be 0 or more, got -1"),
    (["the", "--seed", "-1"], "--seed must be 0 or more, got -1"),
    (["the", "--temperature", "inf"], "temperature must be a finite number ≥ 0 (0: always the most likely "
                                      "token), got inf"),
    (["the", "--temperature", "nan"], "temperature must be a finite number ≥ 0"),
])
def test_bad_prompts_and_flags_are_one_clear_message(text_run, capsys, flags, message):
    capsys.readouterr()
    assert cli.main(["sample", str(text_run), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err


def test_a_temperature_too_small_to_divide_by_is_greedy_and_says_so(text_run, capsys, threads_line):
    capsys.readouterr()
    greedy = ["sample", str(text_run), "the c", "--max-new-tokens", "20", "--seed", "1", "--temperature"]
    assert cli.main([*greedy, "0"]) == 0
    expected = capsys.readouterr()
    assert cli.main([*greedy, "1e-320"]) == 0
    out, err = capsys.readouterr()
    assert out == expected.out and expected.err == threads_line
    assert err == ("note: --temperature 1e-320 is below 2.23e-308, too small to divide the logits by, so "
                   "each token is the most likely one (as with --temperature 0)\n" + threads_line)
    saved = Run.load(text_run)
    model, task = saved.model, saved.task
    ids = generate_beyond_context(model, np.array(task.tokenizer.encode("the c")), 20)       # greedy
    assert out == task.tokenizer.decode(ids.tolist()) + "\n"


def test_toy_runs_still_answer_greedily_and_refuse_sampling_flags(tmp_path, capsys):
    out = tmp_path / "copy"
    assert cli.main(["train", "copy", "--steps", "2", "--d-model", "16", "--eval-size", "10",
                     "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["sample", str(out), "1 2"]) == 0
    assert capsys.readouterr().out.startswith("1 2 |  →  ")
    assert cli.main(["sample", str(out), "1 2", "--temperature", "0.5", "--seed", "1"]) == 2
    assert "--temperature, --seed are for text runs; a copy run answers greedily" in capsys.readouterr().err


def test_sample_model_takes_a_runs_checkpoint_file_and_asks_for_a_missing_text(text_run, capsys):
    capsys.readouterr()
    flags = ["--max-new-tokens", "12", "--temperature", "0"]
    assert cli.main(["sample", "--model", str(text_run), "the c", *flags]) == 0
    from_folder = capsys.readouterr().out
    assert cli.main(["sample", "--model", str(text_run / "checkpoint.npz"), "the c", *flags]) == 0
    assert capsys.readouterr().out == from_folder and from_folder.startswith("the c")
    assert cli.main(["sample", "--model", str(text_run)]) == 2
    assert capsys.readouterr().err == (f'error: with --model, give the text to continue: sample --model '
                                       f'{text_run} "text"\n')
    assert cli.main(["sample"]) == 2
    assert 'give a run folder (or --model PATH) and the text to continue' in capsys.readouterr().err
    assert cli.main(["sample", "--model", str(text_run / "metrics.json"), "the c"]) == 2
    err = capsys.readouterr().err
    assert f"{text_run / 'metrics.json'}: a file, not a folder" in err and f"this file, {text_run}" in err
