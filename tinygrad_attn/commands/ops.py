"""``tinygrad-attn ops``: every registered op with its backward formula, the ops a transformer uses
first, then the others, and every file of ``ops/`` with what it holds, as Markdown tables.

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

__all__ = ["KEPT_DIFFERENCES", "ONE_RULE", "TRANSFORMER_OPS", "add_parser", "file_table", "formula_table",
           "op_rows", "run"]

# The ops a default or a Llama TinyTransformer runs, forward and backward: fused or not, with dropout
# while training, attention as the flash kernel from nn.attention_choice.FLASH_FROM keys on (the CPU)
# (tests/commands/test_cli.py traces both models and compares). docs/ops.md lists them first.
TRANSFORMER_OPS = ("add", "cross_entropy", "dropout", "flash_attention", "gelu", "getitem", "layer_norm",
                   "linear", "matmul", "mul", "reshape", "rms_norm", "rope", "scaled_dot_product_attention",
                   "silu", "softmax", "transpose")

# Said once where a learner looks first: here and in docs/README.md (a test compares the two).
ONE_RULE = ("**One rule: a PyTorch name means what it means in PyTorch.** Where NumPy and PyTorch give a "
            "name two meanings, PyTorch's holds: `x.transpose(0, 1)` swaps two axes (`x.permute(*dims)` "
            "reorders them all), `x.split(2)` cuts pieces of size 2 (`x.chunk(n)` makes n pieces), "
            "`x.max(dim)` returns `(values, indices)` (`x.amax(dim)` the values alone), `var` and `std` "
            "divide by n − 1 (`correction=1`). Both spellings of an argument work: `dim=` or `axis=`, "
            "`keepdim=` or `keepdims=`.")

# Where a PyTorch-named function's parameters differ from PyTorch's (names, order, defaults, or one of
# PyTorch's missing; compared with inspect.signature or torch's docstring by
# tests/engine/test_pytorch_signatures.py): the parameters that differ, and why. A positional call means the
# same in both unless the reason says otherwise.
_FIRST_ARGUMENT = ("the first argument is named as the lessons' formulas name it (x, probs, logits), not "
                   "`input`; passed by position, as everyone passes it, it means the same")
_SIZE = "the shape argument is named `shape` (NumPy's name); passed by position it means the same"
_DEVICE = ("`device` defaults to \"cpu\" (as `Tensor`'s in the API contract), which is what PyTorch's None, "
           "its default device, means here")
KEPT_DIFFERENCES = {
    **dict.fromkeys([
        "F.celu", "F.dropout", "F.elu", "F.hardsigmoid", "F.hardswish", "F.hardtanh", "F.leaky_relu",
        "F.linear", "F.logsigmoid", "F.mish", "F.one_hot", "F.pad", "F.relu", "F.relu6", "F.selu",
        "F.silu", "F.softplus", "F.softsign"], ("x", _FIRST_ARGUMENT)),
    "F.binary_cross_entropy": ("probs", _FIRST_ARGUMENT),
    "F.binary_cross_entropy_with_logits": ("logits", _FIRST_ARGUMENT),
    "F.softmax": ("x dim mask", "a third argument `mask` (True = takes part), the lessons' masks, where "
                  "PyTorch has `dtype`; `dim` defaults to −1 as the API contract fixes it (PyTorch's None "
                  "guesses a dim, with a warning)"),
    "F.log_softmax": ("x dim mask", "a third argument `mask`, and `dim` −1 by default, as softmax"),
    "F.layer_norm": ("x weight bias eps normalized_shape",
                     "no `normalized_shape`: it normalises over the last axis, as the lessons write it "
                     "(weight and bias come second and third)"),
    "F.rms_norm": ("x weight eps normalized_shape",
                   "no `normalized_shape`: over the last axis, as layer_norm"),
    "F.scaled_dot_product_attention": (
        "q k v mask is_causal scale return_weights fused dropout_p enable_gqa window",
        "the API contract's signature: q, k, v, mask (True = takes part, as PyTorch's boolean attn_mask), "
        "is_causal, scale, return_weights; PyTorch's fifth argument, dropout_p, is a keyword here, "
        "beside fused, enable_gqa and window"),
    "Tensor.backward": ("grad retain_graph create_graph inputs",
                        "the cotangent is named `grad`; retain_graph, create_graph and inputs are not "
                        "taken: the graph is always kept (as retain_graph=True), and higher-order and "
                        "partial backward passes are not supported"),
    "Tensor.transpose": ("dims dim1", "`transpose(*dims)`: two dims swap them as PyTorch; a full "
                         "permutation of all dims (ndim > 2) also works, as before the one rule"),
    "Tensor.swapdims": ("axis0 axis1", "an alias of `swapaxes(axis0, axis1)`: PyTorch names the same "
                                       "arguments dim0, dim1"),
    "Tensor.sort": ("stable", "`stable` may be given by position (PyTorch: keyword only); the sort is always "
                              "stable"),
    "Tensor.topk": ("dim", "`dim` defaults to −1, as the API contract fixes it; PyTorch's None means the "
                           "last dim too, and is taken here"),
    "Tensor.div": ("other", "the divisor is named `other` (PyTorch's docstring says value, torch.div says "
                            "other)"),
    "Tensor.mul": ("other", "the factor is named `other` (as torch.mul; the method's docstring says value)"),
    **dict.fromkeys(["Tensor.logical_and", "Tensor.logical_or"],
                    ("other", "none: PyTorch's docstring shows no parameter (its function takes `other`, "
                              "as here)")),
    "Tensor.expand": ("sizes", "`expand(*sizes)`: the same call, its argument named sizes"),
    "Tensor.to": ("device kwargs", "`to(device)` only: dtype conversion is not supported"),
    "ta.where": ("cond a b", "`where(cond, a, b)`: the contract's names; by position the same"),
    "ta.arange": ("start stop device", "`arange(start, stop, step)`: NumPy's name for the end, and "
                                       "arange(end) works as PyTorch's (its docstring's start=0 before a "
                                       "required end is no Python signature); " + _DEVICE),
    "ta.randint": ("low device", "randint(high, size) draws from [0, high) as PyTorch's (its docstring's "
                                 "low=0 before a required high is no Python signature); " + _DEVICE),
    **dict.fromkeys(["ta.zeros", "ta.ones", "ta.full", "ta.randn", "ta.rand"],
                    ("shape device", f"{_SIZE}; {_DEVICE}")),
    **dict.fromkeys(["ta.eye", "ta.linspace", "ta.tensor"], ("device", _DEVICE)),
}

# What a learner can call that is not an op of its own: a composition of registered ops (as
# PyTorch defines it), so its backward is theirs. tests/engine/test_op_surface.py checks each exists.
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
    """The registry as Markdown (op name, the class docstring's first line, formulas, case count), the
    ops a transformer uses first, then the others, the files of ``ops/``, what is built from the ops,
    what has no gradient, and what is out of scope."""
    lines = [
        "# Ops and their backward formulas",
        "",
        "Generated from the op registry by `tinygrad-attn ops`; each op's backward docstring in",
        "`tinygrad_attn/ops/` gives the derivation, and each case is gradient-checked in float64.",
        "",
        ONE_RULE,
        "",
        "## The ops a transformer uses",
        "",
        "A default or a Llama `TinyTransformer` runs these, forward and backward (fused or not, with dropout "
        "while training, attention as the flash kernel on long inputs):",
        "",
        *op_rows(sorted(TRANSFORMER_OPS)),
        "",
        "## The other ops",
        "",
        "The rest, with PyTorch's names and meanings: what a learner reaches for beyond the transformer.",
        "",
        *op_rows(sorted(set(REGISTRY) - set(TRANSFORMER_OPS))),
    ]
    lines += ["", *file_table()]
    lines += ["", "## Built from the ops above", "", "| methods | are |", "|---|---|"]
    lines += [f"| {' '.join(f'`{n}`' for n in names.split())} | {how} |" for names, how in COMPOSED.items()]
    lines += ["", "**Without a gradient** (bool or integer results, never in a graph): "
              + " ".join(f"`{n}`" for n in NO_GRADIENT.split()) + ".", "",
              "**Constructors** (`ta.*`, seeded by `ta.manual_seed`): "
              + " ".join(f"`{n}`" for n in CONSTRUCTORS.split()) + ".", "",
              f"**Out of scope:** {OUT_OF_SCOPE}.", "",
              "## Differences from PyTorch's signatures kept on purpose", "",
              "Every function here with a PyTorch name takes PyTorch's parameters in PyTorch's order, "
              "with PyTorch's defaults, and none of them is missing (a test compares them with "
              "PyTorch's), except:", "", "| function | parameters | why |", "|---|---|---|"]
    lines += [f"| `{name}` | {' '.join(f'`{p}`' for p in params.split())} | {why} |"
              for name, (params, why) in KEPT_DIFFERENCES.items()]
    return "\n".join(lines) + "\n"


def op_rows(names: list[str]) -> list[str]:
    """A Markdown table of the ops `names`: the class docstring's first line, formulas, case count."""
    lines = ["| op | computes | backward | cases |", "|---|---|---|---|"]
    for name in names:
        op = REGISTRY[name]
        summary = (op.__doc__ or "").strip().splitlines()[0].replace("|", "\\|")
        formulas = "<br>".join(f"`{f}`" if f else f"`{arg}`: no gradient"
                               for arg, f in op.formula.items()).replace("|", "\\|")
        lines.append(f"| `{name}` | {summary} | {formulas} | {len(op.cases)} |")
    return lines


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
