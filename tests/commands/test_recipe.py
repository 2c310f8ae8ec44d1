"""CONTRIBUTING.md's recipe for a new op, followed literally in a copy of the repository: its blocks
go where they say (``file=`` a new file, ``imports=`` beside the other op imports, ``append=`` at
the end), the name joins ``__all__``, its shell block regenerates the docs, and then the contract,
gradcheck, docs, public-API and layering tests pass in the copy (a child process with the copy
first on sys.path)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "CONTRIBUTING.md"
SKIP = shutil.ignore_patterns(".git", "__pycache__", "runs", "*.png", "notebooks", ".ci")


def recipe_section() -> str:
    text = RECIPE.read_text()
    return text[text.index("## Add an op"):text.index("## Tests")]


def placed_blocks(section: str) -> list[tuple[str, str, str]]:
    """(how, path, code) for each ```python how=path block of the recipe."""
    return re.findall(r"```python (file|imports|append)=(\S+)\n(.*?)```", section, re.S)


def follow(copy: Path, section: str) -> str:
    """Apply the recipe's blocks to `copy`; the new function's name (added to the __all__ of the file
    it is appended to)."""
    name = appended = None
    for how, path, code in placed_blocks(section):
        target = copy / path
        if how == "file":
            assert not target.exists(), f"the recipe's new file {path} already exists"
            target.write_text(code)
        elif how == "imports":
            text = target.read_text()
            last = list(re.finditer(r"^from \.ops import .*\n", text, re.M))[-1]
            target.write_text(text[:last.end()] + code + text[last.end():])
        else:
            target.write_text(target.read_text().rstrip("\n") + "\n\n\n" + code)
            appended = target
            name = re.match(r"def (\w+)\(", code).group(1)
    assert name is not None, "the recipe appends no function"
    text = appended.read_text()
    listed = re.search(r"^__all__ = \[(.*?)\]", text, re.M | re.S)
    names = sorted([*re.findall(r'"(\w+)"', listed.group(1)), name])
    joined = ", ".join(f'"{n}"' for n in names)
    appended.write_text(text[:listed.start()] + f"__all__ = [{joined}]" + text[listed.end():])
    return name


def run(copy: Path, *command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_recipe_for_a_new_op_gives_an_op_that_passes_every_check(tmp_path):
    section = recipe_section()
    assert [how for how, _, _ in placed_blocks(section)] == ["file", "imports", "append"]
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=SKIP)
    name = follow(copy, section)
    assert name == "cube"

    shell = re.search(r"```\n(python -m tinygrad_attn ops .*?)```", section, re.S).group(1)
    for line in shell.strip().splitlines():
        command = line.split("#")[0].strip()
        done = run(copy, "sh", "-c", command.replace("python", sys.executable, 1))
        assert done.returncode == 0, done.stderr
    ops_page, dtypes_page = ((copy / "docs" / page).read_text() for page in ("ops.md", "dtypes.md"))
    assert "| `ops/cube.py` |" in ops_page and "| `cube` | y = x³. | `dx = 3x² ⊙ dy` | 2 |" in ops_page
    assert "| F.cube | float32 | float32 | float16 | float32 | float64 |" in dtypes_page

    probe = run(copy, sys.executable, "-c",
                "import tinygrad_attn as ta; from tinygrad_attn import functional as F; "
                "print(ta.ops.REGISTRY['cube'].__module__, F.cube(ta.Tensor([2.0])).numpy().tolist(), "
                "F.__file__)")
    assert probe.stdout.split() == ["tinygrad_attn.ops.cube", "[8.0]",
                                    str(copy / "tinygrad_attn" / "functional.py")], probe.stderr

    pytest_args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    ops_checks = run(copy, *pytest_args, "tests/ops/test_op_contract.py", "tests/ops/test_ops_gradcheck.py",
                     "-k", "cube")
    assert ops_checks.returncode == 0, ops_checks.stdout[-3000:]
    assert re.search(r"(\d+) passed", ops_checks.stdout).group(1) != "0"
    rest = run(copy, *pytest_args, "tests/docs/test_docs.py", "tests/engine/test_public_api.py",
               "tests/engine/test_layering.py",
               "tests/commands/test_cli.py::test_ops_doc_is_the_current_registry_table",
               "tests/engine/test_op_surface.py::test_dtype_table_is_current",
               "tests/engine/test_op_surface.py::test_dtype_table_has_every_registered_op_and_each_runs_on_floats",
               "tests/engine/test_functional.py::test_public_functions_are_documented",
               "tinygrad_attn/functional_extras.py")
    assert rest.returncode == 0, rest.stdout[-3000:]
    assert "cube" in run(copy, *pytest_args, "--collect-only", "tests/engine/test_functional.py",
                         "tinygrad_attn/functional_extras.py").stdout
