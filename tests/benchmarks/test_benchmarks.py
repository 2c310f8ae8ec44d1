"""The benchmark suite runs end to end in quick mode, each side in its own process, and prints a
row per workload; the float64 check that precedes timing catches a side whose results differ.

Timings are not asserted (speed is measured by the suite, not by tests); the BLAS floor's list of
products is checked against the model's shapes, and the MyGrad side (when installed) is checked
against ours in float64 on every workload.
"""

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks import __main__ as bench_main
from benchmarks import busy, specs
from benchmarks.harness import mismatch
from benchmarks.sides import bare_numpy, ours


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="the memory workload reads Linux's /proc/self (peak resident size)")
@pytest.mark.slow
def test_quick_suite_prints_a_row_per_workload(capsys, monkeypatch):
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    assert bench_main.main(["--quick", "--sides", "ours", "numpy", "--idle", "0", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"NumPy [\d.]+, BLAS .*OPENBLAS_NUM_THREADS=1", out)
    assert re.search(r"tinygrad_attn: NumPy [\d.]+, OpenBLAS threads in use \S+", out)
    assert "glibc malloc keeps freed memory in every process: yes, the default" in out
    assert "wrong results" not in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    expected = [r"MLP 16→16→4, batch 8, cross-entropy, SGD step +\| [\d.]+ ms +\| [\d.]+ ms \([\d.]+×\)",
                r"20 elementwise ops on \(8, 8\) \+ backward +\| [\d.]+ ms \([\d.]+ µs an op\) +\| [\d.]+ ms",
                r"causal attention n = 32, 2 heads, fwd \+ bwd +\| [\d.]+ ms +\| not implemented",
                r"TinyTransformer train step \(Adam\), 1 layer, batch 4 × 8 +\| [\d.]+ ms +\| [\d.]+ ms .*"
                r"matrix products alone",
                r"peak memory n = 256, 1 head: our plain kernel +\| [\d.]+ MiB",
                r"peak memory n = 256, 1 head: our flash kernel +\| [\d.]+ MiB",
                r"peak memory n = 256: flash / plain \(ours\) +\| [\d.]+ ",
                r"train reverse \(3 steps, quick\) +\| [\d.]+ s .*held-out exact match [\d.]+% on 20",
                r"nanoGPT laptop config on help-topic text: loss after 3 AdamW steps \(float32\) +\| "
                r"[\d.]+ \(from 4\.8\d+\)",
                r"nanoGPT laptop config train step \(Adam\), batch 12 × 64, 1 thread +\| [\d.]+ ms",
                r"SmolLM-135M-shaped random model, forward \+ backward on 32 tokens \(float32\), 1 thread "
                r"+\| [\d.]+ ms, [\d.]+ MB"]
    assert len(rows) == len(expected), out
    for row, pattern in zip(rows, expected):
        assert re.match(r"\| " + pattern, row), (pattern, row)


def test_busy_processes_run_beside_every_side_and_are_stopped_after(capsys, monkeypatch):
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    started, running_at_the_end = [], []
    real = bench_main.busy_processes

    @contextlib.contextmanager
    def watched(n):
        with real(n) as processes:
            started.extend(processes)
            yield processes
            running_at_the_end.extend(p.poll() is None for p in processes)   # the timing is done

    monkeypatch.setattr(bench_main, "busy_processes", watched)
    argv = ["--quick", "--only", "mlp", "--sides", "ours", "--threads", "1", "--busy", "2"]
    assert bench_main.main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"^2 busy processes beside every side; load average before: [\d.]+ [\d.]+ [\d.]+$", out,
                     re.MULTILINE)
    assert re.search(r"^load average after: [\d.]+ [\d.]+ [\d.]+$", out, re.MULTILINE)
    assert re.search(r"^\| MLP 16→16→4, batch 8, cross-entropy, SGD step +\| [\d.]+ ms", out, re.MULTILINE)
    assert len(started) == 2 and running_at_the_end == [True, True]
    assert all(p.poll() is not None for p in started)           # stopped once main returned


def test_a_busy_process_ends_when_its_parent_is_gone():
    """Killed before it could stop them, the benchmark leaves no busy process behind."""
    start_one = f"[sys.executable, '-c', {busy.SPIN!r}, str(os.getpid())]"
    parent = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time\n"
                               f"child = subprocess.Popen({start_one})\n"
                               "print(child.pid, flush=True)\ntime.sleep(300)"],
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(600):                 # it notices within one loop turn; give the system time
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as stat:
            if stat.read().split()[2] == "Z":       # ended, not yet reaped by its new parent
                break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        pytest.fail("the busy process outlived its parent")


def test_a_missing_peer_is_left_out_with_a_line_saying_so(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "mygrad" else real(name))
    sides, missing = bench_main.installed_sides(["ours", "mygrad", "numpy"])
    assert sides == ["ours", "numpy"]
    assert missing == ["MyGrad: not installed, its column is left out (python -m pip install mygrad, "
                       "or the bench extra: python -m pip install -e '.[bench]')"]


def test_cpu_clock_is_refused_with_more_than_one_thread():
    with pytest.raises(SystemExit):
        bench_main.main(["--clock", "cpu", "--threads", "2"])


SECONDS = "must be a finite number of seconds, 0 or more, got"
BAD_OPTIONS = [("benchmarks", ["--rounds", "-3"], "--rounds: must be at least 1, got -3"),
               ("benchmarks", ["--rounds", "0"], "--rounds: must be at least 1, got 0"),
               ("benchmarks", ["--rounds", "2.5"],
                "--rounds: expected a whole number of at least 1, got '2.5'"),
               ("benchmarks", ["--threads", "0"], "--threads: must be at least 1, got 0"),
               ("benchmarks", ["--threads", "-1"], "--threads: must be at least 1, got -1"),
               ("benchmarks", ["--idle", "-1"], f"--idle: {SECONDS} -1"),
               ("benchmarks", ["--idle", "nan"], f"--idle: {SECONDS} nan"),
               ("benchmarks", ["--idle", "inf"], f"--idle: {SECONDS} inf"),
               ("benchmarks", ["--idle", "soon"], "--idle: expected a number of seconds, got 'soon'"),
               ("benchmarks", ["--busy", "-1"], "--busy: must be at least 0, got -1"),
               ("benchmarks.modern", ["--rounds", "-1"], "--rounds: must be at least 1, got -1"),
               ("benchmarks.check_costs", ["--calls", "0"], "--calls: must be at least 1, got 0"),
               ("benchmarks.fresh_process", ["--steps", "-2"], "--steps: must be at least 1, got -2"),
               ("benchmarks.profile", ["mlp16", "--top", "0"], "--top: must be at least 1, got 0")]


@pytest.mark.parametrize("module, argv, message", BAD_OPTIONS, ids=[" ".join(b[1]) for b in BAD_OPTIONS])
def test_bad_counts_and_times_are_refused_naming_the_argument(module, argv, message, capsys):
    """--rounds -3 was a StatisticsError, --threads 0 a RuntimeError in a worker, --idle nan a
    ValueError from sleep: each is now argparse's one line, naming the flag, before anything runs."""
    main = importlib.import_module(module if module != "benchmarks" else "benchmarks.__main__").main
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m {module}: error: argument {message}"


def test_quick_says_what_it_does_not_how_long_it_takes():
    text = bench_main.build_parser().format_help()
    assert "2 rounds of each workload at small sizes and 3-step training runs" in text
    assert "second" not in text.split("--quick", 1)[1].split("--only")[0]


def test_the_check_catches_a_wrong_gradient_and_allows_rounding():
    reference = ours.build("mlp", {"widths": (4, 3, 2), "batch": 5}, np.float64).results()
    by_hand = bare_numpy.build("mlp", {"widths": (4, 3, 2), "batch": 5}, np.float64).results()
    assert mismatch(by_hand, reference) is None                 # the same math, other summation order
    wrong = {**by_hand, "fc1.weight": by_hand["fc1.weight"] * (1 + 1e-4)}
    assert mismatch(wrong, reference) == "fc1.weight: off by 1.0e-04 of its largest magnitude"
    assert "the reference has" in mismatch({"loss": by_hand["loss"]}, reference)
    # a gradient that is zero in exact arithmetic is rounding noise on both sides
    noise = {"loss": np.float64(1.0), "k_bias": np.array([1e-17, -2e-17])}
    assert mismatch(noise, {"loss": np.float64(1.0), "k_bias": np.array([-3e-17, 1e-17])}) is None


@pytest.mark.skipif(importlib.util.find_spec("mygrad") is None, reason="MyGrad is not installed")
@pytest.mark.parametrize("workload", specs.rows(quick=True), ids=lambda w: w.key)
def test_mygrad_side_computes_what_ours_does(workload):
    from benchmarks.sides import peer_mygrad

    reference = ours.build(workload.name, workload.sizes, np.float64).results()
    assert mismatch(peer_mygrad.build(workload.name, workload.sizes, np.float64).results(), reference) is None


def test_blas_floor_has_three_products_per_linear_and_six_per_attention():
    products = bare_numpy.blas_floor_products(specs.TRAIN)
    linears = 2 * 6 + 1                                 # 2 layers × (q, k, v, out, fc1, fc2) + head
    assert len(products) == 3 * linears + 6 * 2
    assert products[0] == ((2048, 64), (64, 64))        # X W_Q: 64 · 32 rows
    assert products[-1] == ((256, 32, 32), (256, 32, 16))   # dK = dSᵀ Q over 64 · 4 heads


def test_check_costs_prints_a_row_per_variant_and_puts_every_check_back(capsys):
    from benchmarks import check_costs
    from tinygrad_attn import engine
    from tinygrad_attn.guards import inplace

    assert check_costs.main(["chain", "--rounds", "1", "--calls", "1"]) == 0
    out = capsys.readouterr().out
    for name in check_costs.VARIANTS:
        assert re.search(rf"\| {re.escape(name)} \| [\d.]+ \| ", out), out
    assert engine.inplace is inplace and engine.current_scope.__module__ == "tinygrad_attn.scopes"


def test_check_costs_tricks_print_a_row_each_and_put_every_trick_back(capsys):
    from benchmarks import check_costs
    from tinygrad_attn import Tensor, engine, tensor_methods
    from tinygrad_attn.ops import REGISTRY
    from tinygrad_attn.ops.norm import LayerNorm

    def current():
        return LayerNorm.forward, LayerNorm.backward, Tensor.grad, tensor_methods._binary, engine._owned

    shipped = current()
    assert check_costs.main(["mlp16", "--tricks", "--rounds", "1", "--calls", "1"]) == 0
    out = capsys.readouterr().out
    for name in check_costs.TRICKS:
        assert re.search(rf"\| {re.escape(name)} \| [\d.]+ \| ", out), out
    assert current() == shipped
    assert all(op.grad_read_only for op in REGISTRY.values())


def test_check_costs_times_each_kernel_against_its_textbook_form(capsys):
    """--kernels: a row per op with a CPU kernel, in which that op (and only it) runs in textbook form."""
    from contextlib import ExitStack

    import numpy as np

    from benchmarks import check_costs
    from tinygrad_attn.kernels import KERNELS
    from tinygrad_attn.kernels.registry import choose

    variants = check_costs.kernel_variants()
    on_the_cpu = [op for op, by_device in KERNELS.items() if "cpu" in by_device]
    assert len(variants) == len(on_the_cpu) + 2 < len(KERNELS) + 2      # not the GPU's kernels alone
    for op in on_the_cpu:
        with ExitStack() as stack:
            check_costs._entered(stack, variants[f"{op.name} in textbook form"])
            assert [o.name for o in on_the_cpu if choose(o, np) is o] == [op.name]
    with ExitStack() as stack:
        check_costs._entered(stack, variants["every op in textbook form"])
        assert all(choose(o, np) is o for o in KERNELS)
    assert all(choose(o, np) is not o for o in on_the_cpu)              # back to the kernels
    assert check_costs.main(["mlp16", "--kernels", "--rounds", "1", "--calls", "1"]) == 0
    out = capsys.readouterr().out
    assert all(f"| {op.name} in textbook form |" in out for op in on_the_cpu)
    assert "what the kernel saves a step" in out


def test_profile_prints_the_steps_top_functions(capsys, monkeypatch):
    from benchmarks import profile

    kept = []       # the process-wide malloc setting is recorded, not made, in the test's process
    monkeypatch.setattr(profile, "keep_freed_memory", lambda: kept.append(True))
    assert profile.main(["mlp16", "--calls", "3", "--top", "5", "--no-keep-freed-memory"]) == 0
    assert kept == []
    assert profile.main(["mlp16", "--calls", "3", "--top", "5"]) == 0
    assert kept == [True]       # as in the table's processes, by default
    out = capsys.readouterr().out
    assert "MLP 16→16→4, batch 8, same step, ours: 3 steps under cProfile; top 5 by own time" in out
    assert re.search(r"List reduced from \d+ to 5 due to restriction <5>", out)
    assert "ncalls  tottime  percall  cumtime  percall filename:lineno(function)" in out


def test_idle_defaults_to_zero_with_one_thread_and_to_the_spin_time_with_more(monkeypatch):
    import argparse

    from benchmarks.options import SPIN_IDLE, add_process_options, apply_process_options
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")        # apply_process_options sets them: restored afterwards
    parser = argparse.ArgumentParser()
    add_process_options(parser, default_rounds=10)
    for argv, idle in ((["--threads", "1"], 0.0), (["--threads", "2"], SPIN_IDLE),
                       (["--threads", "1", "--idle", "0.5"], 0.5)):
        args = parser.parse_args(argv)
        apply_process_options(parser, args)
        assert args.idle == idle, argv


def test_the_suite_times_one_thread_and_every_core_by_default(monkeypatch):
    import argparse

    from benchmarks.options import SPIN_IDLE, add_process_options, apply_process_options, idle_for
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")        # apply_process_options sets them: restored afterwards
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    parser = argparse.ArgumentParser()
    add_process_options(parser, default_rounds=10, several_threads=True)
    args = parser.parse_args([])
    assert args.threads == [1, 12]
    apply_process_options(parser, args)
    assert os.environ["OMP_NUM_THREADS"] == "12" and args.idle is None
    assert (idle_for(1, args.idle), idle_for(12, args.idle), idle_for(12, 0.5)) == (0.0, SPIN_IDLE, 0.5)
    for refused in (["--threads", "1", "2", "--clock", "cpu"], ["--threads", "0", "2"]):
        with pytest.raises(SystemExit):
            apply_process_options(parser, parser.parse_args(refused))


def test_scaling_prints_a_row_per_thread_count_and_puts_the_settings_back(capsys, monkeypatch):
    from benchmarks import scaling
    from tinygrad_attn.kernels import parallel
    from tinygrad_attn.kernels.threads import openblas, thread_count

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")        # scaling sets them: restored afterwards
    blas = openblas()
    before = None if blas is None else blas[0]()
    run_piece = parallel._run_piece
    # (--no-keep-freed-memory: this test's process keeps glibc's own malloc settings)
    assert scaling.main(["--only", "attention", "--rounds", "1", "--threads", "2", "1",
                         "--no-keep-freed-memory"]) == 0
    out = capsys.readouterr().out
    assert "glibc malloc keeps freed memory: no" in out
    for threads in (1, 2):
        assert re.search(rf"\| causal attention n = 256, 4 heads, d 64, fwd \+ bwd \| {threads} \| [\d.]+ \| "
                         r"[\d.]+ \| [\d.]+ \| [\d.]+× \|", out), out
    assert out.startswith("load average before: ") and "load average after: " in out
    assert parallel._run_piece is run_piece and thread_count().source != "set_threads"
    assert blas is None or blas[0]() == before


@pytest.mark.slow
def test_fresh_process_times_each_side_alone_and_gives_the_ratio_per_process(capsys, monkeypatch):
    from benchmarks import fresh_process

    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)     # main() sets them; restored after the test
    assert fresh_process.main(["--processes", "1", "--steps", "2", "--sides", "ours", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "1 fresh processes a side, 5 warm-up + 2 timed steps each; keep_freed_memory: no" in out
    for title in ("tinygrad_attn", "NumPy by hand"):
        ms, faults = re.search(rf"\| 1 \| {title} \| ([\d.]+) \| ([\d,]+) \|", out).groups()
        assert float(ms) > 0 and int(faults.replace(",", "")) >= 0
    assert re.search(r"NumPy by hand / tinygrad_attn, process by process: [\d.]+× \(median [\d.]+×; "
                     r"below 1: NumPy by hand is faster\)", out)


def test_text_batches_are_windows_of_the_text_commands_training_split():
    from tinygrad_attn.text import CharTokenizer
    from tinygrad_attn.text.corpus import default_corpus
    from tinygrad_attn.training.text_task import TextTask

    ids, targets = specs.text_batches(4, specs.NANOGPT)
    assert ids.shape == targets.shape == (4, 12, 64)
    text = default_corpus()
    task = TextTask.from_text(text, CharTokenizer.from_text(text), block_size=64)
    train = task.train_ids
    starts = np.random.default_rng(1).integers(0, len(train) - 64, (4, 12))
    np.testing.assert_array_equal(ids, train[starts[..., None] + np.arange(64)])
    np.testing.assert_array_equal(targets, train[starts[..., None] + np.arange(1, 65)])


def test_text_losses_of_ours_and_pytorch_agree_step_by_step():
    pytest.importorskip("torch")
    import tinygrad_attn as ta
    from benchmarks.sides import peer_torch

    before = ta.get_default_dtype()
    try:
        mine = ours.text_losses(specs.NANOGPT, 3)
    finally:
        ta.set_default_dtype(before)
    theirs = peer_torch.text_losses(specs.NANOGPT, 3)
    np.testing.assert_allclose(mine, theirs, rtol=1e-4)
    assert mine[-1] < mine[0]


def test_flash_vs_plain_prints_a_row_per_length_and_flashs_share(capsys):
    from benchmarks import flash_vs_plain

    flash_vs_plain.main(["--sizes", "32", "64", "--repeats", "1", "--block-size", "16", "--causal"])
    out = capsys.readouterr().out
    assert re.search(r"^\s+32 (\s+[\d.]+){6}$", out, re.M) and re.search(r"^\s+64 (\s+[\d.]+){6}$", out, re.M)
    assert re.search(r"at n = 64, flash attention's peak memory is [\d.]+ of the plain kernel's", out)


def test_lock_cost_prints_a_row_per_step_and_puts_the_engine_back(capsys):
    from benchmarks import lock_cost
    from tinygrad_attn import engine

    shipped = engine._Pass.visit
    assert "_leaf_grad_lock" not in lock_cost.visit_without_lock().__code__.co_names
    assert "_leaf_grad_lock" in shipped.__code__.co_names
    assert lock_cost.main(["--rounds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "µs" in line]
    assert len(rows) == len(lock_cost.ROWS) and engine._Pass.visit is shipped


def test_op_times_times_each_op_inside_the_step_and_puts_every_op_back():
    from benchmarks import op_times
    from tinygrad_attn import optim
    from tinygrad_attn.ops.registry import REGISTRY

    def own_methods():
        return {(op.name, kind): op.__dict__.get(kind) for op in REGISTRY.values() for kind in op_times.KINDS}

    before = own_methods()
    step = optim.Optimizer.step
    bench = op_times._bench("ours", "mlp16", quick=True)
    spent, times = op_times._timed_ours(bench.step, 3)
    assert len(times) == 3 and all(t > 0 for t in times)
    # MLP 16→16→4: two linear layers a step, forward and backward; one optimizer step.
    assert spent[("linear", "forward")][1] == spent[("linear", "backward")][1] == 2 * 3
    assert spent[("optimizer", "step")][1] == 3
    assert sum(seconds for seconds, _ in spent.values()) <= sum(times)     # timed inside the steps
    assert own_methods() == before and optim.Optimizer.step is step


@pytest.mark.parametrize("side", ["ours", "torch"])
def test_op_times_prints_the_steps_time_and_its_ops_per_step(side):
    if side == "torch":
        pytest.importorskip("torch")
    import subprocess
    import sys

    from benchmarks.harness import ROOT

    run = subprocess.run([sys.executable, "-m", "benchmarks.op_times", "mlp16", "--side", side, "--quick",
                          "--steps", "3", "--top", "40", "--threads", "1"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert re.search(r"^a step: median [\d.]+ ms, mean [\d.]+ ms", run.stdout, re.M)
    if side == "ours":
        assert re.search(r"^ +linear (forward|backward) +[\d.]+ ms a step  \(2 calls\)$", run.stdout, re.M)
        assert re.search(r"^the ops' forward, backward, the optimizer and the in-place guard: [\d.]+ ms "
                         r"of a mean step of [\d.]+ ms; the guard alone [\d.]+ ms "
                         r"\([\d.]+% of the median step\)$",
                         run.stdout, re.M)
        assert re.search(r"^ +in-place guard seal +[\d.]+ ms a step  \(\d+ calls\)$", run.stdout, re.M)
    else:
        callees = r"\([\d.]+ ms with its callees; [\d.]+ calls\)$"
        assert re.search(r"^ +aten::(addmm|mm) +[\d.]+ ms a step  " + callees, run.stdout, re.M)


def test_op_times_refuses_an_unknown_row(capsys):
    from benchmarks import op_times

    with pytest.raises(SystemExit):
        op_times.main(["nope"])
    err = capsys.readouterr().err
    assert "unknown row 'nope'; one of mlp784, mlp16, chain, attention, flash, train, text" in err
