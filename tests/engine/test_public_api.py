"""Every module says what it offers: ``__all__`` lists the functions and classes it defines (and no
module it merely imports), so ``help()`` shows the API alone; ``dir(F)`` too."""

import ast
import importlib
import pydoc
import types
from pathlib import Path

import pytest

from tinygrad_attn import functional as F

PACKAGE = Path(__file__).resolve().parents[2] / "tinygrad_attn"
NAMELESS = {"__main__.py", "guards/__init__.py", "commands/__init__.py"}     # nothing to export
MODULES = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if str(p.relative_to(PACKAGE)) not in NAMELESS)


def module_name(path: str) -> str:
    return "tinygrad_attn." + path.removesuffix(".py").removesuffix("/__init__").replace("/", ".") \
        if path != "__init__.py" else "tinygrad_attn"


def defined_here(path: str) -> set[str]:
    """The public functions and classes that the module's own source defines."""
    tree = ast.parse((PACKAGE / path).read_text())
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            and not node.name.startswith("_")}


@pytest.mark.parametrize("path", MODULES)
def test_all_lists_what_the_module_defines(path):
    module = importlib.import_module(module_name(path))
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{path} has no __all__"
    assert len(set(exported)) == len(exported)
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == [], f"{path}: __all__ names what it lacks: {missing}"
    modules = [name for name in exported if isinstance(getattr(module, name), types.ModuleType)
               and not getattr(module, name).__name__.startswith("tinygrad_attn.")]
    assert modules == [], f"{path}: __all__ lists imported modules: {modules}"
    unlisted = defined_here(path) - set(exported)
    assert unlisted == set(), f"{path}: add to __all__: {unlisted}"


def test_dir_and_help_of_f_show_the_functional_api_alone():
    assert dir(F) == sorted(F.__all__)
    assert {"softmax", "scaled_dot_product_attention", "flash_attention", "cross_entropy"} <= set(dir(F))
    text = pydoc.render_doc(F, renderer=pydoc.plaintext)
    assert "scaled_dot_product_attention(" in text
    for helper in ("xp_for", "apply(", "annotations", "generator_for", "_mask_inputs"):
        assert helper not in text, helper
