"""``tinygrad-attn dtypes``: the dtype each op returns for each input dtype, as a Markdown table.

``docs/dtypes.md`` is this table (a test keeps it current): regenerate it with
``tinygrad-attn dtypes > docs/dtypes.md``. Every registered op has a row, so a new op shows up
without a line here: each cell is measured by calling the op's Tensor method or ``F`` function (the
op's name) on its first gradcheck case's inputs, the first of dtype `d` holding 1…n (bool:
alternating True/False), the other tensor inputs of the same dtype, constant inputs (masks,
targets) and parameters as the case gives them. ``CALLS`` gives the call where that does not fit
(arguments named otherwise, an operator rather than a method); ``WITHOUT_GRADIENT`` the results
that are no registered op (comparisons, indices).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from .. import functional as F
from ..ops import REGISTRY
from ..ops.base import Case, Op
from ..tensor import Tensor, concat, stack, where

__all__ = ["CALLS", "INPUT_DTYPES", "WITHOUT_GRADIENT", "add_parser", "dtype_table", "op_rows", "run"]


INPUT_DTYPES = ("bool", "int64", "float16", "float32", "float64")

_T = np.array([0, 2])                            # class ids for the (2, 3) input's rows


def _probs(x: Tensor) -> Tensor:
    return Tensor(np.full(x.shape, 0.5), dtype=x.dtype)


def _attention(fn: Callable) -> Callable[[Tensor], Tensor]:
    return lambda x: fn(x, x, x, is_causal=True)


# op name → {row label: the call on x of shape (2, 3)}, for the ops the generic call does not fit
CALLS: dict[str, dict[str, Callable[[Tensor], Tensor]]] = {
    "pow": {"x ** 2": lambda x: x ** 2, "x ** 0.5": lambda x: x ** 0.5},
    "elu": {"F.elu/selu/celu": lambda x: F.elu(x)},
    "softmax": {"F.softmax": lambda x: F.softmax(x)},
    "log_softmax": {"F.log_softmax": lambda x: F.log_softmax(x)},
    "scaled_dot_product_attention": {"F.scaled_dot_product_attention":
                                     _attention(F.scaled_dot_product_attention)},
    "flash_attention": {"F.flash_attention": _attention(F.flash_attention)},
    "cross_entropy": {"F.cross_entropy": lambda x: F.cross_entropy(x, _T)},
    "cross_entropy_probs": {"F.cross_entropy (class probabilities)": lambda x: F.cross_entropy(x, _probs(x))},
    "nll_loss": {"F.nll_loss": lambda x: F.nll_loss(x, _T)},
    "matmul": {"x @ y": lambda x: x @ x.reshape(3, 2)},
    "linear": {"F.linear": lambda x: F.linear(x, x.reshape(3, 2))},
    "repeat": {"repeat": lambda x: x.repeat(2, 1)},
    "pad": {"F.pad": lambda x: F.pad(x, (1, 1))},
    "pad_copy": {"F.pad(mode='reflect')": lambda x: F.pad(x, (1, 1), "reflect")},
    "div_rounded": {"div(rounding_mode='floor')": lambda x: x.div(x, rounding_mode="floor")},
    "tril": {"tril": lambda x: x.tril()},
    "triu": {"triu": lambda x: x.triu()},
    "getitem": {"x[i]": lambda x: x[0]},
    "gather": {"gather": lambda x: x.gather(1, Tensor(np.array([[0], [2]])))},
    "scatter_add": {"scatter_add": lambda x: x.scatter_add(1, Tensor(np.array([[0], [2]])), x[:, :1])},
    "where": {"where": lambda x: where(x > 2, x, x)},
    "dropout": {"F.dropout": lambda x: F.dropout(x, 0.5)},
    "reshape": {"reshape": lambda x: x.reshape(3, 2)},
    "transpose": {"transpose": lambda x: x.transpose(0, 1)},
    "expand": {"expand": lambda x: x[:1].expand(2, 3)},
    "split": {"split": lambda x: x.split(1, axis=1)[0]},
    "concat": {"concat": lambda x: concat([x, x])},
    "stack": {"stack": lambda x: stack([x, x])},
    "cast": {"x + a 0-d float64 (promotion)": lambda x: x + Tensor(np.float64(1.0))},
}

# results that are no registered op (no gradient), row label → the call
WITHOUT_GRADIENT: dict[str, Callable[[Tensor], Tensor]] = {
    "== != < <= > >=, isnan, isinf, isfinite, logical_*, ~ & | (bool)": lambda x: x > x,
    "sum(dtype=float64)": lambda x: x.sum(dtype=np.float64),
    "argmax, argmin": lambda x: x.argmax(),
    "any, all": lambda x: x.any(),
    "sort, topk (values)": lambda x: x.sort()[0],
    "sort, topk (indices)": lambda x: x.sort()[1],
    "one_hot": lambda x: x.one_hot(),
}


def _case_input(spec: object, dtype: str) -> Tensor | None:
    if spec is None:
        return None
    if isinstance(spec, tuple):
        return _input(dtype, spec)
    return Tensor(np.asarray(spec))


def _generic_call(op: type[Op]) -> tuple[str, Callable[[Tensor], Tensor]]:
    """(label, call) for `op`: its Tensor method, else its F function, on its first case's inputs."""
    method = getattr(Tensor, op.name, None)
    fn, label = (method, op.name) if method is not None else (getattr(F, op.name, None), f"F.{op.name}")
    if fn is None:
        raise LookupError(f"op {op.name!r} has no Tensor method or F function of its name: "
                          f"give its call in CALLS (commands/dtypes.py)")
    case: Case = op.cases[0]

    def call(x: Tensor) -> Tensor:                          # x: only its dtype is used
        return fn(*[_case_input(spec, np.dtype(x.dtype).name) for spec in case.specs], **case.params)
    return label, call


def op_rows() -> list[tuple[str, list[str]]]:
    """(label, one cell per input dtype) for every registered op, file by file of ops/ (whatever
    order they were imported in); neighbours from one file with the same cells share a row."""
    rows: list[tuple[str, str, list[str]]] = []             # (module, label, cells)
    by_file = sorted(REGISTRY.items(), key=lambda item: item[1].__module__)   # then in the file's order
    for name, op in by_file:
        calls = CALLS.get(name) or dict([_generic_call(op)])
        for label, call in calls.items():
            cells = [_cell(call, d) for d in INPUT_DTYPES]
            if rows and rows[-1][0] == op.__module__ and rows[-1][2] == cells:
                rows[-1] = (op.__module__, f"{rows[-1][1]}, {label}", cells)
            else:
                rows.append((op.__module__, label, cells))
    return [(label, cells) for _, label, cells in rows]


def _input(dtype: str, shape: tuple[int, ...] = (2, 3)) -> Tensor:
    values = np.arange(1, int(np.prod(shape)) + 1).reshape(shape)
    return Tensor(values % 2 == 1 if dtype == "bool" else values.astype(dtype))


def _cell(fn: Callable[[Tensor], Tensor], dtype: str) -> str:
    try:
        return str(fn(_input(dtype)).dtype)
    except (TypeError, ValueError) as e:
        return f"{type(e).__name__}"


def dtype_table() -> str:
    """The table: one row per op (or ops that share a rule), one column per input dtype."""
    lines = [
        "# The dtype each op returns",
        "",
        "Generated by `tinygrad-attn dtypes` from running every registered op on small tensors of each",
        "dtype (neighbouring ops of one file that give the same dtypes share a row), then the results",
        "without a gradient. As in PyTorch: an op that must return a float returns the default float",
        "dtype (float32) for integer or bool input; a float dtype is kept, float16 included (its sums,",
        "means, softmax and norm statistics accumulate in float32); comparisons give bool and indices",
        "int64. An error cell names the exception raised.",
        "",
        "| op | " + " | ".join(INPUT_DTYPES) + " |",
        "|---|" + "---|" * len(INPUT_DTYPES),
    ]
    rows = op_rows() + [(label, [_cell(call, d) for d in INPUT_DTYPES])
                        for label, call in WITHOUT_GRADIENT.items()]
    for label, cells in rows:
        escaped = label.replace("|", "\\|")           # a | inside a cell would end it
        lines.append(f"| {escaped} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    print(dtype_table(), end="")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dtypes", help="list the dtype every op returns per input dtype",
                                   description=__doc__)
    parser.set_defaults(run=run)
