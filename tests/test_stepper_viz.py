"""The stepper is the real backward pass; the graph drawing is stable, complete and renders."""

import os
import pty
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import cli, engine, nn, viz
from tinygrad_attn.demos import DEMOS


def grads_after(build, drain):
    loss, model = build()
    drain(loss)
    return [(name, p.grad.copy()) for name, p in model.named_parameters()]


@pytest.mark.parametrize("example", ["mlp", "head", "model"])
def test_steps_equal_backward_in_grads_order_and_count(example):
    by_backward = grads_after(DEMOS[example], lambda loss: loss.backward())
    steps = []
    by_steps = grads_after(DEMOS[example], lambda loss: steps.extend(ta.backprop_steps(loss)))
    for (name, g1), (name2, g2) in zip(by_backward, by_steps):
        assert name == name2
        np.testing.assert_array_equal(g1, g2)
    loss, _ = DEMOS[example]()
    events = list(engine.backward_steps(loss, np.array(1.0, np.float32)))
    assert [s.op for s in steps] == [e.tensor.op for e in events]
    assert [s.index for s in steps] == list(range(len(events)))
    assert steps[0].output_shape == () and steps[0].op == "cross_entropy"


def test_step_record_and_text():
    loss, model = DEMOS["head"]()
    steps = list(ta.backprop_steps(loss))
    matmul = next(s for s in steps if s.op == "matmul" and "head.weight" in s.input_names)
    assert matmul.formula == ("dA = dC @ Bᵀ", "dB = Aᵀ @ dC") and matmul.module == "head"
    assert matmul.saved == ("a", "b") and matmul.input_shapes == ((3, 4), (4, 3))
    np.testing.assert_allclose(matmul.sent[1], model.head.weight.grad)
    text = str(matmul)
    assert text.startswith(f"step {matmul.index}: matmul  (in head)")
    assert "formula  dA = dC @ Bᵀ" in text and "→ input 1 head.weight (4, 3)" in text
    assert len(text.splitlines()) < 12
    with pytest.raises(RuntimeError, match="backprop_steps: a tensor of shape"):
        next(ta.backprop_steps(ta.Tensor([1.0, 2.0], requires_grad=True) * 2.0))


def small_graph():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    x.name = "x"
    y = (x * ta.Tensor([3.0, 4.0])).sum()
    y.backward()
    return y


def test_dot_source_is_stable_and_has_the_expected_nodes_and_edges():
    source = viz.draw_graph(small_graph()).source
    assert source == viz.draw_graph(small_graph()).source
    nodes = dict(re.findall(r"^\t(\w+) \[label=\"([^\"]*)\"", source, re.M))
    edges = set(re.findall(r"^\t(\w+) -> (\w+)$", source, re.M))
    assert set(nodes) == {"t0", "t1", "t2", "t3", "op2", "op3"}
    assert nodes["t0"].startswith("{x|(2,) float32|") and "‖grad‖=5" in nodes["t0"]
    assert nodes["t1"].startswith("{const|") and nodes["op2"].startswith("mul")
    assert nodes["op3"].startswith("sum")
    assert edges == {("t0", "op2"), ("t1", "op2"), ("op2", "t2"), ("t2", "op3"), ("op3", "t3")}


def test_modules_are_clusters_and_collapse_folds_them():
    loss, model = DEMOS["model"]()
    loss.backward()
    full = viz.draw_graph(loss).source
    assert 'subgraph "cluster_blocks.0.attn"' in full
    assert 'label="blocks.0.attn (MultiHeadAttention)"' in full
    assert "fillcolor=lightblue" in full                       # parameters stand out
    folded = viz.draw_graph(loss, collapse=nn.MultiHeadAttention).source
    assert "MultiHeadAttention\\nblocks.0.attn" in folded and "scaled_dot_product_attention" not in folded
    assert len(viz.ops_in(folded)) < len(viz.ops_in(full))
    by_path = viz.draw_graph(loss, collapse=["blocks.1"]).source
    assert "TransformerBlock\\nblocks.1" in by_path and "blocks.1.attn" not in by_path


def test_render_writes_a_real_svg_and_png(tmp_path):
    loss, _ = DEMOS["mha"]()
    loss.backward()
    svg = viz.render(loss, tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "scaled_dot_product_attention" in svg
    assert "q_proj.weight" in svg
    assert viz.render(loss, tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="must end in .svg or .png"):
        viz.render(loss, tmp_path / "g.pdf")


def test_graph_and_step_commands(tmp_path, capsys):
    assert cli.main(["graph", "--example", "block", "--out", str(tmp_path / "b.svg")]) == 0
    assert "<svg" in (tmp_path / "b.svg").read_text()
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    out = capsys.readouterr().out
    loss, _ = DEMOS["mlp"]()
    ops = [s.op for s in ta.backprop_steps(loss)]
    assert re.findall(r"^step \d+: (\w+)", out, re.M) == ops
    assert f"{len(ops)} steps" in out


def read_until(fd, text, timeout=20.0):
    buffer = b""
    deadline = time.time() + timeout
    while text.encode() not in buffer:
        if time.time() > deadline:
            raise AssertionError(f"did not see {text!r} in {buffer.decode(errors='replace')!r}")
        try:
            buffer += os.read(fd, 4096)
        except OSError:
            break
    return buffer.decode(errors="replace")


def test_interactive_stepping_through_a_pseudo_terminal():
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tinygrad_attn", "step"], stdin=terminal,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    try:
        read_until(controller, "[q] quit >")
        os.write(controller, b"\n")
        assert "step 0: cross_entropy" in read_until(controller, "[q] quit >")
        os.write(controller, b"\n")
        assert "step 1:" in read_until(controller, "[q] quit >")
        os.write(controller, b"b\n")
        assert "step 0: cross_entropy" in read_until(controller, "[q] quit >")
        os.write(controller, b"q\n")
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
        os.close(controller)
