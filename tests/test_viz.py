"""draw_graph: a stable DOT source with the expected nodes and edges, module clusters, folding;
render: a real SVG or PNG through the system dot or pip's graphviz-pure."""

import re
import shutil

import pytest

import tinygrad_attn as ta
from tinygrad_attn import nn, viz
from tinygrad_attn.demos import DEMOS


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
    assert nodes["t0"] == "{x|(2,) float32|‖x‖=2.24  ‖grad‖=5}"      # grad = [3, 4]
    assert nodes["t1"].startswith("{const|") and nodes["op2"].startswith("mul")
    assert nodes["op3"].startswith("sum") and nodes["t3"].endswith("‖x‖=11  ‖grad‖=1}")
    assert edges == {("t0", "op2"), ("t1", "op2"), ("op2", "t2"), ("t2", "op3"), ("op3", "t3")}
    assert "‖grad‖" not in viz.draw_graph(small_graph(), show_grads=False).source


def cluster_body(source: str, path: str) -> str:
    """The DOT text of one module's cluster, up to its matching closing brace."""
    start = source.index(f'subgraph "cluster_{path}" {{')
    depth = 0
    for end in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[end], 0) if source[end - 1] != "\\" else 0
        if depth == 0 and source[end] == "}":
            return source[start:end]
    raise AssertionError(f"unclosed cluster {path}")


def test_modules_are_nested_clusters_and_parameters_stand_out():
    example = DEMOS["model"]()
    loss, model = example.loss, example.model
    loss.backward()
    source = viz.draw_graph(loss).source
    assert 'subgraph "cluster_blocks.0.attn"' in source
    assert 'label="blocks.0.attn (MultiHeadAttention)"' in source
    attn, block = cluster_body(source, "blocks.0.attn"), cluster_body(source, "blocks.0")
    assert 'subgraph "cluster_blocks.0.attn.q_proj"' in attn and "scaled_dot_product_attention" in attn
    assert 'subgraph "cluster_blocks.0.attn"' in block and "blocks.1" not in block
    blue = re.findall(r'label="\{([\w.]+)\|[^"]*"[^\n]*fillcolor=lightblue', source)
    assert set(blue) == {name for name, _ in model.named_parameters()}
    assert len(viz.ops_in(source)) == len(list(ta.backprop_steps(DEMOS["model"]().loss)))


def test_collapse_folds_modules_by_class_or_path_each_drawn_once():
    loss = DEMOS["model"]().loss
    loss.backward()
    full = viz.draw_graph(loss).source
    folded = viz.draw_graph(loss, collapse=nn.MultiHeadAttention).source
    assert "scaled_dot_product_attention" not in folded
    for path in ("blocks.0.attn", "blocks.1.attn"):
        assert folded.count(f'"m_{path}" [label="MultiHeadAttention\\n{path}"') == 1
    # the fold is wired in: something flows in, its output flows out
    assert re.search(r'-> "m_blocks.0.attn"', folded) and re.search(r'"m_blocks.0.attn" ->', folded)
    assert len(viz.ops_in(folded)) < len(viz.ops_in(full))
    by_path = viz.draw_graph(loss, collapse=["blocks.1"]).source
    assert "TransformerBlock\\nblocks.1" in by_path and "blocks.1.attn" not in by_path
    both = viz.draw_graph(loss, collapse=[nn.TransformerBlock, "blocks.0.attn"]).source
    assert "blocks.0.attn" not in both and both.count('[label="TransformerBlock') == 2


def test_render_writes_a_real_svg_and_png(tmp_path):
    loss = DEMOS["mha"]().loss
    loss.backward()
    svg = viz.render(loss, tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg
    assert "scaled_dot_product_attention" in svg and "q_proj.weight" in svg
    assert viz.render(loss, tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="must end in .svg or .png"):
        viz.render(loss, tmp_path / "g.pdf")


def test_without_system_dot_graphviz_pure_is_used(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "dot" else real_which(name))
    assert "graphviz-pure" in viz.dot_program()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(viz.sys, "executable", "/nonexistent/bin/python")
    with pytest.raises(FileNotFoundError, match="pip install graphviz-pure"):
        viz.dot_program()


def test_collapse_rejects_what_is_not_a_module_of_the_graph():
    loss = DEMOS["model"]().loss
    with pytest.raises(ValueError, match=r"got \['blocks'\], the graph has modules \['', 'blocks.0'"):
        viz.draw_graph(loss, collapse="blocks")        # a list of blocks, not a module
    with pytest.raises(ValueError, match=r"got \[3\]"):
        viz.draw_graph(loss, collapse=[3])
