"""How many threads a run computes on (tinygrad_attn/kernels/threads.py): one by default, the idle
cores for the text model and a model folder, --threads and the environment over both; the first
line a command prints says which; OpenBLAS gets the same count. The machine's load is faked: no
test here depends on how busy it is or how fast it runs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinygrad_attn.commands import cli
from tinygrad_attn.kernels import threads

ROOT = Path(__file__).resolve().parents[2]
TEXT = "".join(f"def f{i % 7}(x):\n    return x + {i % 5}\n" for i in range(100))
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--batch-size", "8", "--eval-size", "8"]


@pytest.fixture
def no_thread_variables(monkeypatch):
    """The environment of a learner who set none of the thread variables (the suite sets them)."""
    for name in threads.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def machine(monkeypatch):
    """A fake 4-core machine whose other processes use `machine["others"]` cores (CPU seconds a
    second), while this process uses one; each look is one second after the last."""
    state = {"others": 0.0, "wall": 0.0, "busy": 0.0, "own": 0.0}

    def look():
        state["wall"] += 1.0
        state["own"] += 1.0
        state["busy"] += 1.0 + state["others"]
        return threads._Look(state["wall"], state["busy"], state["own"])

    monkeypatch.setattr(threads, "_look", look)
    monkeypatch.setattr(threads, "_last_look", look())
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    return state


def blas_threads():
    found = threads.openblas()
    return None if found is None else found[0]()


def first_error_line(capsys):
    return capsys.readouterr().err.splitlines()[0]


def test_the_count_is_asked_then_the_environment_then_the_idle_cores_then_one(no_thread_variables,
                                                                                  monkeypatch, machine):
    assert threads.thread_count() == threads.Count(1, "default")
    machine["others"] = 0.1                           # a tenth of a core: the cores count as idle
    with threads.thread_settings(follow_idle_cores=True) as count:
        assert count == threads.Count(4, "idle cores") == threads.thread_count()
        assert blas_threads() in (None, 4)
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert threads.thread_count() == threads.Count(3, "OMP_NUM_THREADS")
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")   # OpenBLAS's own order: before OMP's
        assert threads.thread_count() == threads.Count(2, "OPENBLAS_NUM_THREADS")
        monkeypatch.setenv("TINYGRAD_ATTN_THREADS", "5")
        assert threads.thread_count() == threads.Count(5, "TINYGRAD_ATTN_THREADS")
        with threads.thread_settings(6) as asked:
            assert asked == threads.Count(6, "set_threads") and blas_threads() in (None, 6)
        assert threads.thread_count() == threads.Count(5, "TINYGRAD_ATTN_THREADS")
    for name in threads.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    threads.apply()
    assert threads.thread_count() == threads.Count(1, "default") and blas_threads() in (None, 1)
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises(ValueError, match="set_threads: n must be a whole number ≥ 1 or None"):
            threads.set_threads(bad)
    assert threads.thread_count() == threads.Count(1, "default")     # a refused value changes nothing


@pytest.mark.parametrize("others,expected", [(0.0, 4), (0.15, 4), (0.5, 3), (1.3, 2), (2.9, 1), (9.0, 1)])
def test_a_core_counts_as_taken_once_other_processes_use_more_than_a_fifth_of_it(others, expected):
    before = threads._Look(wall=10.0, busy=100.0, own=5.0)
    # two seconds later: this process used 3 CPU seconds, the others `others` cores' worth
    now = threads._Look(wall=12.0, busy=100.0 + 3.0 + 2 * others, own=8.0)
    assert threads.idle_threads(before, now, cores=4) == expected


def test_the_training_loop_follows_the_other_processes_every_check(no_thread_variables, machine, monkeypatch):
    from tinygrad_attn.training import TrainConfig, make_model, train

    monkeypatch.setattr(threads, "CHECK_SECONDS", 0.0)       # look after every step
    seen = []
    loads = iter([2.5, 0.5, 0.0])                             # the others' cores during steps 2-4

    def on_step(step, history):
        seen.append(threads.get_threads())
        machine["others"] = next(loads, 0.0)

    config = TrainConfig(steps=4, d_model=16, num_heads=2, num_layers=1, batch_size=4)
    machine["others"] = 3.5
    with threads.thread_settings(follow_idle_cores=True) as count:
        assert count.threads == 1                            # the others hold every core
        machine["others"] = 0.0                              # and leave them during step 1
        train(make_model("copy", config), "copy", config, on_step=on_step)
    assert seen == [4, 1, 3, 4]
    assert threads.thread_count() == threads.Count(1, "default")
    seen.clear()
    train(make_model("copy", config), "copy", config, on_step=on_step)     # not following: one
    assert seen == [1, 1, 1, 1]


def test_each_command_says_its_threads_first_and_puts_the_settings_back(no_thread_variables, machine,
                                                                        tmp_path, capsys):
    machine["others"] = 1.5                     # others take two cores of the four: two idle
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    one = "threads: 1 (the default: a second thread gains little here and loses much wherever other " \
          "processes keep the cores busy; --threads N for more)"
    idle = "threads: 2 for now: the cores (of 4) that other processes leave idle, looked at again every " \
           "second (--threads N fixes the count)"
    toy, text = tmp_path / "toy", tmp_path / "text"
    runs = [
        (["train", "reverse", "--steps", "2", *TINY, "--out", str(toy)], one),
        (["train", "text", "--file", str(corpus), "--block-size", "16", "--steps", "2", "--eval-every", "2",
          "--arch", "llama", *TINY, "--out", str(text)], idle),
        (["sample", str(toy), "1 2"], one),
        (["sample", str(text), "def", "--max-new-tokens", "3"], one),
        (["step", "--all"], one),
        (["step", "--all", "--model", str(text), "--text", "def f1(x)"], idle),
        (["graph", "--out", str(tmp_path / "g.svg")], one),
        (["graph", "--model", str(text), "--text", "def f1", "--out", str(tmp_path / "m.svg")], idle),
        (["explore", "--out", str(tmp_path / "e.html")], one),
        (["explore", "--model", str(text), "--text", "def f1", "--out", str(tmp_path / "m.html")], idle),
        (["export", str(text), str(tmp_path / "hf")], one),
    ]
    for argv, line in runs:
        assert cli.main(argv) == 0, argv
        assert first_error_line(capsys) == line, argv
        assert threads.thread_count() == threads.Count(1, "default"), argv
        assert blas_threads() in (None, 1), argv
    assert cli.main(["step", "--all", "--threads", "3"]) == 0
    assert first_error_line(capsys) == "threads: 3 (--threads 3)"
    assert threads.thread_count() == threads.Count(1, "default")


def test_the_environment_is_followed_and_threads_overrides_it(no_thread_variables, monkeypatch, capsys):
    monkeypatch.setenv("TINYGRAD_ATTN_THREADS", "3")
    assert cli.main(["step", "--all"]) == 0
    assert first_error_line(capsys) == \
        "threads: 3 (TINYGRAD_ATTN_THREADS=3 in the environment; --threads N overrides it)"
    assert cli.main(["graph", "--threads", "2", "--out", "/dev/null/never.svg"]) == 2
    assert capsys.readouterr().err.startswith("tinygrad-attn graph: ")    # a refused run: its error alone
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            cli.main(["train", "copy", "--threads", bad])
        assert "argument --threads: N must be" in capsys.readouterr().err


def fresh_python(code, **variables):
    env = {k: v for k, v in os.environ.items() if k not in threads.ENVIRONMENT}
    env.update(variables, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=env, timeout=120).stdout.split()


BLAS_AND_OURS = ("import numpy\nimport tinygrad_attn\nfrom tinygrad_attn.kernels import threads\n"
                 "found = threads.openblas()\n"
                 "print(found[0]() if found else 'none', threads.get_threads())")


def test_import_tinygrad_attn_sets_one_thread_unless_the_environment_asks():
    assert fresh_python(BLAS_AND_OURS) in (["1", "1"], ["none", "1"])
    assert fresh_python(BLAS_AND_OURS, TINYGRAD_ATTN_THREADS="2") in (["2", "2"], ["none", "2"])
    assert fresh_python(BLAS_AND_OURS, OMP_NUM_THREADS="3") in (["3", "3"], ["none", "3"])
