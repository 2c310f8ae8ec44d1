"""What each check of the engine costs a step, measured by leaving it out.

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.check_costs [KEY] [--rounds 15] [--tricks | --kernels]

KEY is a row of ``python -m benchmarks`` (``specs.rows``; default ``chain``: ·w and tanh
alternately on (8, 8), then backward; ``mlp784`` shows the cost on large arrays) or ``text`` (the
nanoGPT laptop model's train step, ``specs.NANOGPT``, as ``op_times text`` times it). Its step is
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

With ``--tricks`` the variants are the engine's speed tricks instead, each replaced by the plain
code it stands for (``TRICKS``: the leaf gradient not copied, the read-only gradient handed over,
the fast paths of the ``grad`` setter and of binary operators, the float-error token), and the
last column is what the trick saves. With ``--kernels`` each op that has a kernel (``kernels/``)
runs in its textbook form in turn (``ta.textbook(name)``), then every op: the last column is what
each kernel saves. ``benchmarks/README.md`` keeps the figures, with the command that made them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import numpy as np

from tinygrad_attn import Tensor, engine, tensor_methods
from tinygrad_attn import apply as apply_module
from tinygrad_attn.backend import device_of
from tinygrad_attn.errors import DeviceError, ShapeError
from tinygrad_attn.guards.shapes import broadcast_shape
from tinygrad_attn.kernels import KERNELS, textbook
from tinygrad_attn.ops import REGISTRY

from .options import positive_int
from .sides import ours
from .specs import NANOGPT, Workload, rows


@contextmanager
def _replaced(owner: object, name: str, stand_in: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, stand_in)
    try:
        yield
    finally:
        setattr(owner, name, original)


class _NoFingerprints:
    """inplace as engine.record sees it, sealing and watching nothing: backward then has nothing
    to compare."""

    @staticmethod
    def seal(out, inputs) -> None:
        return None

    @staticmethod
    def watch(saved, inputs, out) -> tuple:
        return ()


VARIANTS: dict[str, list[tuple[object, str, object]]] = {     # (module, name, stand-in) to replace
    "every check (the engine as shipped)": [],
    "without the in-place guard": [(engine, "inplace", _NoFingerprints)],
    "without silencing float warnings": [(apply_module, "silence_float_errors", lambda: None),
                                         (apply_module, "restore_float_errors", lambda token: None)],
    "without module scopes on nodes": [(engine, "current_scope", lambda: None)],
}


# ----- the speed tricks, each against the plain formula it replaces (--tricks) -----

def _plain_grad_setter(self, value):
    """Tensor.grad's setter without the fast path: device and shape checked on every write."""
    if value is not None:
        if device_of(value) != self.device:
            raise DeviceError("grad: wrong device")
        if getattr(value, "shape", None) != self.data.shape:
            raise ShapeError("grad: wrong shape")
    self._grad = value


def _plain_binary(op, a, b):
    """_binary without the fast path: promotion and the broadcast check on every call."""
    a, b = tensor_methods._promoted(op, a, b)
    broadcast_shape(op.name, a.shape, b.shape)
    return apply_module.apply(op, a, b)


def _errstate_silence():
    state = np.errstate(over="ignore", divide="ignore", invalid="ignore")
    state.__enter__()
    return state


def _errstate_restore(state):
    state.__exit__(None, None, None)


def _kernel_classes() -> list[type]:
    return [k for by_device in KERNELS.values() for k in set(by_device.values())]


TRICKS: dict[str, list[tuple[object, str, object]]] = {
    "every trick (the engine as shipped)": [],
    "a leaf's first gradient always copied (no _owned/shared)": [
        (engine, "_owned", lambda grad, shared: grad.copy())],
    "every op's backward handed a copy (no read-only skip)": [
        (op, "grad_read_only", False) for op in [*REGISTRY.values(), *_kernel_classes()]],
    "the grad setter checks device and shape every time": [
        (Tensor, "grad", property(Tensor.grad.fget, _plain_grad_setter))],
    "_binary promotes and checks broadcasting every time": [
        (tensor_methods, "_binary", _plain_binary)],
    "float errors silenced by np.errstate per op": [
        (apply_module, "silence_float_errors", _errstate_silence),
        (apply_module, "restore_float_errors", _errstate_restore),
        (engine, "silence_float_errors", _errstate_silence),
        (engine, "restore_float_errors", _errstate_restore)],
}


def kernel_variants() -> dict[str, list]:
    """--kernels: the engine as shipped, each op with a CPU kernel (the step runs on the CPU) in its
    textbook form alone, then every op in textbook form (``ta.textbook``)."""
    variants: dict[str, list] = {"every kernel (the engine as shipped)": []}
    for op in (op for op, by_device in KERNELS.items() if "cpu" in by_device):
        variants[f"{op.name} in textbook form"] = [op.name]
    variants["every op in textbook form"] = [None]
    return variants


def _entered(stack: ExitStack, variant: list) -> None:
    """Enter a variant's replacements ((owner, name, stand-in)) or textbook forms (an op's name;
    None: every op)."""
    for item in variant:
        if isinstance(item, tuple):
            stack.enter_context(_replaced(*item))
        else:
            stack.enter_context(textbook() if item is None else textbook(item))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.check_costs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("key", nargs="?", default="chain",
                        help="the row: " + ", ".join(w.key for w in rows(False)) + ", or text")
    parser.add_argument("--rounds", type=positive_int, default=15)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--tricks", action="store_true",
                      help="time each speed trick against the plain formula it replaces, not the checks")
    what.add_argument("--kernels", action="store_true",
                      help="time each kernel against its op's textbook form (what each kernel saves)")
    parser.add_argument("--calls", type=positive_int, default=10, help="steps per sample")
    args = parser.parse_args(argv)
    workloads = {w.key: w for w in rows(False)}
    workloads["text"] = Workload("text", "train", "the nanoGPT laptop model's train step (text)",
                                 NANOGPT)
    if args.key not in workloads:
        parser.error(f"unknown row {args.key!r}; one of {', '.join(workloads)}")
    workload = workloads[args.key]
    bench = ours.build(workload.name, workload.sizes, np.float32)
    per = workload.sizes["length"] if workload.per == "op" else 1       # µs an op, or µs a step
    variants = kernel_variants() if args.kernels else TRICKS if args.tricks else VARIANTS
    saving = args.tricks or args.kernels
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(args.rounds + 1):                # the first round warms up
        for name, patches in variants.items():
            with ExitStack() as stack:
                _entered(stack, patches)
                start = time.process_time()
                for _ in range(args.calls):
                    bench.step()
                seconds = (time.process_time() - start) / args.calls / per
            if index:
                samples[name].append(seconds)
    full = samples[next(iter(variants))]
    what = "the kernel saves" if args.kernels else "the trick saves" if args.tricks else "the check costs"
    unit = "an op" if per > 1 else "a step"
    print(f"{workload.label}; {args.rounds} rounds, variants interleaved in one process; CPU µs {unit}")
    print(f"| variant | µs {unit} | what {what} {unit} (median per-round difference) |")
    print("|---|---|---|")
    for name, times in samples.items():
        cost = statistics.median(t - f if saving else f - t for f, t in zip(full, times)) * 1e6
        print(f"| {name} | {statistics.median(times) * 1e6:.2f} | "
              f"{'-' if times is full else f'{cost:.2f} µs'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
