"""The command line starts and explains itself."""

import subprocess
import sys


def test_module_prints_help_without_a_command():
    out = subprocess.run([sys.executable, "-m", "tinygrad_attn"], capture_output=True, text=True,
                         check=True).stdout
    assert "usage: tinygrad-attn" in out


def test_help_flag():
    out = subprocess.run([sys.executable, "-m", "tinygrad_attn", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "usage: tinygrad-attn" in out and "COMMAND" in out


def test_the_installed_script_is_the_command_line_itself():
    """pyproject.toml's [project.scripts] names commands.cli.main, which the script's wrapper calls
    as pip writes it (import the module, exit with main()); nothing runs before it."""
    from pathlib import Path

    import pytest

    tomllib = pytest.importorskip("tomllib")            # Python 3.11+

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"tinygrad-attn": "tinygrad_attn.commands.cli:main"}
    module, function = scripts["tinygrad-attn"].split(":")
    wrapper = f"import sys; from {module} import {function}; sys.exit({function}())"
    out = subprocess.run([sys.executable, "-c", wrapper, "--help"], capture_output=True, text=True,
                         check=True, cwd=root).stdout
    assert out.startswith("usage: tinygrad-attn")


def test_ops_doc_is_the_current_registry_table():
    from pathlib import Path

    from tinygrad_attn.commands.ops import formula_table
    from tinygrad_attn.ops import REGISTRY

    table = formula_table()
    assert all(f"| `{name}` |" in table for name in REGISTRY)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    assert doc == table, "docs/ops.md is stale: run `tinygrad-attn ops > docs/ops.md`"
