"""``tinygrad-attn export`` never overwrites unasked and never half-writes: a run folder is never
written into, a non-empty folder only with ``--overwrite`` (which replaces the whole model there),
and a write that fails (a full disk) is one line and leaves the folder as it was."""

import errno

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import files
from tinygrad_attn.commands.cli import main
from tinygrad_attn.errors import SaveError
from tinygrad_attn.training import Run, TrainConfig

IDS = np.array([[3, 1, 4, 1, 5, 12]])


def saved_run(folder, seed):
    config = TrainConfig(d_model=16, num_heads=2, num_layers=1, seed=seed)
    run = Run.start("reverse", config)
    run.save(folder / "checkpoint.npz")
    return run.model


def contents(folder):
    """Every file under `folder` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture
def runs(tmp_path):
    """Two runs of different weights, one exported to tmp_path/"model" with the other's stale extras."""
    first, second = saved_run(tmp_path / "first", seed=0), saved_run(tmp_path / "second", seed=1)
    assert main(["export", str(tmp_path / "first"), str(tmp_path / "model")]) == 0
    return first, second


def test_export_never_writes_into_a_run_folder(tmp_path, runs, capsys):
    """export RUN RUN wrote config.json beside the checkpoint, so the run was read as the export
    from then on, its later training unseen."""
    capsys.readouterr()
    first = tmp_path / "first"
    before = contents(first)
    for out in (first, first / "."):
        assert main(["export", str(first), str(out)]) == 2
        assert one_line_error(capsys) == f"tinygrad-attn export: OUT is RUN ({out}): write the model to " \
                                         f"another folder"
    for flags in ([], ["--overwrite"]):
        assert main(["export", str(first), str(tmp_path / "second"), *flags]) == 2
        assert one_line_error(capsys) == (
            f"tinygrad-attn export: save_pretrained: {tmp_path / 'second'} is the folder of a tinygrad-attn "
            f"run (checkpoint.npz), never written into: a model there would be read instead of the run's "
            f"checkpoint; write it to another folder")
    assert contents(first) == before and not (tmp_path / "second" / "config.json").exists()
    model, _ = ta.load_pretrained(tmp_path / "second")                  # still the run's own weights
    np.testing.assert_array_equal(model(IDS).numpy(), runs[1](IDS).numpy())


def test_a_folder_holding_anything_is_refused_without_overwrite(tmp_path, runs, capsys):
    capsys.readouterr()
    model = tmp_path / "model"
    (model / "generation_config.json").write_text('{"max_new_tokens": 5}')
    before = contents(model)
    assert main(["export", str(tmp_path / "second"), str(model)]) == 2
    assert one_line_error(capsys) == (
        f"tinygrad-attn export: save_pretrained: {model} is not empty (config.json, generation_config.json, "
        f"model.safetensors, tokenizer.json); write to a new or empty folder, or pass overwrite=True "
        f"(export: --overwrite) to replace the model in it")
    assert contents(model) == before
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    assert main(["export", str(tmp_path / "second"), str(other)]) == 2
    assert f"{other} is not empty (todo.txt); write to a new or empty folder" in one_line_error(capsys)
    assert main(["export", str(tmp_path / "second"), str(other), "--overwrite"]) == 2    # a model only
    assert one_line_error(capsys).endswith(f"{other} holds no model (no config.json) but other files "
                                           f"(todo.txt); overwrite replaces a model, so write to a new or "
                                           f"empty folder")
    assert contents(other) == {"todo.txt": b"keep me"}
    (tmp_path / "a-file").write_text("x")
    assert main(["export", str(tmp_path / "second"), str(tmp_path / "a-file")]) == 2
    assert one_line_error(capsys).endswith(f"{tmp_path / 'a-file'} is a file, not a folder")


def test_overwrite_replaces_the_whole_model_and_keeps_other_files(tmp_path, runs, capsys):
    model = tmp_path / "model"
    stale = ["generation_config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
             "tokenizer_config.json", "special_tokens_map.json", "pytorch_model.bin"]
    for name in stale:
        (model / name).write_text("{}")
    (model / "README.md").write_text("my notes")
    (model / ".git").mkdir()
    (model / ".git" / "HEAD").write_text("ref")
    assert main(["export", str(tmp_path / "second"), str(model), "--overwrite"]) == 0
    assert sorted(contents(model)) == [".git/HEAD", "README.md", "config.json", "model.safetensors",
                                       "tokenizer.json"]
    assert (model / "README.md").read_text() == "my notes"
    loaded, tokenizer = ta.load_pretrained(model)
    assert tokenizer.encode("3 1 4 1 5 |") == IDS[0].tolist()
    np.testing.assert_allclose(loaded(IDS).numpy(), runs[1](IDS).numpy(), rtol=0, atol=1e-4)
    assert not np.allclose(loaded(IDS).numpy(), runs[0](IDS).numpy(), atol=1e-2)


def test_save_pretrained_refuses_the_same_folders(tmp_path, runs):
    second, _ = ta.load_pretrained(tmp_path / "second")
    with pytest.raises(FileExistsError, match=r"model is not empty \(config.json, model.safetensors, "):
        ta.save_pretrained(second, tmp_path / "model")
    with pytest.raises(FileExistsError, match="is the folder of a tinygrad-attn run"):
        ta.save_pretrained(second, tmp_path / "first", overwrite=True)
    path = ta.save_pretrained(second, tmp_path / "new" / "nested" / "model")
    assert sorted(contents(path)) == ["config.json", "model.safetensors"]       # no tokenizer given


@pytest.mark.parametrize("failing", ["model.safetensors", "tokenizer.json", "config.json"])
@pytest.mark.parametrize("into", ["new", "model"])
def test_a_full_disk_is_one_line_and_leaves_the_folder_as_it_was(tmp_path, runs, capsys, monkeypatch,
                                                                 failing, into):
    """Each file fails in turn, written to a new folder or over the first run's model: the new
    folder is not made, the model is byte for byte as it was, no temporary file is left."""
    out = tmp_path / into
    before = contents(out) if out.exists() else None
    real_fsync, seen = files.os.fsync, []

    def full(fd):
        seen.append(fd)
        if len(seen) == ["model.safetensors", "tokenizer.json", "config.json"].index(failing) + 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "second"), str(out)] + (["--overwrite"] if before else [])) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"tinygrad-attn export: cannot write {out / failing}: No space left on device "
                           f"(it needs ") and line.endswith(" free; free some space or write elsewhere)")
    if before is None:
        assert not out.exists()
    else:
        assert contents(out) == before          # hidden temporaries would show here too


def test_an_export_killed_while_writing_leaves_temporaries_that_the_next_one_removes(tmp_path, runs):
    out = tmp_path / "out"
    out.mkdir()
    (out / f".config.json.{'ab' * 16}.tmp").write_text("half")        # as a killed export leaves it
    assert main(["export", str(tmp_path / "second"), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_save_error_is_an_os_error_naming_the_file(tmp_path, runs, monkeypatch):
    second, _ = ta.load_pretrained(tmp_path / "second")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(SaveError, match=r"cannot write .*model.safetensors: No space left on device"):
        ta.save_pretrained(second, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
