"""``python -m benchmarks.gpu`` without a GPU: the one line it prints, its arguments, and every row
built and measured end to end at small sizes with our side on the strict CuPy stand-in and
PyTorch's on the CPU (what runs here; the GPU's clocks and memory readings need a GPU). The twins
must give the same first loss; timings are not asserted."""

import sys

import numpy as np
import pytest
import torch

from benchmarks.gpu import __main__ as gpu_main
from benchmarks.gpu.measure import Measured, measure
from benchmarks.gpu.rows import ROWS, Line, Row, Target
from benchmarks.gpu.runtimes import Peak, PeakCounter, Place, host_runtime
from benchmarks.gpu.table import HEAD, format_table, line_cells
from benchmarks.harness import Timing, mismatch
from benchmarks.sides import ours, peer_torch
from tinygrad_attn import backend

# Each row at a size that runs in a moment (the row's own sizes: ROWS[key].sizes).
SMALL = {"gpt2": {"model_type": "gpt2", "vocab_size": 61, "n_positions": 16, "n_embd": 16, "n_layer": 2,
                  "n_head": 2, "batch": 2, "seq": 8},
         "smollm": {"model_type": "llama", "vocab_size": 61, "hidden_size": 24, "num_hidden_layers": 2,
                    "num_attention_heads": 3, "num_key_value_heads": 1, "intermediate_size": 40,
                    "max_position_embeddings": 16, "batch": 2, "seq": 8},
         "nanogpt": {"vocab": 103, "d_model": 16, "heads": 2, "layers": 1, "d_ff": 32, "batch": 2, "seq": 8},
         "reverse": {"d_model": 16, "num_heads": 2, "num_layers": 1, "batch_size": 4},
         "attention1024": {"batch": 2, "heads": 2, "n": 16},
         "attention4096": {"batch": 2, "heads": 2, "n": 24},
         "chain": {"length": 6, "shape": (4, 4)}}


def test_without_cupy_it_says_so_in_one_line_and_measures_nothing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)
    backend._cupy.cache_clear()
    try:
        assert gpu_main.main([]) == 0
    finally:
        backend._cupy.cache_clear()
    assert capsys.readouterr().out == (
        "benchmarks.gpu: no GPU to measure on, nothing measured: device 'cuda' needs CuPy, which is not "
        "installed: pip install 'tinygrad_attn[cuda12]' for CUDA 12 or 'tinygrad_attn[cuda13]' for CUDA 13 "
        "(the CUDA version nvidia-smi prints)\n")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this PyTorch sees a GPU")
def test_with_a_gpu_for_cupy_but_pytorch_built_without_cuda_it_names_pytorch(strict_cuda, capsys):
    assert gpu_main.main(["--only", "chain"]) == 0
    assert capsys.readouterr().out == (f"benchmarks.gpu: no GPU to measure on, nothing measured: PyTorch "
                                       f"{torch.__version__} sees no GPU (a build without CUDA, or no "
                                       "driver)\n")


def test_transformers_is_needed_only_by_the_rows_that_build_real_models(strict_cuda, monkeypatch):
    real = gpu_main.importlib.util.find_spec
    monkeypatch.setattr(gpu_main.importlib.util, "find_spec",
                        lambda name: None if name == "transformers" else real(name))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gpu_main.why_no_gpu(["gpt2", "smollm", "chain"]) == (
        "transformers is not installed, and rows gpt2, smollm build their models with it (python -m pip "
        "install transformers, or leave them out with --only)")
    assert gpu_main.why_no_gpu(["nanogpt", "chain"]) is None


@pytest.mark.parametrize("argv, message", [
    (["--rounds", "0"], "argument --rounds: must be at least 1, got 0"),
    (["--only", "gpt3"], "argument --only: invalid choice: 'gpt3' (choose from 'gpt2', 'smollm', 'nanogpt', "
                         "'reverse', 'attention1024', 'attention4096', 'chain')")])
def test_bad_arguments_are_refused_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_main.main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m benchmarks.gpu: error: {message}"


def test_every_row_has_its_small_size_and_the_lines_point_at_its_contenders():
    assert set(SMALL) == set(ROWS)
    args = gpu_main.build_parser().parse_args(["--quick", "--only", "chain", "gpt2"])
    assert args.quick and args.only == ["chain", "gpt2"] and args.rounds is None
    for row in ROWS.values():
        for line in row.lines:
            assert line.a != line.b and line.memory_of in ("peak", "step")


@pytest.mark.parametrize("key", list(ROWS))
def test_each_row_runs_end_to_end_and_its_twins_take_the_same_first_step(key, strict_cuda):
    host = host_runtime()
    row = ROWS[key]
    measured = measure(row.build(SMALL[key], Place("cuda", host, "cpu", host, host)), rounds=2, target=0.0)
    assert all(len(samples) == 2 and min(samples) > 0 for samples in measured.timing.samples.values())
    assert all(peak is None for peak in measured.peaks.values())        # the host reads no memory
    losses = [loss for loss in measured.losses.values() if loss is not None]
    if key in ("gpt2", "smollm", "nanogpt", "reverse"):   # the same weights and batch on both sides
        assert len(losses) == 2 and losses[0] == pytest.approx(losses[1], rel=1e-5)
        assert losses[0] > 0
    else:
        assert losses == []
    for line in row.lines:
        cells, verdicts = line_cells(line, measured)
        assert len(cells) == len(HEAD) and cells[1].startswith(measured.names[line.a] + ": ")
        speed = measured.timing.ratio(measured.names[line.b], measured.names[line.a])
        expected = [] if line.speed is None else [line.speed.met(speed)]
        assert [v for v in verdicts if v is not None] == expected
        assert cells[3] == f"{speed:.2f}" and cells[4] == "-"


@pytest.mark.parametrize("sizes, torch_kernel", [
    ({"batch": 2, "heads": 2, "n": 12, "kernel": "plain"}, None),
    ({"batch": 2, "heads": 2, "n": 12, "kernel": "flash"}, "written"),
    ({"length": 6, "shape": (5, 3)}, None)])
def test_our_side_on_the_device_computes_what_pytorchs_twin_does(sizes, torch_kernel, strict_cuda):
    name = "chain" if "length" in sizes else "attention"
    mine = ours.build(name, sizes, np.float64, device="cuda").results()
    theirs = peer_torch.build(name, {**sizes, "kernel": torch_kernel}, np.float64, device="cpu").results()
    assert mismatch(mine, theirs) is None
    assert next(iter(mine.values())).shape == ((5, 3) if name == "chain" else (2, 2, 12, 64))


def test_a_line_gives_both_ratios_and_each_targets_verdict():
    mib = 2**20
    measured = Measured(("a", "b"), {"a": 2.5, "b": None},
                        {"a": Peak(1024 * mib, 3072 * mib), "b": Peak(512 * mib, 2560 * mib)},
                        Timing({"a": [1e-3, 2e-3, 3e-3], "b": [2e-3, 2e-3, 9e-3]}))
    cells, verdicts = line_cells(Line("x", 0, 1, speed=Target("≥", 2.5), memory=Target("≤", 1.2)), measured)
    assert cells == ("x", "a: 2 ms, peak 3.00 GiB (the step: 2.00 GiB), loss 2.5000",
                     "b: 2 ms, peak 2.50 GiB (the step: 2.00 GiB)", "2.00", "1.20 (peak)",
                     "time ≥ 2.5: NOT met; memory (peak) ≤ 1.2: met")    # B / A per round: 2, 1, 3
    assert verdicts == [False, True]
    cells, verdicts = line_cells(Line("y", 1, 0, memory=Target("≤", 0.9), memory_of="step"), measured)
    assert cells[3:] == ("0.50", "1.00 (step)", "memory (step) ≤ 0.9: NOT met") and verdicts == [False]
    unmeasured = Measured(("a", "b"), {"a": None, "b": None}, {"a": None, "b": Peak(0, mib)}, measured.timing)
    row = Row("z", {}, lambda sizes, place: [],
              (Line("z", 0, 1, speed=Target(">", 1), memory=Target("≤", 1)),))
    table = format_table([(row, unmeasured)])
    assert "| time > 1: met; memory (peak) ≤ 1: not measured |" in table
    assert table.endswith("\ntargets met: 1 of 1 (1 not measured)")


def test_the_peak_counter_follows_blocks_taken_and_given_back():
    counter = PeakCounter(1000)
    for take, size in ((True, 512), (True, 2048), (False, 512), (True, 1024), (False, 2048), (True, 512)):
        (counter.take if take else counter.give)(size)
    assert counter.result() == Peak(1000, 1000 + 512 + 2048 + 1024 - 512)
    assert counter.result().step == 3072 and counter.in_use == 1000 + 1024 + 512
