"""Every function and Tensor method with a PyTorch name takes PyTorch's parameters in PyTorch's
order, except the differences kept on purpose (commands/ops.py KEPT_DIFFERENCES, listed with their
reasons in docs/ops.md). PyTorch's parameters come from inspect.signature, or, for its builtins
(which have none), from the first line of the docstring: "sum(dim=None, keepdim=False, dtype=None)"."""

import inspect
import re

import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.commands.ops import KEPT_DIFFERENCES

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# PyTorch's parameters that have no meaning here (in-place variants, deprecated reductions, memory
# layouts, out=, generators), and its markers of positional-only and keyword-only parameters.
NOT_HERE = {"self", "out", "*", "/", "inplace", "memory_format", "size_average", "reduce", "_stacklevel",
            "generator", "layout", "pin_memory", "names"}
CONSTRUCTORS = ("where", "concat", "cat", "stack", "arange", "linspace", "zeros", "ones", "full", "randn",
                "rand", "randint", "eye", "tensor")


def torch_parameters(fn, name):
    """PyTorch's parameter names of `fn`, in order, or None where neither source gives them."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        first = (fn.__doc__ or "").strip().splitlines()[:1]
        match = re.match(rf"{re.escape(name)}\((.*?)\)\s*(->|$)", first[0]) if first else None
        if match is None:
            return None
        names = (part.split("=")[0].split(":")[0].strip().lstrip("\\").lstrip("*") or "*"
                 for part in match.group(1).split(","))
        return [n for n in names if n]


def differences(ours, theirs):
    """What differs: a parameter we take by position at another place (or name) than PyTorch, or a
    keyword-only one PyTorch does not have."""
    kept = [n for n in theirs if n not in NOT_HERE]
    found = []
    for i, p in enumerate(p for p in inspect.signature(ours).parameters.values() if p.name != "self"):
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            if p.name not in theirs:
                found.append(f"keyword {p.name} is not PyTorch's")
        elif i >= len(kept) or kept[i] != p.name:
            found.append(f"argument {i} is {p.name}, PyTorch's is {kept[i] if i < len(kept) else 'absent'}")
    return found


def pairs():
    """(label, ours, PyTorch's, name) for every name both libraries have."""
    for name in F.__all__:
        theirs = getattr(TF, name, None) or getattr(torch, name, None)
        if theirs is not None:
            yield f"F.{name}", getattr(F, name), theirs, name
    for name in sorted(dir(ta.Tensor)):
        ours, theirs = getattr(ta.Tensor, name), getattr(torch.Tensor, name, None)
        if not name.startswith("_") and callable(ours) and theirs is not None:
            yield f"Tensor.{name}", ours, theirs, name
    for name in CONSTRUCTORS:
        if hasattr(ta, name) and hasattr(torch, name):
            yield f"ta.{name}", getattr(ta, name), getattr(torch, name), name


def found_differences():
    found = {}
    for label, ours, theirs, name in pairs():
        parameters = torch_parameters(theirs, name)
        if parameters is not None and differences(ours, parameters):
            found[label] = differences(ours, parameters)
    return found


def test_signatures_are_pytorchs_except_the_differences_kept_on_purpose():
    found = found_differences()
    unexplained = {k: v for k, v in found.items() if k not in KEPT_DIFFERENCES}
    assert not unexplained, f"differ from PyTorch without a reason in KEPT_DIFFERENCES: {unexplained}"
    gone = set(KEPT_DIFFERENCES) - set(found)
    assert not gone, f"KEPT_DIFFERENCES lists names that now match PyTorch: {sorted(gone)}"


def test_enough_names_are_compared_to_mean_something():
    compared = [label for label, ours, theirs, name in pairs() if torch_parameters(theirs, name) is not None]
    for label in ("Tensor.sum", "Tensor.max", "Tensor.var", "Tensor.split", "Tensor.topk", "Tensor.sort",
                  "F.nll_loss", "F.cross_entropy", "F.gelu", "F.pad", "ta.stack"):
        assert label in compared, label
    assert len(compared) > 100


def test_the_comparison_catches_a_wrong_order():
    def sort(self, descending=False, dim=-1):           # PyTorch's two arguments swapped
        return self
    assert differences(sort, ["self", "dim", "descending", "stable"]) == [
        "argument 0 is descending, PyTorch's is dim", "argument 1 is dim, PyTorch's is descending"]
