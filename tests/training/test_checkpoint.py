"""Checkpoints are written atomically and never load from a truncated or foreign file."""

import numpy as np
import pytest

from tinygrad_attn.errors import CheckpointError
from tinygrad_attn.training import checkpoint


def test_round_trip(tmp_path):
    path = checkpoint.save(tmp_path / "run" / "c.npz", {"w": np.arange(3.0)}, {"step": 7})
    arrays, meta = checkpoint.load(path)
    np.testing.assert_array_equal(arrays["w"], [0.0, 1.0, 2.0])
    assert meta["step"] == 7 and list(tmp_path.joinpath("run").iterdir()) == [path]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = checkpoint.save(tmp_path / "c.npz", {"w": np.zeros(2)}, {"step": 1})
    with pytest.raises(TypeError):
        checkpoint.save(path, {"w": np.ones(2)}, {"step": object()})  # not JSON: fails before writing

    def crash_midway(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.np, "savez", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(path, {"w": np.ones(2)}, {"step": 2})
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == [path]
    assert checkpoint.load(path)[1]["step"] == 1


def test_truncated_foreign_and_missing_files_raise(tmp_path):
    path = checkpoint.save(tmp_path / "c.npz", {"w": np.zeros(1000)}, {"step": 1})
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="cut.npz: not a readable tinygrad_attn checkpoint"):
        checkpoint.load(tmp_path / "cut.npz")
    np.savez(tmp_path / "foreign.npz", w=np.zeros(2))
    with pytest.raises(CheckpointError, match="foreign.npz: not a tinygrad_attn checkpoint"):
        checkpoint.load(tmp_path / "foreign.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(CheckpointError):
        checkpoint.load(tmp_path / "text.npz")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        checkpoint.load(tmp_path / "absent.npz")


def test_pickled_objects_are_refused(tmp_path):
    np.savez(tmp_path / "evil.npz", w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="evil.npz"):
        checkpoint.load(tmp_path / "evil.npz")
