"""The explorer page without a browser: the JSON in it holds exactly the numbers of
``backprop_steps``, each step points at its op node in the inlined SVG, the page is
self-contained (no URL, viewer inlined from the package's asset files), it shows in Jupyter, the
command writes it, and bad input gets a clear error."""

import html
import json
import re
import shutil
import subprocess
from importlib import resources

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.backend import to_numpy
from tinygrad_attn.commands import cli
from tinygrad_attn.viz.example_graphs import EXAMPLES
from tinygrad_attn.viz.explorer import array_json, explore, step_json
from tinygrad_attn.viz.matrices import format_number


def page_data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.S)
    return json.loads(found.group(1))


def numbers(array_record) -> np.ndarray:
    """The array a JSON record holds, ±inf and nan back as floats."""
    return np.array([float(v) for v in array_record["data"]], dtype=np.float64).reshape(array_record["shape"])


def exact(array) -> np.ndarray:
    return to_numpy(array).astype(np.float64)


@pytest.mark.parametrize("name, fused", [("head", True), ("head", False), ("mlp", True), ("model", True)])
def test_the_page_holds_exactly_the_numbers_of_backprop_steps(name, fused):
    example = EXAMPLES[name](fused=fused)
    page = explore(example.loss, tokens=example.tokens).html
    again = EXAMPLES[name](fused=fused)
    steps = list(ta.backprop_steps(again.loss, tokens=again.tokens))
    shown = page_data(page)["steps"]
    assert len(shown) == len(steps)
    for step, record in zip(steps, shown):
        assert (record["index"], record["op"], record["name"], record["module"]) == \
            (step.index, step.op, step.name, step.module)
        assert record["formula"] == [f for f in step.formula if f] and record["notes"] == list(step.notes)
        assert tuple(record["shape"]) == step.output_shape
        np.testing.assert_array_equal(numbers(record["grad"]), exact(step.grad))
        for sent, inp in zip(step.sent, record["inputs"]):
            assert (inp["grad"] is None) == (sent is None)
            if sent is not None:
                np.testing.assert_array_equal(numbers(inp["grad"]), exact(sent))
        assert [i["symbol"] for i in record["insides"]] == [i.symbol for i in step.insides]
        for inside, rec in zip(step.insides, record["insides"]):
            assert rec["kind"] == inside.kind
            np.testing.assert_array_equal(numbers(rec["array"]), exact(inside.array))
        assert [p["source"] for p in record["parts"]] == [source for source, _ in step.parts]
        for (_, part), rec in zip(step.parts, record["parts"]):
            np.testing.assert_array_equal(numbers(rec["grad"]), exact(part))


def svg_labels(page: str) -> list[dict[str, str]]:
    """Per inlined SVG view: node id -> the text drawn in the node."""
    views = []
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        titles = re.findall(r'<g id="node\d+" class="node">\s*<title>([\w.]+)</title>\s*(.*?)</g>', svg, re.S)
        views.append({node: " ".join(html.unescape(t) for t in re.findall(r">([^<]+)</text>", body))
                      for node, body in titles})
    return views


@pytest.mark.parametrize("name", ["head", "model"])
def test_each_step_points_at_its_op_or_the_folded_module_around_it_in_every_view(name):
    example = EXAMPLES[name]()
    page = explore(example.loss, tokens=example.tokens).html
    data = page_data(page)
    labels = svg_labels(page)
    assert len(labels) == len(data["views"])
    for view, drawn in zip(data["views"], labels):
        assert set(view["folds"]) <= set(drawn)
        for record, node in zip(data["steps"], view["nodes"]):
            if node in view["folds"]:
                module = view["folds"][node]
                assert (record["module"] + ".").startswith(module + ".") and module not in view["open"]
                assert drawn[node].endswith(module)
            else:
                assert drawn[node].startswith(f"step {record['index']} · {record['op']}")


def test_the_model_starts_folded_and_has_a_view_per_module_that_holds_modules():
    example = EXAMPLES["model"]()
    views = page_data(explore(example.loss, tokens=example.tokens).html)["views"]
    blocks = ["blocks.0", "blocks.0.attn", "blocks.0.mlp", "blocks.1", "blocks.1.attn", "blocks.1.mlp"]
    assert [v["key"] for v in views] == ["", *blocks]
    assert views[0]["open"] == [] and sorted(views[0]["folds"].values()) == ["blocks.0", "blocks.1"]
    by_key = {v["key"]: v for v in views}
    assert by_key["blocks.1.attn"]["open"] == ["blocks.1", "blocks.1.attn"]
    assert sorted(by_key["blocks.1.attn"]["folds"].values()) == ["blocks.0", "blocks.1.mlp"]
    assert sorted(by_key["blocks.1"]["folds"].values()) == ["blocks.0", "blocks.1.attn", "blocks.1.mlp"]
    attention = 16                                   # blocks.1's attention op: drawn once it is open
    assert views[0]["nodes"][attention] == "m_blocks.1"
    assert by_key["blocks.1"]["nodes"][attention] == "m_blocks.1.attn"
    assert by_key["blocks.1.attn"]["nodes"][attention].startswith("op")
    head = page_data(explore(EXAMPLES["head"]().loss).html)["views"]
    assert [(v["key"], v["folds"]) for v in head] == [("", {})]        # nothing to fold: one view


def test_attention_matrices_carry_token_labels_and_masked_scores():
    example = EXAMPLES["head"]()
    attention = next(s for s in page_data(explore(example.loss, tokens=example.tokens).html)["steps"]
                     if s["insides"])
    scores = next(i["array"] for i in attention["insides"] if i["symbol"] == "S")
    assert scores["rows"] == scores["cols"] == ["the", "cat", "sat"]
    assert scores["data"][1:3] == ["-inf", "-inf"] and scores["data"][5] == "-inf"


def test_array_json_spells_non_finite_numbers_as_strings():
    record = array_json(np.array([[1.5, -np.inf], [np.nan, np.inf]]), "x", None)
    assert record == {"shape": [2, 2], "data": [1.5, "-inf", "nan", "inf"],
                      "rows": ["0", "1"], "cols": ["0", "1"], "captions": [], "integer": False,
                      "numbers": False}
    assert array_json(None, "x", None) is None


def test_the_page_is_self_contained_with_the_package_viewer_inlined():
    example = EXAMPLES["mlp"]()
    page = explore(example.loss).html
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert page.count("<svg") == 1 and "<?xml" not in page and "DOCTYPE svg" not in page
    assets = resources.files("tinygrad_attn.viz") / "explorer_assets"
    assert (assets / "explorer.js").read_text(encoding="utf-8") in page
    assert (assets / "explorer.css").read_text(encoding="utf-8") in page
    assert "{{" not in page.replace((assets / "explorer.js").read_text(encoding="utf-8"), "")


def test_explore_fills_the_leaf_grads_like_backward():
    example = EXAMPLES["mlp"]()
    explore(example.loss)
    again = EXAMPLES["mlp"]()
    again.loss.backward()
    for (name, p), (_, q) in zip(example.model.named_parameters(), again.model.named_parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=name)


def test_jupyter_shows_the_page_in_an_iframe():
    example = EXAMPLES["mlp"]()
    shown = ta.viz.explore(example.loss)
    frame = shown._repr_html_()
    assert frame.startswith('<iframe srcdoc="') and html.unescape(frame.split('"')[1]) == shown.html
    assert shown.path is None and shown.steps == 4


def test_the_command_writes_the_page(tmp_path, capsys):
    out = tmp_path / "new" / "explorer.html"
    assert cli.main(["explore", "--example", "head", "--unfused", "--out", str(out)]) == 0
    assert f"wrote {out}: 11 backward steps" in capsys.readouterr().out
    assert len(page_data(out.read_text(encoding="utf-8"))["steps"]) == 11


def test_bad_input_gets_a_clear_error(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"explore: the loss \(\) does not require grad"):
        explore(ta.Tensor(1.0))
    (tmp_path / "file").write_text("x")
    assert cli.main(["explore", "--out", str(tmp_path / "file" / "e.html")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_masks_and_ids_are_marked_as_integers_so_the_page_shows_no_decimals():
    assert array_json(np.tril(np.ones((2, 2), bool)), "keep", None)["integer"] is True
    assert array_json(np.array([1, 2, 3]), "targets", None)["integer"] is True
    assert array_json(np.ones((2, 2), np.float32), "P", None)["integer"] is False


def test_the_page_labels_token_major_arrays_by_token_and_grouped_ones_by_query_head():
    example = EXAMPLES["llama"](fused=False)
    steps = [step_json(s) for s in ta.backprop_steps(example.loss, tokens=example.tokens)]
    merge = next(s for s in steps if s["op"] == "transpose" and s["shape"] == [1, 3, 2, 4])
    assert merge["grad"]["captions"] == [f"batch 0, token {w!r}" for w in ("the", "cat", "sat")]
    assert merge["grad"]["rows"] == ["head 0", "head 1"]
    assert merge["inputs"][0]["grad"]["captions"] == ["batch 0, head 0", "batch 0, head 1"]
    grouped = next(s for s in steps if s["name"] == "P")
    assert grouped["grad"]["captions"] == [f"batch 0, kv head 0, query head {h}" for h in (0, 1)]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's JavaScript")
def test_the_page_prints_numbers_as_the_terminal_does():
    script = (resources.files("tinygrad_attn.viz") / "explorer_assets" / "explorer.js").read_text()
    num = re.search(r"^  function num\(v\) \{.*?^  \}$", script, re.M | re.S).group(0)
    values = [0.1004, -0.0024061, 0.032344, 0.00091234, 3.1234e-05, -3e-05, 12.34567, 1.0, 0.0099999999,
              0.099996, 0.0, 4.5e-10]
    run = subprocess.run(["node", "-e", f"{num}\nconsole.log(JSON.stringify({values}.map(num)))"],
                         capture_output=True, text=True, timeout=300)
    assert json.loads(run.stdout) == [format_number(v) for v in values]


@pytest.mark.parametrize("text", ["<!--", "<script", "</script", "<!--<script>", "</SCRIPT><!--<Script>-->"])
def test_names_and_tokens_made_of_markup_cannot_end_or_blank_the_page(text):
    """A name or token holding "<!--<script>" put the browser in a state that swallowed the rest
    of the page: inside the data element none of the three can appear (any case), and the JSON
    reads back the names and tokens exactly."""
    x = ta.Tensor(np.ones((2, 3)), requires_grad=True)
    w = ta.Tensor(np.ones((3, 2)), requires_grad=True)
    y = x @ w
    x.name, w.name, y.name = text, text + "w", "y" + text
    page = explore(y.sum(), tokens=(text, text + "b"), title=text, forward=True).html
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.S)
    assert found is not None and page.count('id="explorer-data"') == 1
    inside = found.group(1).lower()
    assert "<!--" not in inside and "<script" not in inside and "</script" not in inside
    data = json.loads(found.group(1))
    assert data["tokens"] == [text, text + "b"] and data["title"] == text
    assert {text, text + "w", "y" + text} <= {step["name"] for step in data["steps"]} | \
        {entry.get("name") for step in data["steps"] for entry in step.get("inputs", [])}
    assert page.count("<script") == 2 and page.count("</script>") == 2     # the data and the viewer
