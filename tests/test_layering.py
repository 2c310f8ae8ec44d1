"""The package's layers, lowest first, and the rules its imports keep.

Rules, checked over every module of the package (imports under ``if TYPE_CHECKING:`` are type
hints only and are left out; an import inside a function counts):

1. every module belongs to exactly one layer of ``LAYERS`` (a new top-level module or folder must
   be placed);
2. a module imports only from its own layer or the layers below it;
3. no runtime import cycle, between layers or inside one (a module that reads a name from its own
   package, ``from . import x``, depends on that package's ``__init__``; an ``__init__`` that
   calls ``pkgutil.iter_modules(__path__)`` imports every module beside it: so an op module takes
   ``register`` from ``ops.registry``, not from ``ops``);
4. argument parsing lives in the commands, the stepper needs no nn, and the modules that show or
   check a graph read only public attributes of tensors and nodes.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tinygrad_attn"
ROOT = "tinygrad_attn"          # the package's own __init__, as a module name

# Lowest first. A module's layer is that of its first dotted part: ops.softmax is in "ops".
LAYERS = (
    ("errors", "files", "labels", "thread_switch", "float_errors", "startup_interrupt"),
                                    # exceptions, atomic files, names, switches, NumPy's float errors,
                                    # threads over the batch, Ctrl-C while `python -m` loads the package
    ("text",),                  # tokenizers: text to ids and back (no tensors)
    ("backend",),
    ("guards",),                # in-place detection, anomaly mode, axis/shape checks
    ("kernels",),               # fast paths: threads over the batch (and how many), BLAS reductions
    ("ops",),                   # the op contract and every op (raw arrays only)
    ("scopes", "engine"),       # nodes, toposort, the backward pass
    ("dtypes", "apply"),        # the default float dtype; apply, every op's entry point
    ("tensor_methods",),        # the Tensor methods that forward to ops
    ("tensor",),
    ("creation", "functional"),
    ("gradcheck", "nn", "optim"),
    ("viz", "training"),        # seeing backprop; training on the toy tasks
    ("pretrained",),            # Hugging Face folders and our runs, loaded and saved
    ("commands",),
    (ROOT, "__main__"),         # the front door: ``import tinygrad_attn``, ``python -m``
)
LAYER_OF = {part: i for i, layer in enumerate(LAYERS) for part in layer}


def module_names(package: Path) -> list[str]:
    """Every module of `package`, dotted and relative to it; a folder is named by its __init__
    (``ops``), the package itself by ROOT."""
    names = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        names.append(".".join(parts) or ROOT)
    return names


def module_path(package: Path, name: str) -> Path:
    parts = [] if name == ROOT else name.split(".")
    path = package.joinpath(*parts)
    return path / "__init__.py" if (path / "__init__.py").exists() else path.with_suffix(".py")


def is_module(package: Path, parts: list[str]) -> bool:
    path = package.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _type_hint_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    blocks = [b for b in ast.walk(tree) if isinstance(b, ast.If)
              and (getattr(b.test, "id", None) == "TYPE_CHECKING"
                   or getattr(b.test, "attr", None) == "TYPE_CHECKING")]
    return {id(node) for block in blocks for stmt in block.body for node in ast.walk(stmt)}


def runtime_imports(package: Path, name: str) -> set[str]:
    """What module `name` of `package` imports when it runs: package modules by their module name
    (see module_names), others by their own (``argparse``)."""
    path = module_path(package, name)
    tree = ast.parse(path.read_text())
    hints = _type_hint_only(tree)
    here = list(path.relative_to(package).parts[:-1])          # the package `name` lives in
    found = set()
    for node in ast.walk(tree):
        if id(node) in hints:
            continue
        if isinstance(node, ast.Import):
            found |= {_ours(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module == ROOT or node.module.startswith(ROOT + "."):
                base = node.module.split(".")[1:]
            else:
                found.add(node.module)
                continue
            # `from .ops import shape` imports ops and the module ops.shape; `from . import register`
            # reads a name from this package's __init__; `from .tensor import Tensor` imports tensor.
            modules = {a.name for a in node.names if is_module(package, base + [a.name])}
            found |= {".".join(base + [m]) for m in modules}
            if node.module or len(modules) < len(node.names):
                found.add(".".join(base) or ROOT)
        elif _imports_its_whole_package(node):
            found |= {m for m in module_names(package) if m.rsplit(".", 1)[0] == ".".join(here) and m != name}
    return found


def _imports_its_whole_package(node: ast.AST) -> bool:
    """``pkgutil.iter_modules(__path__)``: a package __init__ that imports every module beside it
    (ops/__init__.py), an import of each of them that no import statement shows."""
    return isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "iter_modules" \
        and any(getattr(a, "id", None) == "__path__" for a in node.args)


def _ours(dotted: str) -> str:
    return dotted.removeprefix(ROOT + ".") if dotted.startswith(ROOT + ".") else dotted


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports at run time."""
    names = module_names(package)
    return {n: {m for m in runtime_imports(package, n) if m in names and m != n} for n in names}


def layer(name: str) -> int | None:
    return LAYER_OF.get(name.split(".")[0])


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} ({LAYERS[layer(a)][0]} layer) imports {b} ({LAYERS[layer(b)][0]} layer)"
                  for a, targets in graph.items() for b in targets
                  if None not in (layer(a), layer(b)) and layer(b) > layer(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


GRAPH = import_graph(PACKAGE)


def test_every_module_belongs_to_a_layer():
    unplaced = [n for n in GRAPH if layer(n) is None]
    assert unplaced == [], f"place these in LAYERS (tests/test_layering.py): {unplaced}"


def test_no_module_imports_from_a_higher_layer():
    assert upward_imports(GRAPH) == []


def test_no_runtime_import_cycle():
    assert cycles(GRAPH) == []


def test_the_checks_find_an_upward_import_and_a_cycle(tmp_path):
    """A package in which ops imports tensor (upward) and a module reads a name from its own
    package, whose __init__ imports it back (the cycle the op registry once had)."""
    (tmp_path / "ops").mkdir()
    (tmp_path / "__init__.py").write_text("from . import tensor\n")
    (tmp_path / "tensor.py").write_text("from .ops import base\n")
    (tmp_path / "ops" / "__init__.py").write_text(
        "import pkgutil\nREGISTRY = {}\nfor m in pkgutil.iter_modules(__path__):\n    __import__(m.name)\n")
    (tmp_path / "ops" / "base.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import REGISTRY\n"
        "if TYPE_CHECKING:\n    from ..nn import x\n"
        "def lazy():\n    from ..tensor import Tensor\n")
    graph = import_graph(tmp_path)
    assert graph == {ROOT: {"tensor"}, "ops": {"ops.base"}, "ops.base": {"ops", "tensor"},
                     "tensor": {"ops", "ops.base"}}
    assert upward_imports(graph) == ["ops.base (ops layer) imports tensor (tensor layer)"]
    assert cycles(graph) == [["ops", "ops.base", "tensor"]]


def test_the_import_reader_sees_relative_and_absolute_imports():
    assert runtime_imports(PACKAGE, "tensor") >= {"apply", "engine", "ops.shape", "tensor_methods"}
    assert runtime_imports(PACKAGE, "apply") >= {"guards.anomaly", "engine", "ops.base"}
    assert runtime_imports(PACKAGE, "viz.stepper") >= {"engine", "labels", "tensor"}
    assert "tensor" not in runtime_imports(PACKAGE, "labels")   # only under TYPE_CHECKING there
    assert GRAPH[ROOT] >= {"functional", "nn", "viz", "tensor"}
    assert GRAPH["ops"] >= {"ops.softmax", "ops.flash", "ops.registry"}      # pkgutil.iter_modules


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


GRAPH_READERS = ["viz/collected", "viz/stepper", "viz/notes", "guards/anomaly", "labels", "engine",
                 "guards/inplace"]


@pytest.mark.parametrize("module", GRAPH_READERS)
def test_graph_readers_use_only_public_attributes(module):
    assert private_reads(PACKAGE / f"{module}.py") == []


def test_the_private_read_finder_finds_one(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(t, ctx):\n    return t._node, ctx.saved, self_._x, sys._getframe\n")
    assert private_reads(sample) == ["sample.py:2 ._node", "sample.py:2 ._x"]


def test_only_the_commands_parse_arguments():
    parsing = sorted(n for n in GRAPH if "argparse" in runtime_imports(PACKAGE, n))
    assert parsing and all(n.startswith("commands.") for n in parsing), parsing


def test_the_stepper_imports_nothing_from_nn():
    for name in ("viz.stepper", "viz.notes"):
        assert not any(n == "nn" or n.startswith("nn.") for n in GRAPH[name]), (name, GRAPH[name])
