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
