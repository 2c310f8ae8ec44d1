"""The forward pass one op at a time (`forward_steps`, `step --forward`, `explore --forward`): the
ops in the order they ran, each with its output's value, then the backward pass as without it."""

import json
import re

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import engine
from tinygrad_attn.commands import cli
from tinygrad_attn.viz.example_graphs import EXAMPLES
from tinygrad_attn.viz.explorer import explore
from tinygrad_attn.viz.forward import forward_steps


@pytest.mark.parametrize("name, fused", [("mlp", True), ("head", True), ("head", False), ("llama", False),
                                         ("model", True)])
def test_the_ops_come_in_the_order_they_ran(name, fused, monkeypatch):
    made = []
    record = engine.record

    def recording(*args):
        node = record(*args)
        made.append(node)
        return node
    monkeypatch.setattr(engine, "record", recording)
    example = EXAMPLES[name](fused=fused)
    steps = list(forward_steps(example.loss, example.tokens, example.vocab))
    in_graph = {id(s.tensor.node) for s in steps}
    assert [id(s.tensor.node) for s in steps] == [id(n) for n in made if id(n) in in_graph]
    backward = list(ta.backprop_steps(example.loss, tokens=example.tokens))
    assert sorted(s.backward_index for s in steps) == list(range(len(backward)))
    assert all((s.op, s.name) == (backward[s.backward_index].op, backward[s.backward_index].name)
               for s in steps)


def test_each_step_shows_the_value_the_graph_holds_and_what_the_op_computes():
    example = EXAMPLES["mlp"]()
    steps = list(forward_steps(example.loss))
    assert [(s.op, s.name, s.input_names) for s in steps] == [
        ("linear", "z", ("x", "fc1.weight", "fc1.bias")), ("relu", "hidden", ("z",)),
        ("linear", "logits", ("hidden", "fc2.weight", "fc2.bias")),
        ("cross_entropy", "loss", ("logits", "targets"))]
    x = np.array([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.0], [0.0, -0.5, 2.0]])
    fc1, fc2 = example.model.fc1, example.model.fc2
    z = x @ fc1.weight.numpy() + fc1.bias.numpy()
    np.testing.assert_allclose(steps[0].value, z, rtol=1e-6)
    np.testing.assert_allclose(steps[1].value, np.maximum(z, 0), rtol=1e-6)
    logits = np.maximum(z, 0) @ fc2.weight.numpy() + fc2.bias.numpy()
    np.testing.assert_allclose(steps[2].value, logits, rtol=1e-5)
    assert steps[1].computes == "y = max(x, 0)."
    text = str(steps[0])
    assert text.startswith("forward 0: linear → z (4, 4)  (in fc1)   [backward step 3]\n"
                           "  computes  y = x W + b over the last axis of x")
    assert "  inputs: x (4, 3), fc1.weight (3, 4), fc1.bias (4,)\n  value of z:" in text
    assert f"{z[0, 1]:.4f}" in text
    assert example.model.fc1.weight.grad is None                # reading the forward touches no gradient


def test_step_forward_walks_the_forward_pass_then_the_backward_pass(capsys):
    assert cli.main(["step", "--example", "mlp", "--forward", "--all"]) == 0
    out = capsys.readouterr().out
    heads = re.findall(r"^(forward \d+|step \d+): (\w+)", out, re.M)
    assert heads == [("forward 0", "linear"), ("forward 1", "relu"), ("forward 2", "linear"),
                     ("forward 3", "cross_entropy"), ("step 0", "cross_entropy"), ("step 1", "linear"),
                     ("step 2", "relu"), ("step 3", "linear")]
    assert "forward pass done: 4 ops (forward 0 to 3).\nbackward pass: from the loss back" in out
    assert out.rstrip().endswith("4 steps (0 to 3); every parameter now holds its .grad")
    assert cli.main(["step", "--example", "mlp", "--all"]) == 0
    assert "forward 0" not in capsys.readouterr().out          # without --forward: backward only


def test_the_explorer_walks_the_forward_pass_first(tmp_path):
    example = EXAMPLES["head"]()
    page = explore(example.loss, tmp_path / "page.html", tokens=example.tokens, forward=True)
    data = json.loads(re.search(r'id="explorer-data">(.*?)</script>', page.html, re.S).group(1)
                      .replace("<\\/", "</"))
    steps = list(forward_steps(example.loss))
    assert page.forward_ops == len(data["forward"]) == len(steps) == page.steps
    for record, step in zip(data["forward"], steps):
        assert (record["op"], record["name"], record["backward"]) == (step.op, step.name, step.backward_index)
        value = np.array(record["value"]["data"], dtype=np.float64).reshape(record["value"]["shape"])
        np.testing.assert_array_equal(value, step.value.astype(np.float64))
    assert "forward ops, then" in repr(page)
    plain = explore(EXAMPLES["head"]().loss)
    assert plain.forward_ops == 0 and '"forward": []' in plain.html
