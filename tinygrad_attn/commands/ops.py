"""``tinygrad-attn ops``: every registered op with its backward formula, as a Markdown table.

``docs/ops.md`` is this table (a test keeps it current): regenerate it with
``tinygrad-attn ops > docs/ops.md``.
"""

from __future__ import annotations

import argparse

from ..ops import REGISTRY


def formula_table() -> str:
    """The registry as Markdown: op name, the class docstring's first line, formulas, case count."""
    lines = [
        "# Ops and their backward formulas",
        "",
        "Generated from the op registry by `tinygrad-attn ops`; each op's backward docstring in",
        "`tinygrad_attn/ops/` gives the derivation, and each case is gradient-checked in float64.",
        "",
        "| op | computes | backward | cases |",
        "|---|---|---|---|",
    ]
    for name, op in sorted(REGISTRY.items()):
        summary = (op.__doc__ or "").strip().splitlines()[0].replace("|", "\\|")
        formulas = "<br>".join(f"`{f}`" if f else f"`{arg}`: no gradient"
                               for arg, f in op.formula.items()).replace("|", "\\|")
        lines.append(f"| `{name}` | {summary} | {formulas} | {len(op.cases)} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    print(formula_table(), end="")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ops", help="list every op with its backward formula",
                                   description=__doc__)
    parser.set_defaults(run=run)
