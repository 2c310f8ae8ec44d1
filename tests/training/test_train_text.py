"""Training on text: the split, the batches, the loss falling, an exact resume, the vocabulary in
the checkpoint, the flash kernel for long blocks, and one clear message for each bad input."""

import json
import re

import numpy as np
import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.nn import TinyTransformer
from tinygrad_attn.text import CharTokenizer, HuggingFaceTokenizer, visible
from tinygrad_attn.training import History, Run, TrainConfig, checkpoint, make_model, train
from tinygrad_attn.training.text_evaluation import sample_text, validation_loss
from tinygrad_attn.training.text_task import TextTask

# About 3 KB of text with a pattern a one-layer model picks up in a few dozen steps.
TEXT = "".join(f"def f{i % 7}(x):\n    return x + {i % 5}\n" for i in range(100))
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "8", "--block-size", "16",
        "--eval-size", "8", "--lr", "0.01", "--warmup", "5"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT)
    return path


def test_batches_never_cross_the_split_and_targets_are_the_next_tokens():
    rng = np.random.default_rng(0)
    # the first 90% written with a-m, the held-out 10% with n-z: a window across the split mixes them
    text = "".join(rng.choice(list("abcdefghijklm"), 900)) + "".join(rng.choice(list("nopqrstuvwxyz"), 100))
    tokenizer = CharTokenizer.from_text(text)
    task = TextTask.from_text(text, tokenizer, block_size=8)
    assert len(task.train_ids) == 900 and len(task.val_ids) == 100
    train_half, val_half = set(tokenizer.encode("abcdefghijklm")), set(tokenizer.encode("nopqrstuvwxyz"))
    seen_last = False
    for _ in range(300):
        ids, targets = task.batch(rng, 16)
        assert ids.shape == targets.shape == (16, 8)
        np.testing.assert_array_equal(ids[:, 1:], targets[:, :-1])
        assert set(ids.ravel()) | set(targets.ravel()) <= train_half
        seen_last |= bool((targets[:, -1] == task.train_ids[-1]).any())
    ids, targets = task.held_out(50)
    assert set(ids.ravel()) | set(targets.ravel()) <= val_half
    assert ids[0].tolist() == task.val_ids[:8].tolist()                    # evenly spaced, from the start
    assert targets[-1].tolist() == task.val_ids[-8:].tolist()              # through the end
    assert seen_last      # the last training window is drawn too


def test_a_task_read_back_without_its_text_says_so_wherever_the_text_is_read(tmp_path):
    """A text task from a checkpoint holds no text: every use of its splits raises the one
    ValueError that says to give it the text (drawing nothing first), and with_text gives them back."""
    task = TextTask.from_text(TEXT, CharTokenizer.from_text(TEXT), block_size=8)
    bare = TextTask.from_meta(task.to_meta())
    model = TinyTransformer(bare.vocab_size, d_model=8, num_heads=2, num_layers=1, max_len=8)
    uses = (lambda: bare.batch(np.random.default_rng(0), 2), lambda: bare.held_out(2),
            lambda: bare.introduction, lambda: sample_text(model, bare, 1, 0),
            lambda: bare.draw_figures(model, History(loss=[2.0, 1.0]), None, tmp_path))
    for use in uses:
        with pytest.raises(ValueError, match="read from a checkpoint without its text"):
            use()
    assert list(tmp_path.iterdir()) == []                                      # no loss.png alone
    train_ids, val_ids = bare.with_text(TEXT, "the text").split_ids()
    assert np.concatenate([train_ids, val_ids]).tolist() == task.tokenizer.encode(TEXT)
    assert len(val_ids) == round(0.1 * len(TEXT))


def test_loss_falls_and_the_validation_loss_is_measured_on_held_out_text():
    text = TEXT
    task = TextTask.from_text(text, CharTokenizer.from_text(text), block_size=16)
    config = TrainConfig(steps=60, batch_size=8, d_model=16, num_heads=2, num_layers=1, lr=0.01, warmup=5)
    model = make_model(task, config)
    before = validation_loss(model, task, 16)
    assert abs(before - np.log(task.vocab_size)) < 0.5          # about uniform at the start
    history = train(model, task, config)
    after = validation_loss(model, task, 16)
    assert np.mean(history.loss[-10:]) < 0.6 * np.mean(history.loss[:10])
    assert after < 0.6 * before
    assert model.training                                       # validation_loss put training mode back


def test_train_text_writes_curves_vocabulary_and_samples(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "text", "--file", str(corpus), "--steps", "40", "--eval-every", "20",
                     *TINY, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith(f"training on {corpus}: {len(TEXT):,} tokens ({len(set(TEXT))} distinct ch")
    assert "step 20: validation loss" in printed and "sample after step 20: '" in printed
    assert "step 40: validation loss" not in printed                          # the last: in the report
    assert "text: validation loss" in printed and "sample (temperature 0.8, top-k 20): '" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["val_step"] == [20, 40] and len(metrics["val_loss"]) == 2 and len(metrics["loss"]) == 40
    assert metrics["validation_loss"] == metrics["val_loss"][-1] < metrics["loss"][0]
    for png in ("loss.png", "attention.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    run = Run.load(out)
    assert isinstance(run.task, TextTask) and run.task.tokenizer.chars == "".join(sorted(set(TEXT)))
    assert run.task.block_size == 16 and run.model.max_len == 16 and run.state.history.val_step == [20, 40]


def test_help_names_the_default_corpus(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "pydoc_data.topics" in text and "last 10% of the text is held out" in text


def test_resume_is_exact_with_dropout_and_evaluations(corpus, tmp_path):
    flags = ["train", "text", "--file", str(corpus), "--steps", "12", "--eval-every", "3", "--dropout", "0.1",
             *TINY]
    assert cli.main(flags + ["--out", str(tmp_path / "whole")]) == 0
    assert cli.main(flags + ["--out", str(tmp_path / "split"), "--stop-after", "5"]) == 0
    assert cli.main(["train", "text", "--resume", str(tmp_path / "split")]) == 0
    whole, split = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("whole", "split"))
    for key in ("loss", "grad_norm", "val_step", "val_loss", "sample", "validation_loss"):
        assert split[key] == whole[key], key
    weights = [checkpoint.load(tmp_path / d / "checkpoint.npz")[0] for d in ("whole", "split")]
    for name, value in weights[0].items():
        np.testing.assert_array_equal(weights[1][name], value, err_msg=name)


def test_evaluating_more_often_changes_nothing_else(corpus, tmp_path):
    """docs/language_model.md's figures come from a run evaluated every 25 steps, not 250: the
    evaluations and their samples draw nothing from the training's random streams (dropout's
    included), so the losses, the weights and the final sample are those of the sparser run."""
    flags = ["train", "text", "--file", str(corpus), "--steps", "12", "--dropout", "0.1", *TINY]
    for every in (3, 12):
        assert cli.main(flags + ["--eval-every", str(every), "--out", str(tmp_path / str(every))]) == 0
    often, once = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("3", "12"))
    assert often["val_step"] == [3, 6, 9, 12] and once["val_step"] == [12]
    for key in ("loss", "grad_norm", "sample", "validation_loss"):
        assert often[key] == once[key], key
    weights = [checkpoint.load(tmp_path / d / "checkpoint.npz")[0] for d in ("3", "12")]
    for name, value in weights[0].items():
        if name.startswith("model/"):
            np.testing.assert_array_equal(weights[1][name], value, err_msg=name)


def test_a_bpe_run_saves_its_vocabulary(corpus, tmp_path, capsys):
    out = tmp_path / "bpe"
    assert cli.main(["train", "text", "--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", "300",
                     "--steps", "3", *TINY, "--block-size", "8", "--out", str(out)]) == 0
    tokenizer = Run.load(out).task.tokenizer
    assert f"(byte-level BPE, {tokenizer.vocab_size} tokens)" in capsys.readouterr().out.splitlines()[0]
    assert 256 < tokenizer.vocab_size <= 300
    assert isinstance(tokenizer, HuggingFaceTokenizer) and tokenizer.decode(tokenizer.encode(TEXT)) == TEXT


@pytest.mark.parametrize("content, message", [
    (b"", "is empty: give a text to train on"),
    (b" \n\n ", "is empty (only whitespace)"),
    (b"abc\xff\xfedef" * 100, "is not UTF-8 text (byte 0xff at offset 3 is not UTF-8)"),
    (b"abc\x00def" * 100, "holds NUL bytes (the first at character 3)"),
    (b"short text" * 10, "too short for --block-size 16: it has 100 characters, so the held-out last "
                         "10% has 10"),
])
def test_bad_files_are_one_clear_message_each(tmp_path, capsys, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    assert cli.main(["train", "text", "--file", str(path), *TINY, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_bad_text_flags_are_one_clear_message_each(corpus, tmp_path, capsys):
    cases = [
        (["--file", str(tmp_path / "missing.txt")], "cannot read --file"),
        (["--file", str(corpus), "--vocab-size", "10"],
         f"the text has {len(set(TEXT))} distinct characters, more than --vocab-size 10"),
        (["--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", "100"],
         "byte-level BPE needs --vocab-size at least 256"),
        (["--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", "0"],
         "byte-level BPE needs --vocab-size at least 256 (one id for each byte value, so any text can be "
         "encoded), got 0"),
        (["--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", str(2**20 + 1)],
         "byte-level BPE takes --vocab-size at most 1,048,576 (real models use 30,000 to 260,000; the "
         "trainer sets memory aside for each id asked for), got 1,048,577"),
        (["--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", "5000000000"],
         "--vocab-size at most 1,048,576 (real models use 30,000 to 260,000; the trainer sets memory "
         "aside for each id asked for), got 5,000,000,000"),
        (["--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", str(10**20)],
         "got 100,000,000,000,000,000,000"),
        (["--file", str(corpus), "--block-size", "0"], "--block-size must be at least 2, got 0: the samples"),
        (["--file", str(corpus), "--block-size", "1", "--save-every", "2", "--eval-every", "3"],
         "error: --block-size must be at least 2, got 1: the samples after every --eval-every steps and at "
         "the end continue one token of held-out text, so the model must read that token and the one it "
         "writes"),
        (["--file", str(corpus), "--eval-every", "0"], "error: --eval-every must be at least 1, got 0"),
        (["--file", str(corpus), "--seed", "-1"], "error: --seed must be 0 or more, got -1"),
    ]
    for flags, message in cases:
        assert cli.main(["train", "text", *TINY[:-8], *flags, "--out", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1, (flags, err)
        assert not (tmp_path / "run").exists()                       # refused before anything is written
    assert cli.main(["train", "copy", "--file", str(corpus), "--block-size", "8"]) == 2
    assert "--file, --block-size are for `train text` only, not the toy task copy" in capsys.readouterr().err


def test_resuming_on_another_text_or_vocabulary_is_refused(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "text", "--file", str(corpus), "--steps", "4", "--stop-after", "2", *TINY,
                     "--out", str(out)]) == 0
    capsys.readouterr()
    other = tmp_path / "other.txt"
    other.write_text(TEXT.replace("return", "yield"))
    assert cli.main(["train", "text", "--resume", str(out), "--file", str(other)]) == 2
    assert "is not the text this run was trained on" in capsys.readouterr().err
    assert cli.main(["train", "text", "--resume", str(out), "--block-size", "32"]) == 2
    assert "cannot change --block-size when resuming (the checkpoint has block size 16)" in \
        capsys.readouterr().err
    corpus.write_text(TEXT + "changed")
    assert cli.main(["train", "text", "--resume", str(out)]) == 2
    assert f"{corpus.resolve()} is not the text this run was trained on" in capsys.readouterr().err


def test_a_saved_run_of_one_token_blocks_is_refused_before_resuming(corpus, tmp_path, capsys):
    """Such a run (a script can save one; the command refuses --block-size 1) would train, then fail at its
    first sample."""
    task = TextTask.from_text(TEXT, CharTokenizer.from_text(TEXT), block_size=1, source=str(corpus.resolve()))
    config = TrainConfig(steps=4, d_model=16, num_heads=2, num_layers=1, batch_size=8)
    Run.start(task, config).save(tmp_path / "run" / "checkpoint.npz")
    before = (tmp_path / "run" / "checkpoint.npz").read_bytes()
    assert cli.main(["train", "text", "--resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'run' / 'checkpoint.npz'} has block size 1, which cannot be "
                          f"resumed: the samples after every --eval-every steps") and err.count("\n") == 1
    assert (tmp_path / "run" / "checkpoint.npz").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.npz"]


def test_long_blocks_run_attention_as_the_flash_kernel(monkeypatch):
    from tinygrad_attn import functional as F
    from tinygrad_attn.nn.attention_choice import FLASH_FROM
    calls = []
    flash = F.flash_attention
    monkeypatch.setattr(F, "flash_attention", lambda *a, **k: calls.append(a[0].shape) or flash(*a, **k))
    model = TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=FLASH_FROM)
    ids = np.random.default_rng(0).integers(0, 5, (1, FLASH_FROM))
    model(ids[:, :FLASH_FROM - 1])
    assert calls == []
    long_out = model(ids).numpy()
    assert calls == [(1, 2, FLASH_FROM, 4)]
    model.blocks[0].attn.fused = False                         # the same numbers from primitives
    np.testing.assert_allclose(model(ids).numpy(), long_out, rtol=1e-4, atol=1e-5)


def test_a_text_run_loads_as_a_pretrained_model_with_its_tokenizer(corpus, tmp_path):
    import tinygrad_attn as ta
    out = tmp_path / "run"
    assert cli.main(["train", "text", "--file", str(corpus), "--steps", "2", *TINY, "--out", str(out)]) == 0
    model, tokenizer = ta.load_pretrained(out)
    run = Run.load(out)
    assert isinstance(tokenizer, CharTokenizer) and tokenizer.chars == run.task.tokenizer.chars
    ids = np.array([tokenizer.encode("def f")])
    np.testing.assert_array_equal(model(ids).numpy(), run.model.eval()(ids).numpy())


def test_a_resumed_run_says_where_it_resumed_and_what_its_seconds_count(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "text", "--file", str(corpus), "--steps", "6", *TINY, "--stop-after", "4",
                     "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["train", "text", "--resume", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"resuming {out / 'checkpoint.npz'} at step 4 of 6: training steps 5 to 6" in printed
    seconds = json.loads((out / "metrics.json").read_text())["train_seconds"]     # rounded to 0.01
    said = re.search(r"\((\d+\.\d) s of training, steps 5-6: resumed at step 4; training loss", printed)
    assert said and abs(float(said.group(1)) - seconds) <= 0.06
    assert json.loads((out / "metrics.json").read_text())["resumed_from_step"] == 4


def test_text_losses_are_reported_per_character(corpus, tmp_path, capsys):
    assert cli.main(["train", "text", "--file", str(corpus), "--steps", "4", *TINY, "--out",
                     str(tmp_path / "char")]) == 0
    metrics = json.loads((tmp_path / "char" / "metrics.json").read_text())
    assert f"text: validation loss {metrics['validation_loss']:.4f} nats per character after 4 steps" \
        in capsys.readouterr().out
    assert metrics["validation_characters_per_token"] == 1.0
    out = tmp_path / "bpe"
    assert cli.main(["train", "text", "--file", str(corpus), "--tokenizer", "bpe", "--vocab-size", "300",
                     "--steps", "4", *TINY, "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    task = Run.load(out).task.with_text(TEXT, str(corpus))
    _, targets = task.held_out(8)                                 # --eval-size 8
    chars = sum(len(task.tokenizer.decode(row.tolist())) for row in targets) / targets.size
    assert chars > 1.5 and metrics["validation_characters_per_token"] == pytest.approx(chars)
    loss = metrics["validation_loss"]
    assert (f"text: validation loss {loss:.4f} nats per token = {loss / chars:.4f} nats per character "
            f"({chars:.2f} characters per token) after 4 steps") in capsys.readouterr().out


def test_attention_png_gives_every_token_a_readable_label(tmp_path):
    import matplotlib.image

    from tinygrad_attn.training import plots

    tokens = [visible(t) for t in "def f(x):\n    return x\n"]
    assert tokens[3] == "␣" and tokens[9] == "↵"
    maps = [np.full((2, len(tokens), len(tokens)), 1 / len(tokens))]
    height, width = matplotlib.image.imread(plots.attention_grid(maps, tokens, tmp_path / "a.png")).shape[:2]
    per_panel = plots.LABEL_INCHES * len(tokens) * 100                  # pixels at 100 dpi
    assert width >= 2 * per_panel and height >= per_panel
    assert plots.LABEL_INCHES * 72 >= 1.2 * plots.LABEL_POINTS        # a label's row is taller than its text
