"""Where a step's wall time goes, op by op: our side's ops timed inside the step, or PyTorch's
kernels under torch.profiler, so that the two can be read side by side.

    python -m benchmarks.op_times KEY [--side ours|torch] [--threads N] [--steps 30] [--top 15]

KEY is a row of the table (mlp784, mlp16, chain, attention, flash, train) or ``text`` (the nanoGPT
laptop model's train step, ``specs.NANOGPT``). The step is built in float32, run 5 times to warm
up, then `steps` times. Ours: every registered op's forward and backward and the optimizer's step
are wrapped in a wall-clock timer (the step is otherwise unchanged; each call pays for two clock
reads); a line gives an op's milliseconds per step and its calls per step, and the last line the
share of the step they cover with the in-place guard's calls (seal, watch, check), and the guard's
own share (the rest is the engine and the modules).
PyTorch: torch.profiler's self CPU time per step of its top kernels (matrix products show as
``aten::mm`` and ``aten::addmm``), and their time with what they called (the optimizer's step calls
its elementwise kernels, listed apart). Both keep freed memory for reuse, as the table's processes do.
`--threads` sets BLAS's, OpenMP's, PyTorch's and ``tinygrad_attn.kernels.parallel``'s thread count before
NumPy is imported (default: the environment's).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
import types
from collections.abc import Callable, Sequence

from .options import positive_int, set_thread_count

WARMUP = 5
KINDS = ("forward", "backward")
KEYS = ("mlp784", "mlp16", "chain", "attention", "flash", "train", "text")


def _warm_up(step: Callable[[], object]) -> None:
    for _ in range(WARMUP):
        step()


def _timed_steps(step: Callable[[], object], steps: int) -> list[float]:
    """Each of `steps` runs of `step`, in seconds."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def _step_line(times: list[float], how: str) -> str:
    return (f"a step: median {statistics.median(times) * 1e3:.2f} ms, "
            f"mean {statistics.fmean(times) * 1e3:.2f} ms ({how})")


def _bench(side: str, key: str, quick: bool):
    """The Bench of row `key` (or the text step) on `side`, float32."""
    import importlib

    import numpy as np

    from . import specs
    from .sides import SIDES

    module = importlib.import_module(f"benchmarks.sides.{SIDES[side]}")
    if key == "text":
        return module.build("train", specs.NANOGPT, np.float32)
    workload = {w.key: w for w in specs.rows(quick)}[key]
    return module.build(workload.name, workload.sizes, np.float32)


def _timed_ours(step: Callable[[], object], steps: int) -> tuple[dict, list[float]]:
    """Run `step` `steps` times with every registered op's forward and backward, the optimizer's
    step and the in-place guard's three calls timed: ({(name, "forward" | "backward" | "step" |
    "seal" | "watch" | "check"): [seconds, calls]}, the steps' times)."""
    from tinygrad_attn import engine, optim
    from tinygrad_attn.kernels import KERNELS
    from tinygrad_attn.ops.registry import REGISTRY

    spent: dict = collections.defaultdict(lambda: [0.0, 0])

    def timer(key, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                entry = spent[key]
                entry[0] += time.perf_counter() - start
                entry[1] += 1
        return timed

    # (op, "forward" | "backward", its own staticmethod or None where it inherits the base's); a
    # kernel's own methods too, under its op's name (one it inherits is its op's, timed there)
    originals = [(op, kind, op.__dict__.get(kind)) for op in REGISTRY.values() for kind in KINDS]
    originals += [(fast, kind, fast.__dict__[kind]) for by_device in KERNELS.values()
                  for fast in set(by_device.values()) for kind in KINDS if kind in fast.__dict__]
    optimizer_step = optim.Optimizer.step
    guard = engine.inplace          # engine.record seals and watches, the backward pass checks
    try:
        for op, kind, _ in originals:
            setattr(op, kind, staticmethod(timer((op.name, kind), getattr(op, kind))))
        optim.Optimizer.step = timer(("optimizer", "step"), optimizer_step)
        engine.inplace = types.SimpleNamespace(
            seal=timer(("in-place guard", "seal"), guard.seal),
            watch=timer(("in-place guard", "watch"), guard.watch),
            check_unchanged=timer(("in-place guard", "check"), guard.check_unchanged))
        _warm_up(step)
        spent.clear()
        times = _timed_steps(step, steps)
    finally:
        for op, kind, original in originals:
            if original is None:
                delattr(op, kind)
            else:
                setattr(op, kind, original)
        optim.Optimizer.step = optimizer_step
        engine.inplace = guard
    return dict(spent), times


def _report_ours(step: Callable[[], object], steps: int, top: int) -> None:
    spent, times = _timed_ours(step, steps)
    print(_step_line(times, "ops timed inside it"))
    rows = sorted(spent.items(), key=lambda item: -item[1][0])
    for (name, kind), (seconds, calls) in rows[:top]:
        print(f"  {name:>44} {kind:<8} {seconds / steps * 1e3:8.3f} ms a step  ({calls / steps:g} calls)")
    covered = sum(seconds for seconds, _ in spent.values()) / steps
    guard = sum(seconds for (name, _), (seconds, _) in spent.items() if name == "in-place guard") / steps
    print(f"the ops' forward, backward, the optimizer and the in-place guard: {covered * 1e3:.2f} ms of a "
          f"mean step of {statistics.fmean(times) * 1e3:.2f} ms; the guard alone {guard * 1e3:.3f} ms "
          f"({guard / statistics.median(times) * 100:.1f}% of the median step)")


def _report_torch(step: Callable[[], object], steps: int, top: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    _warm_up(step)
    print(_step_line(_timed_steps(step, steps), "not profiled"))
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step()
    averages = sorted(profiler.key_averages(), key=lambda event: -event.self_cpu_time_total)
    print(f"torch.profiler, {steps} steps: self CPU time a step (and with what it called, such as "
          "the optimizer's elementwise kernels)")
    for event in averages[:top]:
        with_callees = event.cpu_time_total / steps / 1e3
        print(f"  {event.key[:64]:>64} {event.self_cpu_time_total / steps / 1e3:8.3f} ms a step  "
              f"({with_callees:.3f} ms with its callees; {event.count / steps:g} calls)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.op_times", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("key", help="a row (mlp784, mlp16, chain, attention, flash, train) or text")
    parser.add_argument("--side", choices=("ours", "torch"), default="ours")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="every runtime's thread count, set before NumPy loads "
                             "(default: the environment's)")
    parser.add_argument("--steps", type=positive_int, default=30)
    parser.add_argument("--top", type=positive_int, default=15)
    parser.add_argument("--quick", action="store_true", help="the quick suite's sizes")
    args = parser.parse_args(argv)
    if args.key not in KEYS:
        parser.error(f"unknown row {args.key!r}; one of {', '.join(KEYS)}")
    if args.threads is not None:
        if "numpy" in sys.modules:
            parser.error("--threads: NumPy is already loaded in this process; set the thread "
                         "variables (OPENBLAS_NUM_THREADS, …) before starting it instead")
        set_thread_count(args.threads)
    from tinygrad_attn.training.host_memory import keep_freed_memory

    keep_freed_memory()
    bench = _bench(args.side, args.key, args.quick)
    if bench is None:
        parser.error(f"the {args.side} side does not implement {args.key}")
    (_report_ours if args.side == "ours" else _report_torch)(bench.step, args.steps, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
