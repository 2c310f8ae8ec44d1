"""The step and graph commands: --all lists every op, the interactive stepper answers single
keys (Enter, →, b, ←, q: no Enter needed) through a pseudo-terminal and stops when its input
closes, and graph writes a real SVG."""

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import tinygrad_attn as ta
from tinygrad_attn.commands import cli
from tinygrad_attn.commands.keys import BACK, HELP, NEXT, QUIT, meaning, read_escape
from tinygrad_attn.viz.example_graphs import EXAMPLES

PROMPT = "[q] quit >"
ROOT = Path(__file__).resolve().parents[2]


def test_graph_command_writes_an_svg_and_reports_counts(tmp_path, capsys):
    out = tmp_path / "b.svg"
    assert cli.main(["graph", "--example", "block", "--out", str(out)]) == 0
    svg = out.read_text()
    assert "<svg" in svg and "layer_norm" in svg and "attn.q_proj.weight" in svg
    assert re.search(r"wrote .*b\.svg: \d+ nodes \(\d+ ops\)", capsys.readouterr().out)
    assert cli.main(["graph", "--example", "model", "--collapse", "TransformerBlock",
                     "--out", str(out)]) == 0
    folded = out.read_text()
    assert "TransformerBlock" in folded and "scaled_dot_product_attention" not in folded
    assert cli.main(["graph", "--example", "model", "--collapse", "blocks.1", "MultiHeadAttention",
                     "--out", str(out)]) == 0
    folded = out.read_text()
    assert "blocks.1" in folded and "blocks.1.attn" not in folded and "blocks.0.attn" in folded
    assert cli.main(["graph", "--example", "model", "--collapse", "blocks", "--out", str(out)]) == 2
    assert "tinygrad-attn graph: draw_graph: collapse= takes" in capsys.readouterr().err


def test_graph_defaults_to_the_head_and_draws_it_fused_or_unfused(tmp_path, capsys):
    out = tmp_path / "h.svg"
    assert cli.main(["graph", "--out", str(out)]) == 0
    fused = out.read_text()
    assert "step 2 · scaled_dot_product_attention" in fused and "the: " in fused   # token rows
    assert re.search(r"h\.svg: 24 nodes \(7 ops\), 25 edges", capsys.readouterr().out)
    assert cli.main(["graph", "--unfused", "--out", str(out)]) == 0
    unfused = out.read_text()
    assert "scaled_dot_product_attention" not in unfused and "step 4 · softmax" in unfused
    assert "Q Kᵀ" in unfused and "legend" in unfused
    assert re.search(r"h\.svg: 34 nodes \(11 ops\), 35 edges", capsys.readouterr().out)


def test_graph_expand_draws_one_module_and_rejects_a_bad_path(tmp_path, capsys):
    out = tmp_path / "m.svg"
    assert cli.main(["graph", "--example", "model", "--expand", "blocks.1.attn", "--out", str(out)]) == 0
    svg = out.read_text()
    assert "blocks.1.attn.q_proj.weight" in svg and "blocks.0.attn.q_proj.weight" not in svg
    assert "TransformerBlock" in svg                         # blocks.0 drawn as one folded node
    capsys.readouterr()
    assert cli.main(["graph", "--example", "model", "--expand", "blocks.9", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinygrad-attn graph: draw_graph: expand= takes") and err.count("\n") == 1


def test_graph_out_where_it_cannot_write_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "file").write_text("in the way")
    assert cli.main(["graph", "--out", str(tmp_path / "file" / "g.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinygrad-attn graph: render: cannot write") and err.count("\n") == 1
    assert "is a file, not a folder" in err
    assert cli.main(["graph", "--out", str(tmp_path / "new" / "dir" / "g.png")]) == 0   # folders made
    assert (tmp_path / "new" / "dir" / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_step_all_lists_every_op_in_order(capsys):
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    out = capsys.readouterr().out
    loss = EXAMPLES["mlp"]().loss
    ops = [s.op for s in ta.backprop_steps(loss)]
    assert re.findall(r"^step \d+: (\w+)", out, re.M) == ops
    assert f"{len(ops)} steps" in out and "formula  dx = dy Wᵀ" in out


def read_until(fd: int, text: str, timeout: float = 300.0) -> str:
    """Read the terminal until `text` shows up (or fail, showing what did)."""
    buffer = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in buffer:
        if time.monotonic() > deadline:
            raise AssertionError(f"did not see {text!r} in {buffer.decode(errors='replace')!r}")
        try:
            buffer += os.read(fd, 4096)
        except OSError:         # the child closed the terminal
            break
    return buffer.decode(errors="replace")


def test_interactive_stepping_through_a_pseudo_terminal():
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tinygrad_attn", "step"], stdin=terminal,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    try:
        assert "example 'head'" in read_until(controller, PROMPT)
        os.write(controller, b"\n")
        first = read_until(controller, PROMPT)
        assert "step 0: cross_entropy" in first and "formula" in first
        os.write(controller, b"\x1b[C")                              # → : one key, no Enter
        second = read_until(controller, PROMPT)
        assert "step 1: linear → logits (3, 4)  (in head)" in second and "step 0" not in second
        os.write(controller, b"b")
        assert "step 0: cross_entropy" in read_until(controller, PROMPT)
        os.write(controller, b"\x1b[D")                              # ←
        assert "(this is the first step)" in read_until(controller, PROMPT)
        os.write(controller, b"q")
        assert process.wait(timeout=300) == 0
    finally:
        process.kill()
        os.close(controller)


def test_step_stops_cleanly_when_standard_input_is_closed(threads_line):
    for stdin in (subprocess.DEVNULL, None):
        run = subprocess.run([sys.executable, "-m", "tinygrad_attn", "step"], capture_output=True,
                             text=True, timeout=300, cwd=ROOT,
                             **({"stdin": stdin} if stdin is not None else {"input": ""}))
        assert run.returncode == 0 and run.stderr == threads_line
        assert "standard input closed: stopping" in run.stdout


def test_example_draws_one_head_forward_then_backward(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "examples/07_draw_attention_head.py"),
                          "--out-dir", str(tmp_path)], capture_output=True, text=True, check=True)
    forward = (tmp_path / "attention_head_forward.svg").read_text()
    backward = (tmp_path / "attention_head_backward.svg").read_text()
    for svg in (forward, backward):
        assert "<svg" in svg and "scaled_dot_product_attention" in svg and "q_proj.weight" in svg
    assert "‖grad‖" not in forward and "‖grad‖" in backward
    assert re.search(r"\d+ backward steps: cross_entropy linear scaled_dot_product_attention", out.stdout)


def test_keys_that_mean_nothing_show_the_keys_and_never_quit():
    keys = (b"\x1b[C", b"\x1bOC", b"\x1b[1;5C", b"\x1b[D", b"\n", b" ", b"n", b"b", b"q")
    assert [meaning(k) for k in keys] == [NEXT, NEXT, NEXT, BACK, NEXT, NEXT, NEXT, BACK, QUIT]  # Ctrl-→ too
    unknown = (b"\x1b[A", b"\x1b[B", b"\x1b", b"\x1bx", b"x", b"\t")               # ↑ ↓ Esc Alt-x …
    assert [meaning(k) for k in unknown] == [HELP] * len(unknown)
    assert meaning(b"") is None and meaning(b"\x04") == QUIT                  # end of input, Ctrl-D


def test_an_escape_sequence_is_read_whole_and_a_lone_esc_alone():
    reader, writer = os.pipe()
    try:
        for sequence in (b"[A", b"[1;5C", b"OD"):
            os.write(writer, sequence + b"q")          # the next key press follows at once
            assert read_escape(reader) == sequence
            assert os.read(reader, 1) == b"q"          # not swallowed
        assert read_escape(reader) == b""              # Esc with nothing after it
    finally:
        os.close(reader)
        os.close(writer)


def test_up_arrow_and_esc_in_the_terminal_show_the_keys(tmp_path):
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tinygrad_attn", "step"], stdin=terminal,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    try:
        read_until(controller, PROMPT)
        for key in (b"\x1b[A", b"\x1b"):
            os.write(controller, key)
            shown = read_until(controller, PROMPT)
            assert "(keys: Enter, space, n or → next; b or ← back; q quit)" in shown
            assert "standard input closed" not in shown and process.poll() is None
        os.write(controller, b"q")
        assert process.wait(timeout=300) == 0
    finally:
        process.kill()
        os.close(controller)


def test_step_all_into_a_reader_that_stops_early_ends_quietly(threads_line):
    for example in ("head", "model"):
        run = subprocess.run(f"{sys.executable} -m tinygrad_attn step --all --example {example} | head -1",
                             shell=True, capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert run.stdout.startswith(f"example '{example}'") and run.stderr == threads_line


def test_the_mlp_header_says_nothing_of_attention(capsys):
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "example 'mlp': A two-layer MLP (3 → 4 → 2, ReLU) classifying 4 points into 2 classes."
