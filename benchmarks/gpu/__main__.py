"""python -m benchmarks.gpu [--quick] [--only ROW ...] [--rounds N]

tinygrad_attn on CuPy beside PyTorch on the same GPU, in one process: the GPT-2 124M and
SmolLM-135M shapes (built by transformers, saved, read back by load_pretrained; batch 8 × 512,
forward + backward + AdamW), nanoGPT's laptop model, the `train reverse` step on the GPU and on the
CPU, causal attention (b 4, h 8, d 64; n = 1024 and 4096; ours fused and flash, PyTorch's SDPA and
written out) and 200 small ops. Each side's loss, peak memory and step time are printed, with
the ratios and the targets of issue 41, as a Markdown table.

Without a GPU (CuPy missing or seeing none, PyTorch without CUDA) it says so in one line and
exits 0, having measured nothing. A row that fails is reported and the others still run; the exit
code is then 1.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Sequence

from ..options import positive_int
from .measure import measure
from .rows import ROWS
from .runtimes import Place

ROUNDS, QUICK_ROUNDS = 7, 2
TARGET = 0.2            # seconds a sample lasts (steps per sample are chosen to match); --quick: one step


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ROUNDS} rounds of one step a sample, at the same shapes: checks that "
                             "every row runs, with rough figures")
    parser.add_argument("--only", nargs="+", choices=tuple(ROWS), metavar="ROW",
                        help=f"the rows to run, in the table's order whatever the order given: "
                             f"{', '.join(ROWS)} (default: all)")
    parser.add_argument("--rounds", type=positive_int,
                        help=f"interleaved rounds per row (default {ROUNDS}, --quick {QUICK_ROUNDS})")
    return parser


def why_no_gpu(keys: Sequence[str]) -> str | None:
    """Why rows `keys` cannot run here, in one line; None when CuPy and PyTorch both see a GPU (and
    transformers is there for the rows that build their models with it)."""
    from tinygrad_attn.backend import xp_for
    from tinygrad_attn.errors import DeviceError

    try:
        xp_for("cuda")
    except DeviceError as e:
        return str(e)
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (python -m pip install torch, a build with CUDA)"
    import torch

    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no GPU (a build without CUDA, or no driver)"
    needing = [key for key in keys if key in ("gpt2", "smollm")]
    if needing and importlib.util.find_spec("transformers") is None:
        return (f"transformers is not installed, and rows {', '.join(needing)} build their models with it "
                f"(python -m pip install transformers, or leave them out with --only)")
    return None


def describe(cupy, torch) -> str:
    """The GPU and the libraries, on one line."""
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    return (f"GPU: {torch.cuda.get_device_name(0)} ({gib:.0f} GiB); CuPy {cupy.__version__} (CUDA runtime "
            f"{runtime // 1000}.{runtime % 1000 // 10}), PyTorch {torch.__version__} "
            f"(CUDA {torch.version.cuda}); "
            f"float32, TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'} in PyTorch's matrix "
            f"products, CUPY_TF32={os.environ.get('CUPY_TF32', 'unset')}")


def release(place: Place) -> None:
    """Free what a row left (its models and closures, once nothing refers to them) and hand both
    libraries' cached blocks back to the driver, so that the next row has the GPU to itself."""
    gc.collect()
    place.ours.release()
    place.torch.release()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    keys = [key for key in ROWS if args.only is None or key in args.only]
    reason = why_no_gpu(keys)
    if reason is not None:
        print(f"benchmarks.gpu: no GPU to measure on, nothing measured: {reason}")
        return 0
    import cupy
    import torch

    from .runtimes import cupy_runtime, host_runtime, torch_runtime
    from .table import format_table, line_cells

    place = Place("cuda", cupy_runtime(cupy), "cuda", torch_runtime(torch), host_runtime())
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    target = 0.0 if args.quick else TARGET
    print(describe(cupy, torch), flush=True)
    results, failed = [], []
    for key in keys:
        start, row = time.perf_counter(), ROWS[key]
        try:
            measured = measure(row.build(row.sizes, place), rounds, target)
        except Exception as e:          # one row's failure (out of memory, an op on the GPU) ends only it
            traceback.print_exc()
            failed.append(f"{key}: {' '.join(str(e).split()) or type(e).__name__}")
            measured = None
        release(place)                  # after the except block: its traceback held the row's frames
        if measured is None:
            continue
        results.append((row, measured))
        for line in row.lines:          # as soon as it is known, should a later row not finish
            cells = line_cells(line, measured)[0]
            print(f"{key} ({time.perf_counter() - start:.0f} s): {' | '.join(cells)}", file=sys.stderr,
                  flush=True)
    print(f"Both sides in this process, on one GPU; per side, the median over {rounds} interleaved rounds "
          f"of {'one step' if args.quick else f'about {TARGET} s of steps'}, the device synchronized "
          "before and after; time B / A above 1: A is faster; memory: each library's allocator's high "
          "point over one step (peak: all it holds; step: what the step added)")
    print(format_table(results))
    for line in failed:
        print(f"failed: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
