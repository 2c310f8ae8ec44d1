"""draw_graph: a stable DOT source with the expected nodes and edges, values and gradients,
step numbers, token rows, wrapped formulas, a legend, module clusters, folding and expanding;
render: a real SVG or a PNG whose math glyphs are drawn, and clear errors where it cannot write."""

import re
import shutil

import numpy as np
import pytest
from matplotlib.image import imread

import tinygrad_attn as ta
from tinygrad_attn import nn, viz
from tinygrad_attn.labels import tensor_label
from tinygrad_attn.viz import image
from tinygrad_attn.viz.collected import ancestors
from tinygrad_attn.viz.example_graphs import EXAMPLES


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
    assert nodes["t0"] == "{x|(2,) float32|value\\l1  2\\l|grad\\l3  4\\l}"    # grad = [3, 4]
    assert nodes["t1"] == "{const|(2,) float32|value\\l3  4\\l|grad —}"
    assert nodes["op2"] == "step 1 · mul\\nda = dc ⊙ b" and nodes["op3"].startswith("step 0 · sum")
    assert nodes["t3"] == "{output of sum|() float32|value 11|grad 1}"
    assert edges == {("t0", "op2"), ("t1", "op2"), ("op2", "t2"), ("t2", "op3"), ("op3", "t3")}
    assert "grad" not in viz.draw_graph(small_graph(), show_grads=False, legend=False).source


def test_ancestors_are_every_enclosing_path_down_to_the_root():
    assert ancestors("blocks.0.attn") == ["blocks.0.attn", "blocks.0", "blocks", ""]
    assert ancestors("head") == ["head", ""] and ancestors("") == [""]


def test_the_collected_graph_is_what_the_dot_source_draws():
    example = EXAMPLES["head"](fused=False)
    example.loss.backward()
    graph = viz.collect(example.loss)
    source = viz.emit(graph, legend=False).source
    assert source == viz.draw_graph(example.loss, legend=False).source
    drawn = dict(re.findall(r'^\t+(\w+) \[label="([^"]*)"', source, re.M))
    assert {node.id: node.attrs["label"] for node in graph.nodes} == drawn
    assert set(graph.edges) == set(re.findall(r"^\t+(\w+) -> (\w+)$", source, re.M))
    order = ta.engine.backward_order(example.loss)
    assert graph.ops == [x.op for x in reversed(order)]                # forward order
    assert sorted(graph.step_nodes) == list(range(11))
    for step, node_id in graph.step_nodes.items():
        assert drawn[node_id].startswith(f"step {step} · {order[step].op}")


def test_a_fold_draws_every_step_inside_it():
    example = EXAMPLES["model"]()
    graph = viz.collect(example.loss, collapse=["blocks.1"])
    inside = [s.index for s in ta.backprop_steps(EXAMPLES["model"]().loss)
              if (s.module or "").startswith("blocks.1")]
    fold = next(node for node in graph.nodes if node.id == "m_blocks.1")
    assert (fold.kind, fold.cluster, sorted(fold.steps)) == ("fold", "", inside) and len(inside) == 20
    assert [graph.step_nodes[i] for i in inside] == ["m_blocks.1"] * 20
    assert "blocks.1.attn" not in graph.clusters and graph.clusters["blocks.0.attn"] == \
        "blocks.0.attn (MultiHeadAttention)"
    assert (graph.modules["blocks.1.attn"], graph.modules["blocks.1"]) == \
        ("MultiHeadAttention", "TransformerBlock")
    assert graph.enclosing_cluster("blocks.0.attn.q_proj") == "blocks.0.attn"
    assert graph.enclosing_cluster("blocks.0") == ""


def test_large_tensors_show_labelled_norms():
    x = ta.Tensor(np.full((4, 4), 0.5, dtype=np.float32), requires_grad=True)
    x.name = "w"
    y = (x * x).sum()
    y.backward()                                     # grad = 2x = 1 everywhere, norm 4
    source = viz.draw_graph(y).source
    assert "{w|(4, 4) float32|‖value‖=2  ‖grad‖=4}" in source


def test_op_nodes_carry_the_step_numbers_of_the_stepper():
    example = EXAMPLES["head"](fused=False)
    example.loss.backward()
    source = viz.draw_graph(example.loss, legend=False).source
    drawn = {int(step): (op_id, op) for op_id, step, op in
             re.findall(r'^\t+(op\d+) \[label="step (\d+) · (\w+)', source, re.M)}
    order = ta.engine.backward_order(example.loss)
    assert sorted(drawn) == list(range(len(order))) == list(range(11))
    for step, made in enumerate(order):
        op_id, op = drawn[step]
        assert op == made.op
        out_id = re.search(rf"^\t+{op_id} -> (t\d+)$", source, re.M).group(1)     # the op's output
        assert re.search(rf'^\t+{out_id} \[label="\{{{re.escape(tensor_label(made))}\|',
                         source, re.M)
    for name in ("Q", "K", "V", "Kᵀ", "Q Kᵀ", "S", "P", "O", "logits", "loss"):
        assert f'[label="{{{name}|' in source


def test_token_rows_label_the_values_of_position_tensors():
    example = EXAMPLES["head"]()
    example.loss.backward()
    source = viz.draw_graph(example.loss, tokens=example.tokens).source
    x = next(t for t in ta.engine.toposort(example.loss) if t.name == "X")
    rows = x.numpy()
    expected = "value\\l" + "".join(f"{token}: " + "  ".join(f"{v:.3g}" for v in row) + "\\l"
                                     for token, row in zip(("the", "cat", "sat"), rows))
    assert expected in source
    assert "the: " not in viz.draw_graph(example.loss).source       # no tokens, no row labels


def test_long_formulas_are_wrapped_not_cut():
    example = EXAMPLES["head"]()
    example.loss.backward()
    source = viz.draw_graph(example.loss).source
    label = re.search(r'label="step \d+ · scaled_dot_product_attention\\n([^"]*)"', source).group(1)
    lines = label.split("\\n")
    formulas = ta.ops.REGISTRY["scaled_dot_product_attention"].formula_lines()     # dQ, dK and dV
    assert len(lines) > 3 and " ".join(" ".join(lines).split()) == " ".join(" ".join(formulas).split())
    assert "…" not in source


def test_legend_explains_colours_shapes_and_arrows():
    source = viz.draw_graph(small_graph()).source
    legend = cluster_body(source, "legend")
    assert "parameter (blue)" in legend and "fillcolor=lightblue" in legend
    assert "constant input (grey)" in legend and "tensor made by an op (white)" in legend
    assert "shape=ellipse" in legend and "shape=box3d" in legend
    assert "arrows: the forward pass" in legend and "grad =" in legend
    assert "cluster_legend" not in viz.draw_graph(small_graph(), legend=False).source


def cluster_body(source: str, path: str) -> str:
    """The DOT text of one module's cluster, up to its matching closing brace."""
    quoted = f'subgraph "cluster_{path}" {{'
    start = source.index(quoted if quoted in source else f"subgraph cluster_{path} {{")
    depth = 0
    for end in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[end], 0) if source[end - 1] != "\\" else 0
        if depth == 0 and source[end] == "}":
            return source[start:end]
    raise AssertionError(f"unclosed cluster {path}")


def test_modules_are_nested_clusters_and_parameters_stand_out():
    example = EXAMPLES["model"]()
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
    assert len(viz.collect(loss).ops) == len(list(ta.backprop_steps(EXAMPLES["model"]().loss)))


def test_collapse_folds_modules_by_class_or_path_each_drawn_once():
    loss = EXAMPLES["model"]().loss
    loss.backward()
    folded = viz.draw_graph(loss, collapse=nn.MultiHeadAttention).source
    assert "scaled_dot_product_attention" not in folded
    for path in ("blocks.0.attn", "blocks.1.attn"):
        assert folded.count(f'"m_{path}" [label="MultiHeadAttention\\n{path}"') == 1
    # the fold is wired in: something flows in, its output flows out
    assert re.search(r'-> "m_blocks.0.attn"', folded) and re.search(r'"m_blocks.0.attn" ->', folded)
    assert len(viz.collect(loss, collapse=nn.MultiHeadAttention).ops) < len(viz.collect(loss).ops)
    by_path = viz.draw_graph(loss, collapse=["blocks.1"]).source
    assert "TransformerBlock\\nblocks.1" in by_path and "blocks.1.attn" not in by_path
    both = viz.draw_graph(loss, collapse=[nn.TransformerBlock, "blocks.0.attn"]).source
    assert "blocks.0.attn" not in both and both.count('[label="TransformerBlock') == 2


def test_expand_draws_one_module_in_full_and_folds_the_others():
    loss = EXAMPLES["model"]().loss
    source = viz.draw_graph(loss, expand="blocks.0.attn").source
    attn = cluster_body(source, "blocks.0.attn")
    assert "scaled_dot_product_attention" in attn and 'subgraph "cluster_blocks.0.attn.q_proj"' in attn
    assert 'subgraph "cluster_blocks.0"' in source                   # its enclosing block stays open
    folds = set(re.findall(r'"?m_([\w.]+)"? \[label=', source))
    assert folds == {"tok_emb", "pos_emb", "blocks.0.ln1", "blocks.0.ln2", "blocks.0.mlp", "blocks.1",
                     "ln_f", "head"}
    with pytest.raises(ValueError, match=r"expand= takes .* got 'blocks.7', the graph has modules \['', "):
        viz.draw_graph(loss, expand="blocks.7")


def render_label(tmp_path, label: str) -> np.ndarray:
    """The pixels of a PNG of one node with `label` (the same box for every label)."""
    source = f'digraph {{ a [label="{label}" shape=box width=1 height=0.5 fixedsize=true fontsize=20] }}'
    path = tmp_path / f"{ord(label[1])}.png"
    path.write_bytes(image.source_to_image(source, "png"))
    return imread(path)[..., :3]


@pytest.mark.filterwarnings("ignore:Glyph 57344")          # the box drawn for the missing glyph
def test_png_draws_math_glyphs(tmp_path):
    blank = render_label(tmp_path, "a   b")
    tofu = render_label(tmp_path, "a \ue000 b")      # a private-use code point: no glyph, a box
    for glyph in "⊙ᵀ√Σ−‖":
        drawn = render_label(tmp_path, f"a {glyph} b")
        assert (drawn < 0.5).sum() > (blank < 0.5).sum() + 20, glyph      # ink where the glyph is
        assert not np.array_equal(drawn, tofu), glyph


def test_render_writes_a_real_svg_and_png(tmp_path):
    loss = EXAMPLES["mha"]().loss
    loss.backward()
    svg = viz.render(loss, tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg
    assert "scaled_dot_product_attention" in svg and "q_proj.weight" in svg
    assert viz.render(loss, tmp_path / "new" / "g.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="must end in .svg or .png"):
        viz.render(loss, tmp_path / "g.pdf")


def test_render_says_why_it_cannot_write(tmp_path):
    loss = small_graph()
    (tmp_path / "file").write_text("in the way")
    with pytest.raises(ValueError, match=r"cannot write '.*file/g.svg': '.*file' is a file, not a folder"):
        viz.render(loss, tmp_path / "file" / "g.svg")
    (tmp_path / "dir.png").mkdir()
    with pytest.raises(ValueError, match=r"render: cannot write '.*dir.png': Is a directory"):
        viz.render(loss, tmp_path / "dir.png")


def test_without_system_dot_graphviz_pure_is_used(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "dot" else real_which(name))
    assert "graphviz-pure" in image.dot_program()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(image.sys, "executable", "/nonexistent/bin/python")
    with pytest.raises(FileNotFoundError, match="pip install graphviz-pure"):
        image.dot_program()


def test_collapse_rejects_what_is_not_a_module_of_the_graph():
    loss = EXAMPLES["model"]().loss
    with pytest.raises(ValueError, match=r"got \['blocks'\], the graph has modules \['', 'blocks.0'"):
        viz.draw_graph(loss, collapse="blocks")        # a list of blocks, not a module
    with pytest.raises(ValueError, match=r"got \[3\]"):
        viz.draw_graph(loss, collapse=[3])


def test_the_unfused_s_says_it_holds_the_scores_before_the_mask():
    """The fused step's S shows −inf at masked cells; the unfused S node holds the raw scores
    (softmax applies the mask inside), and says so."""
    note = "scores before the mask: softmax applies it (no −inf here)"
    assert note in ta.viz.draw_graph(EXAMPLES["head"](fused=False).loss).source
    assert note not in ta.viz.draw_graph(EXAMPLES["head"]().loss).source
