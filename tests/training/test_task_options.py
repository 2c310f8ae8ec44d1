"""A run's task from its name and options (``training.task_options``), made whole again on resume,
and what a run decides for itself: its output folder and the steps and time its report gives."""

from pathlib import Path

import pytest

from tinygrad_attn.errors import CheckpointError
from tinygrad_attn.text import CharTokenizer
from tinygrad_attn.training import Run, TextTask, TrainConfig
from tinygrad_attn.training.task_options import BLOCK_SIZE, task_again, task_for
from tinygrad_attn.training.tasks import TASKS

TEXT = "the quick brown fox jumps over the lazy dog; " * 60             # 2,700 characters
SMALL = dict(steps=4, d_model=16, num_heads=2, num_layers=1, batch_size=8, eval_size=8)


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "fox.txt").write_text(TEXT)
    return tmp_path / "fox.txt"


def test_a_toy_task_is_named_and_takes_no_text_options():
    assert task_for("sort") is TASKS["sort"]
    with pytest.raises(ValueError, match="^--file, --vocab-size are for `train text` only, not the toy "
                                         "task add$"):
        task_for("add", {"file": "x.txt", "vocab_size": 30})


def test_a_text_task_reads_its_file_with_the_options_given_and_the_defaults_otherwise(corpus):
    task = task_for("text", {"file": str(corpus), "block_size": 8})
    assert isinstance(task, TextTask) and isinstance(task.tokenizer, CharTokenizer)
    assert task.block_size == 8 and task.source == str(corpus.resolve())
    assert task.vocab_size == len(set(TEXT)) and len(task.train_ids) + len(task.val_ids) == len(TEXT)
    assert task_for("text", {"file": str(corpus)}).block_size == BLOCK_SIZE == 64
    with pytest.raises(ValueError, match="^--block-size must be at least 2, got 1: the samples"):
        task_for("text", {"file": str(corpus), "block_size": 1})


def test_a_resumed_text_reads_its_file_again_and_refuses_what_would_change_the_run(corpus, tmp_path):
    saved = TextTask.from_meta(task_for("text", {"file": str(corpus), "block_size": 8}).to_meta())
    assert saved.train_ids is None                                       # a checkpoint keeps no text
    again = task_again(saved, "text", {}, tmp_path / "checkpoint.npz")
    assert isinstance(again, TextTask) and again.train_ids is not None and again.block_size == 8
    with pytest.raises(ValueError, match=r"checkpoint.npz is a 'text' checkpoint, not 'copy'$"):
        task_again(saved, "copy", {}, tmp_path / "checkpoint.npz")
    with pytest.raises(ValueError, match=r"^cannot change --block-size, --tokenizer when resuming \(the "
                                         r"checkpoint has block size 8, tokenizer char\)$"):
        task_again(saved, "text", {"block_size": 16, "tokenizer": "bpe"}, tmp_path / "checkpoint.npz")
    other = tmp_path / "other.txt"
    other.write_text(TEXT.upper())
    with pytest.raises(CheckpointError, match="is not the text this run was trained on"):
        task_again(saved, "text", {"file": str(other)}, tmp_path / "checkpoint.npz")
    assert task_again(TASKS["copy"], "copy", {}, None) is TASKS["copy"]


def test_a_run_chooses_its_folder_and_reports_the_steps_and_time_it_trained(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = Run.start("copy", TrainConfig(**SMALL))
    assert run.folder().path == Path("runs", "copy")        # relative: where the command runs
    assert run.folder(tmp_path / "mine").path == tmp_path / "mine"
    assert (run.resumed_from, run.seconds) == (0, 0.0)
    run.train(tmp_path / "mine" / "checkpoint.npz", stop_after=2)
    assert run.seconds > 0
    again = Run.load(tmp_path / "mine").resumed({})
    assert again.resumed_from == 2 and again.folder().path == tmp_path / "mine"
    again.train(tmp_path / "mine" / "checkpoint.npz")
    again.seconds = 0.5                                     # the report's time, fixed for the check
    assert "(0.5 s of training, steps 3-4: resumed at step 2)" in again.evaluate(tmp_path / "mine")[0]
