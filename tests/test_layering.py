"""Dependencies run one way: tensor -> engine -> ops.base; argument parsing lives in the commands;
the stepper needs no nn; the modules that show or check a graph (viz, the stepper, anomaly mode,
labels) read only public attributes of tensors and nodes."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tinygrad_attn"


def runtime_imports(path: Path) -> set[str]:
    """The modules that `path` imports when it runs: package modules dotted and relative to the
    package, others by their own name (``argparse``);
    imports under ``if TYPE_CHECKING:`` are for type hints only and are left out."""
    tree = ast.parse(path.read_text())
    hints = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
             and getattr(block.test, "id", None) == "TYPE_CHECKING" for node in ast.walk(block)}
    here = path.relative_to(PACKAGE).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in hints:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            stem = list(here[:len(here) - node.level + 1]) + (node.module.split(".") if node.module else [])
            # `from .ops import shape` imports the module ops.shape; `from .tensor import Tensor`, tensor
            found |= {".".join(stem + [a.name]) for a in node.names if is_module(stem + [a.name])}
            found |= {".".join(stem)} if node.module else set()
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("tinygrad_attn.") for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module.removeprefix("tinygrad_attn."))
    return found


def is_module(parts: list[str]) -> bool:
    path = PACKAGE.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_the_import_reader_sees_relative_and_absolute_imports():
    assert runtime_imports(PACKAGE / "tensor.py") >= {"guards.anomaly", "engine", "ops.base", "ops.shape"}
    assert runtime_imports(PACKAGE / "viz/stepper.py") >= {"engine", "guards.labels", "tensor"}
    assert "tensor" not in runtime_imports(PACKAGE / "guards/labels.py")   # only under TYPE_CHECKING there


def test_engine_imports_only_the_layers_below_it():
    package_imports = {n for n in runtime_imports(PACKAGE / "engine.py") if is_module(n.split("."))}
    assert package_imports == {"guards", "guards.anomaly", "guards.inplace", "errors", "ops.base", "scopes"}


@pytest.mark.parametrize("module", ["engine", "guards/anomaly", "guards/labels", "guards/inplace", "backend",
                                    "ops/base"])
def test_modules_below_tensor_never_import_it(module):
    assert "tensor" not in runtime_imports(PACKAGE / f"{module}.py")


@pytest.mark.parametrize("module", ["guards/anomaly", "guards/labels", "guards/inplace", "backend",
                                    "ops/base", "scopes"])
def test_modules_below_engine_never_import_it(module):
    assert "engine" not in runtime_imports(PACKAGE / f"{module}.py")


def private_reads(path: Path) -> list[str]:
    """`obj._name` reads where obj is not self or cls (dunders and sys._getframe allowed)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        if owner not in ("self", "cls", "sys"):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


GRAPH_READERS = ["viz/graph", "viz/stepper", "viz/notes", "guards/anomaly", "guards/labels", "engine",
                 "guards/inplace"]


@pytest.mark.parametrize("module", GRAPH_READERS)
def test_graph_readers_use_only_public_attributes(module):
    assert private_reads(PACKAGE / f"{module}.py") == []


def test_the_private_read_finder_finds_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(t, ctx):\n    return t._node, ctx.saved, self_._x, sys._getframe\n")
    assert private_reads(sample) == ["sample.py:2 ._node", "sample.py:2 ._x"]


def test_only_the_commands_and_the_entry_point_parse_arguments():
    parsing = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if "argparse" in runtime_imports(p))
    assert parsing and all(p.startswith("commands/") for p in parsing), parsing


def test_the_stepper_imports_nothing_from_nn():
    for name in ("viz/stepper.py", "viz/notes.py"):
        imports = runtime_imports(PACKAGE / name)
        assert not any(n == "nn" or n.startswith("nn.") for n in imports), (name, imports)
