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

    root = Path(__file__).resolve().parents[2]
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
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ops.md").read_text()
    assert doc == table, "docs/ops.md is stale: run `tinygrad-attn ops > docs/ops.md`"


def _ops_run(fused: bool, dropout: float, length: int, **arch) -> set[str]:
    """The ops of one forward and backward of a tiny TinyTransformer (training mode) on `length` tokens."""
    import numpy as np

    import tinygrad_attn as ta
    from tinygrad_attn import engine
    from tinygrad_attn import functional as F

    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=length, d_ff=8,
                                  dropout=dropout, fused=fused, **arch)
    ids = np.arange(length).reshape(1, length) % 5
    loss = F.cross_entropy(model(ids), ids)
    loss.backward()
    return {t.op for t in engine.toposort(loss) if t.node}


def test_the_transformer_ops_listed_first_are_those_a_transformer_runs():
    """docs/ops.md's first table (TRANSFORMER_OPS) is what a default and a Llama TinyTransformer run:
    fused and unfused attention, with and without dropout, and the flash kernel on long inputs."""
    from tinygrad_attn.commands.ops import TRANSFORMER_OPS
    from tinygrad_attn.nn.attention_choice import FLASH_FROM

    llama = {"norm": "rms", "mlp": "swiglu", "positions": "rope", "n_kv_heads": 1}
    runs = [_ops_run(fused, dropout, 4, **arch) for arch in ({}, llama) for fused in (True, False)
            for dropout in (0.0, 0.1)]
    long = [_ops_run(True, 0.0, FLASH_FROM, **arch) for arch in ({}, llama)]
    assert all("flash_attention" in ops and "scaled_dot_product_attention" not in ops for ops in long)
    assert set().union(*runs, *long) == set(TRANSFORMER_OPS)
