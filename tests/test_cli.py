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


def test_ops_doc_is_the_current_registry_table():
    from pathlib import Path

    from tinygrad_attn.commands.ops import formula_table
    from tinygrad_attn.ops import REGISTRY

    table = formula_table()
    assert all(f"| `{name}` |" in table for name in REGISTRY)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    assert doc == table, "docs/ops.md is stale: run `tinygrad-attn ops > docs/ops.md`"
