"""What each check of the engine costs a step, measured by leaving it out.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.check_costs [KEY] [--rounds 15]

KEY is a row of ``python -m benchmarks`` (``specs.rows``; default ``chain``: ·w and tanh
alternately on (8, 8), then backward; ``mlp784`` shows the cost on large arrays). Its step is
run with every check, and again with one check replaced by a no-op: the in-place fingerprints
(taken at forward, compared at backward), the silencing of NumPy's float warnings, the module
scope each node records. The variants run round-robin in one process (all of them are
tinygrad_attn, so no other library's heap is involved), timed as this process's CPU time: with
one BLAS thread, as above, that is the work done, without a loaded machine's waits.

Each row gives the median time (per op for the chain, per step otherwise) and the median
per-round difference from the full engine: what that check costs, forward and backward
together. The rest is the graph itself (a Node, a Context and a Tensor per op, the toposort,
the backward visit) and NumPy's own work. The checks that are a single test (the device check,
one type comparison per input in ``apply``'s loop; anomaly mode off; the backward's tuple
contract; a gradient's shape and dtype compared with its input's) are not separable this way
and stay in every variant.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import numpy as np

from tinygrad_attn import apply as apply_module
from tinygrad_attn import engine

from .options import positive_int
from .sides import ours
from .specs import rows


@contextmanager
def _replaced(owner: object, name: str, stand_in: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, stand_in)
    try:
        yield
    finally:
        setattr(owner, name, original)


class _NoFingerprints:
    """inplace as engine.record sees it, watching nothing: backward then has nothing to compare."""

    @staticmethod
    def watch(saved, inputs, out) -> tuple:
        return ()


VARIANTS: dict[str, list[tuple[object, str, object]]] = {     # (module, name, stand-in) to replace
    "every check (the engine as shipped)": [],
    "without in-place fingerprints": [(engine, "inplace", _NoFingerprints)],
    "without silencing float warnings": [(apply_module, "silence_float_errors", lambda: None),
                                         (apply_module, "restore_float_errors", lambda token: None)],
    "without module scopes on nodes": [(engine, "current_scope", lambda: None)],
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.check_costs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("key", nargs="?", default="chain",
                        help="the row: " + ", ".join(w.key for w in rows(False)))
    parser.add_argument("--rounds", type=positive_int, default=15)
    parser.add_argument("--calls", type=positive_int, default=10, help="steps per sample")
    args = parser.parse_args(argv)
    workloads = {w.key: w for w in rows(False)}
    if args.key not in workloads:
        parser.error(f"unknown row {args.key!r}; one of {', '.join(workloads)}")
    workload = workloads[args.key]
    bench = ours.build(workload.name, workload.sizes, np.float32)
    per = workload.sizes["length"] if workload.per == "op" else 1       # µs an op, or µs a step
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for index in range(args.rounds + 1):                # the first round warms up
        for name, patches in VARIANTS.items():
            with ExitStack() as stack:
                for owner, attribute, stand_in in patches:
                    stack.enter_context(_replaced(owner, attribute, stand_in))
                start = time.process_time()
                for _ in range(args.calls):
                    bench.step()
                seconds = (time.process_time() - start) / args.calls / per
            if index:
                samples[name].append(seconds)
    full = samples[next(iter(VARIANTS))]
    unit = "an op" if per > 1 else "a step"
    print(f"{workload.label}; {args.rounds} rounds, variants interleaved in one process; CPU µs {unit}")
    print(f"| variant | µs {unit} | what the check costs {unit} (median per-round difference) |")
    print("|---|---|---|")
    for name, times in samples.items():
        cost = statistics.median(f - t for f, t in zip(full, times)) * 1e6
        print(f"| {name} | {statistics.median(times) * 1e6:.2f} | "
              f"{'-' if times is full else f'{cost:.2f} µs'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
