"""Every function and Tensor method with a PyTorch name takes PyTorch's parameters in PyTorch's
order, with PyTorch's defaults, and none of PyTorch's is missing, except the differences kept on
purpose (commands/ops.py KEPT_DIFFERENCES, listed with their parameters and reasons in
docs/ops.md). PyTorch's parameters come from inspect.signature, or, for its builtins (which have
none), from the first line of the docstring: "sum(dim=None, keepdim=False, dtype=None)"."""

import ast
import inspect
import re
from typing import Any, NamedTuple

import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.commands.ops import KEPT_DIFFERENCES

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# PyTorch's parameters that have no meaning here (in-place variants, deprecated reductions, memory
# layouts, out=, generators, autograd and placement flags of its constructors), and its markers of
# positional-only and keyword-only parameters.
NOT_HERE = {"self", "out", "*", "/", "inplace", "memory_format", "size_average", "reduce", "_stacklevel",
            "generator", "layout", "pin_memory", "names"}
CONSTRUCTORS = ("where", "concat", "cat", "stack", "arange", "linspace", "zeros", "ones", "full", "randn",
                "rand", "randint", "eye", "tensor")
EMPTY = inspect.Parameter.empty
UNKNOWN = object()          # a default that is no Python literal (torch.preserve_format): not compared


class Parameter(NamedTuple):
    name: str
    default: Any            # EMPTY where there is none


def torch_parameters(fn, name) -> list[Parameter] | None:
    """PyTorch's parameters of `fn`, in order, or None where neither source gives them."""
    try:
        return [Parameter(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        match = re.match(rf"{re.escape(name)}\((.*?)\)\s*(->|$)", (fn.__doc__ or "").strip(), re.S | re.M)
        return None if match is None else docstring_parameters(match.group(1))


def docstring_parameters(text: str) -> list[Parameter]:
    """The parameters of a docstring's signature line ("dim=None, *, keepdim=False"), each default
    read as a Python literal (UNKNOWN where it is none: torch.strided)."""
    found = []
    for part in re.split(r",(?![^(\[]*[)\]])", " ".join(text.replace("\\", "").split())):
        name, _, default = (s.strip() for s in part.partition("="))
        name = name.split(":")[0].strip().lstrip("*")
        if name and name != "/":
            found.append(Parameter(name, _literal(default) if default else EMPTY))
    return found


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return UNKNOWN


def _same_default(a, b) -> bool:
    return b is UNKNOWN or (a == b and (type(a) is bool) == (type(b) is bool))


def differences(ours, theirs: list[Parameter]) -> dict[str, str]:
    """What differs, keyed by the parameter (ours, or PyTorch's where we lack it): one we take by
    position at another place than PyTorch (or under another name), a keyword-only one PyTorch
    does not have, one of PyTorch's we do not take, a default other than PyTorch's, or none where
    PyTorch has one."""
    kept = [t for t in theirs if t.name not in NOT_HERE]
    by_name = {t.name: t for t in kept}
    mine = [p for p in inspect.signature(ours).parameters.values() if p.name != "self"]
    my_names = {p.name for p in mine}
    found, counterpart = {}, {}
    for i, p in enumerate(mine):
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            if p.name not in by_name:
                found[p.name] = f"keyword {p.name} is not PyTorch's"
            counterpart[p.name] = by_name.get(p.name)
            continue
        at = kept[i] if i < len(kept) else None
        if at is not None and at.name not in my_names and p.name not in by_name:
            found[p.name] = f"argument {i} is {p.name}, PyTorch's {at.name}"      # renamed
            counterpart[p.name] = at
        elif at is None or at.name != p.name:
            found[p.name] = f"argument {i} is {p.name}, PyTorch's is {at.name if at else 'absent'}"
            counterpart[p.name] = by_name.get(p.name)
        else:
            counterpart[p.name] = at
    named = {t.name for t in counterpart.values() if t is not None}
    for t in kept:
        if t.name not in named:
            found[t.name] = f"PyTorch's {t.name} is missing"
    for p in mine:
        t = counterpart.get(p.name)
        if t is None or t.default is EMPTY or p.name in found:
            continue
        if p.default is EMPTY:
            found[p.name] = f"{p.name} has no default, PyTorch's is {t.default!r}"
        elif not _same_default(p.default, t.default):
            found[p.name] = f"{p.name} defaults to {p.default!r}, PyTorch's to {t.default!r}"
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


def found_differences() -> dict[str, dict[str, str]]:
    found = {}
    for label, ours, theirs, name in pairs():
        parameters = torch_parameters(theirs, name)
        if parameters is not None and differences(ours, parameters):
            found[label] = differences(ours, parameters)
    return found


def test_signatures_are_pytorchs_except_the_differences_kept_on_purpose():
    found = found_differences()
    unexplained = {label: diff for label, diff in found.items()
                   if set(diff) != set(KEPT_DIFFERENCES.get(label, ("",))[0].split())}
    assert not unexplained, ("differ from PyTorch in parameters KEPT_DIFFERENCES does not name (or names "
                             f"others): {unexplained}")
    gone = set(KEPT_DIFFERENCES) - set(found)
    assert not gone, f"KEPT_DIFFERENCES lists names that now match PyTorch: {sorted(gone)}"


def test_enough_names_are_compared_to_mean_something():
    compared = [label for label, ours, theirs, name in pairs() if torch_parameters(theirs, name) is not None]
    for label in ("Tensor.sum", "Tensor.max", "Tensor.var", "Tensor.split", "Tensor.topk", "Tensor.sort",
                  "F.nll_loss", "F.cross_entropy", "F.gelu", "F.pad", "ta.stack", "Tensor.cumsum"):
        assert label in compared, label
    assert len(compared) > 100


def test_the_comparison_catches_a_wrong_order():
    def sort(self, descending=False, dim=-1):           # PyTorch's two arguments swapped
        return self
    assert differences(sort, docstring_parameters("dim=-1, descending=False, *, stable=False")) == {
        "descending": "argument 0 is descending, PyTorch's is dim",
        "dim": "argument 1 is dim, PyTorch's is descending",
        "stable": "PyTorch's stable is missing"}


def test_the_comparison_catches_a_default_and_a_missing_trailing_parameter():
    def cross_entropy(input, target, weight=None, ignore_index=None):     # noqa: A002
        return input
    theirs = torch_parameters(TF.cross_entropy, "cross_entropy")
    assert differences(cross_entropy, theirs) == {
        "ignore_index": "ignore_index defaults to None, PyTorch's to -100",
        "reduction": "PyTorch's reduction is missing",
        "label_smoothing": "PyTorch's label_smoothing is missing"}

    def dropout(x, p, training=False):
        return x
    assert differences(dropout, torch_parameters(TF.dropout, "dropout")) == {
        "x": "argument 0 is x, PyTorch's input", "p": "p has no default, PyTorch's is 0.5",
        "training": "training defaults to False, PyTorch's to True"}


def test_docstring_signatures_are_read_with_their_defaults():
    assert docstring_parameters(r"dim=None, keepdim=False, \*, dtype=torch.float32") == [
        Parameter("dim", None), Parameter("keepdim", False), Parameter("dtype", UNKNOWN)]
    assert docstring_parameters("input, approximate = 'none'") == [
        Parameter("input", EMPTY), Parameter("approximate", "none")]
    assert docstring_parameters("shifts, dims") == [Parameter("shifts", EMPTY), Parameter("dims", EMPTY)]
