"""A full disk never loses a run: every file is written whole or not at all, a failed
write is one line naming the file and the space it needs, and an earlier checkpoint is kept.

The real failures come from a file-size limit (``RLIMIT_FSIZE``, no root needed) set in a child
process, where a write past it fails with EFBIG; a full disk (ENOSPC) is simulated in-process."""

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad_attn import files
from tinygrad_attn.errors import SaveError
from tinygrad_attn.training import Run, TrainConfig, checkpoint

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sets RLIMIT_FSIZE")

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "16", "--eval-size", "20"]
CHILD = """
import resource, signal, sys
from tinygrad_attn.commands import cli
from tinygrad_attn.training import plots
limit, when, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)           # a write past the limit fails with EFBIG
def set_limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
if when == "now":
    set_limit()
else:                                                   # once training is over: at the first plot
    drawn = plots.loss_curve
    plots.loss_curve = lambda *a, **k: (set_limit(), drawn(*a, **k))[1]
sys.exit(cli.main(argv))
"""


def run_limited(limit, *argv, when="now"):
    """The CLI in a child process whose files may not grow past `limit` bytes: (exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(limit), when, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr


def last_line(stderr):
    assert "Traceback" not in stderr, stderr
    return stderr.strip().splitlines()[-1]


def needed(line):
    """The space a message says a file needs, in bytes."""
    number, unit = re.search(r"it needs (?:about )?([\d.]+) (bytes|kB|MB)", line).groups()
    return float(number) * {"bytes": 1, "kB": 1e3, "MB": 1e6}[unit]


@pytest.mark.slow
def test_a_first_save_past_the_file_size_limit_is_one_line_and_leaves_no_partial_file(tmp_path):
    out = tmp_path / "run"
    code, err = run_limited(20_000, "train", "reverse", "--steps", "3", *SMALL, "--out", str(out))
    assert code == 1
    line = last_line(err)
    assert line.startswith(f"error: cannot write {out}/checkpoint.npz: File too large (it needs about ")
    assert line.endswith(" kB, above the file-size limit, see ulimit -f); nothing was saved")
    assert 70e3 < needed(line) < 85e3                  # the file, once written, is 74.6 kB
    assert sorted(p.name for p in out.iterdir()) == []          # no checkpoint, no temporary, no lock


@pytest.mark.slow
def test_a_failed_save_keeps_the_previous_checkpoint_intact(tmp_path):
    out = tmp_path / "run"
    code, err = run_limited(10**9, "train", "reverse", "--steps", "6", "--stop-after", "2", *SMALL,
                            "--out", str(out))
    assert code == 0, err
    before = (out / "checkpoint.npz").read_bytes()
    code, err = run_limited(len(before) // 2, "train", "reverse", "--resume", str(out))
    assert code == 1
    line = last_line(err)
    assert line.startswith(f"error: cannot write {out}/checkpoint.npz: File too large (it needs about ")
    assert len(before) <= needed(line) < 1.1 * len(before)
    assert line.endswith(f"; {out}/checkpoint.npz holds step 2; resume with: tinygrad-attn train "
                                   f"reverse --resume {out}")
    assert (out / "checkpoint.npz").read_bytes() == before
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 2
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz"]


@pytest.mark.slow
def test_plots_that_cannot_be_written_never_lose_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    code, err = run_limited(1000, "train", "reverse", "--steps", "3", *SMALL, "--out", str(out), when="plots")
    assert code == 1
    line = last_line(err)
    assert line.startswith(f"error: cannot write {out}/loss.png: File too large (it needs ")
    assert needed(line) > 1000 and "about" not in line           # the PNG, drawn in memory: exact
    assert line.endswith(f"; the trained model (step 3) is saved in {out}/checkpoint.npz; evaluate it again "
                         f"with: tinygrad-attn train reverse --resume {out}")
    assert checkpoint.load(out / "checkpoint.npz")[1]["step"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz", "metrics.json"]   # no truncated PNG


def test_graph_out_past_the_limit_leaves_no_truncated_file_and_an_earlier_one_as_it_was(tmp_path):
    picture = tmp_path / "g.svg"
    picture.write_text("<svg>an earlier drawing</svg>")
    code, err = run_limited(2000, "graph", "--example", "head", "--out", str(picture))
    assert code == 2
    assert last_line(err).startswith(f"tinygrad-attn graph: render: cannot write {str(picture)!r}: File too "
                                     f"large (it needs ")
    assert picture.read_text() == "<svg>an earlier drawing</svg>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.svg"]


def test_export_past_the_limit_is_one_line_and_leaves_its_folder_as_it_was(tmp_path):
    """A new folder is not made; a model being replaced (--overwrite) keeps every byte. The weights
    are written first and need more than the limit (was: safetensors' own error, a traceback)."""
    config = TrainConfig(d_model=16, num_heads=2, num_layers=1)
    Run.start("reverse", config).save(tmp_path / "run" / "checkpoint.npz")
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text('{"model_type": "gpt2"}')
    (old / "generation_config.json").write_text("{}")
    for out, flags in ((tmp_path / "new", []), (old, ["--overwrite"])):
        code, err = run_limited(4000, "export", str(tmp_path / "run"), str(out), *flags)
        assert code == 2
        line = last_line(err)
        assert line.startswith(f"tinygrad-attn export: cannot write {out}/model.safetensors: File too large "
                               f"(it needs ")
        assert line.endswith(" kB, above the file-size limit, see ulimit -f)")
        assert needed(line) > 4000 and len(err.splitlines()) == 1
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in old.iterdir()) == ["config.json", "generation_config.json"]
    assert (old / "config.json").read_text() == '{"model_type": "gpt2"}'


def test_a_full_disk_names_the_file_the_space_needed_and_the_space_free(tmp_path, monkeypatch):
    target = tmp_path / "c.npz"
    checkpoint.save(target, {"w": np.zeros(3)}, {"step": 1})
    before = target.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(SaveError) as error:
        checkpoint.save(target, {"w": np.zeros(250_000)}, {"step": 2})
    message = str(error.value)
    assert message.startswith(f"cannot write {target}: No space left on device (it needs about 2.0 MB, ")
    assert message.endswith(" free; free some space or write elsewhere)") and "\n" not in message
    assert error.value.errno == errno.ENOSPC and isinstance(error.value, OSError)
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]
