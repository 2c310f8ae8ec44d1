"""Dependencies run one way: argument parsing lives in the commands, the stepper needs no nn."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tinygrad_attn"


def imported_modules(path: Path) -> set[str]:
    """The first part of every dotted name a file imports, counted from the package for a
    relative import (``from .nn.module import Parameter`` and ``from . import nn`` give "nn")."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(f"{node.module}.{alias.name}" if node.module else alias.name for alias in node.names)
    return {n.removeprefix("tinygrad_attn.").split(".")[0] for n in names}


def test_only_the_commands_and_the_entry_point_parse_arguments():
    parsing = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if "argparse" in imported_modules(p))
    assert parsing and all(p == "cli.py" or p.startswith("commands/") for p in parsing), parsing


def test_the_stepper_imports_nothing_from_nn():
    for name in ("stepper.py", "stepper_notes.py"):
        imports = imported_modules(PACKAGE / name)
        assert "nn" not in imports, (name, imports)
