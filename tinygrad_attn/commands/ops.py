"""``tinygrad-attn ops``: every registered op with its backward formula, and every file of
``ops/`` with what it holds, as Markdown tables.

``docs/ops.md`` is this page (a test keeps it current): regenerate it with
``tinygrad-attn ops > docs/ops.md``. A new op, or a new file in ``ops/``, shows up there.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re

from .. import ops
from ..ops import REGISTRY

__all__ = ["ONE_RULE", "add_parser", "file_table", "formula_table", "run"]

# Said once where a learner looks first: here and in docs/README.md (a test compares the two).
ONE_RULE = ("**One rule: a PyTorch name means what it means in PyTorch.** Where NumPy and PyTorch give a "
            "name two meanings, PyTorch's holds: `x.transpose(0, 1)` swaps two axes (`x.permute(*dims)` "
            "reorders them all), `x.split(2)` cuts pieces of size 2 (`x.chunk(n)` makes n pieces), "
            "`x.max(dim)` returns `(values, indices)` (`x.amax(dim)` the values alone), `var` and `std` "
            "divide by n − 1 (`correction=1`). Both spellings of an argument work: `dim=` or `axis=`, "
            "`keepdim=` or `keepdims=`.")

# What a learner can call that is not an op of its own: a composition of registered ops (as
# PyTorch defines it), so its backward is theirs. tests/test_op_surface.py checks each exists.
COMPOSED = {
    "add sub mul div neg pow": "the method forms of `+ - * / - **`",
    "view squeeze unsqueeze flatten unflatten": "`reshape`",
    "clamp": "`clip` under PyTorch's name",
    "chunk": "`split` into pieces of ⌈n/chunks⌉",
    "permute swapaxes swapdims": "`transpose` (the op permutes the axes; `transpose(d0, d1)` swaps two)",
    "amax amin": "`max` and `min` over `dim` (ties share the gradient)",
    "sort topk": "indices by argsort (no gradient), values by `gather`: each value's gradient goes back "
                 "to the element it came from",
    "max min": "with a `dim`: `(values, indices)`, indices by argmax/argmin, values by `gather` (the "
               "gradient goes to that index); without one, the `max`/`min` op",
    "selu celu": "`elu` with PyTorch's parameters (selu: scale 1.0507…, alpha 1.6733…; celu: input scale "
                 "1/alpha)",
    "relu6": "`hardtanh(x, 0, 6)`",
}
# Results without a gradient: bool or integer tensors that are never part of a graph.
NO_GRADIENT = ("== != < <= > >= isnan isinf isfinite logical_not logical_and logical_or ~ & | argmax argmin "
               "any all one_hot")
CONSTRUCTORS = "tensor zeros ones full zeros_like ones_like full_like eye arange linspace randn rand randint"
OUT_OF_SCOPE = "convolutions, pooling, linear algebra decompositions, bitwise ops, complex numbers"


def formula_table() -> str:
    """The registry as Markdown (op name, the class docstring's first line, formulas, case count),
    then what is built from the ops, what has no gradient, and what is out of scope."""
    lines = [
        "# Ops and their backward formulas",
        "",
        "Generated from the op registry by `tinygrad-attn ops`; each op's backward docstring in",
        "`tinygrad_attn/ops/` gives the derivation, and each case is gradient-checked in float64.",
        "",
        ONE_RULE,
        "",
        "| op | computes | backward | cases |",
        "|---|---|---|---|",
    ]
    for name, op in sorted(REGISTRY.items()):
        summary = (op.__doc__ or "").strip().splitlines()[0].replace("|", "\\|")
        formulas = "<br>".join(f"`{f}`" if f else f"`{arg}`: no gradient"
                               for arg, f in op.formula.items()).replace("|", "\\|")
        lines.append(f"| `{name}` | {summary} | {formulas} | {len(op.cases)} |")
    lines += ["", *file_table()]
    lines += ["", "## Built from the ops above", "", "| methods | are |", "|---|---|"]
    lines += [f"| {' '.join(f'`{n}`' for n in names.split())} | {how} |" for names, how in COMPOSED.items()]
    lines += ["", "**Without a gradient** (bool or integer results, never in a graph): "
              + " ".join(f"`{n}`" for n in NO_GRADIENT.split()) + ".", "",
              "**Constructors** (`ta.*`, seeded by `ta.manual_seed`): "
              + " ".join(f"`{n}`" for n in CONSTRUCTORS.split()) + ".", "",
              f"**Out of scope:** {OUT_OF_SCOPE}."]
    return "\n".join(lines) + "\n"


def file_table() -> list[str]:
    """The lines of a table of every module of ``ops/``: its docstring's first sentence and the
    ops registered in it (none for the contract, the registry and the helpers)."""
    lines = ["## The files of `tinygrad_attn/ops/`", "", "| file | holds | ops |", "|---|---|---|"]
    for info in pkgutil.iter_modules(ops.__path__):
        module = importlib.import_module(f"{ops.__name__}.{info.name}")
        paragraph = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())
        sentence = re.split(r"(?<! al)\. (?=[A-Z])", paragraph)[0].rstrip(".").replace("``", "`") + "."
        names = " ".join(f"`{n}`" for n, op in REGISTRY.items() if op.__module__ == module.__name__)
        lines.append(f"| `ops/{info.name}.py` | {sentence.replace('|', chr(92) + '|')} | {names or '-'} |")
    return lines


def run(args: argparse.Namespace) -> int:
    print(formula_table(), end="")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ops", help="list every op with its backward formula",
                                   description=__doc__)
    parser.set_defaults(run=run)
