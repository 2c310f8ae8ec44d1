"""backprop_steps is the real backward pass: same gradients, order and count as backward(), and
each Step tells the truth about the node it shows."""

import contextlib

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import engine
from tinygrad_attn.viz.example_graphs import EXAMPLES


def grads_after(build, drain):
    example = build()
    loss, model = example.loss, example.model
    drain(loss)
    return [(name, p.grad.copy()) for name, p in model.named_parameters()]


@pytest.mark.parametrize("example", ["mlp", "head", "model"])
@pytest.mark.parametrize("form", ["textbook", "kernels"])
def test_steps_equal_backward_in_grads_order_and_count(example, form):
    """The stepper runs each op's textbook backward: the same bits as backward() when the graph
    ran in textbook form; with the kernels, the same numbers to their stated few ulps."""
    with ta.textbook() if form == "textbook" else contextlib.nullcontext():
        by_backward = grads_after(EXAMPLES[example], lambda loss: loss.backward())
        steps = []
        by_steps = grads_after(EXAMPLES[example], lambda loss: steps.extend(ta.backprop_steps(loss)))
    assert [n for n, _ in by_steps] == [n for n, _ in by_backward]
    largest = max(np.abs(g).max() for _, g in by_backward)     # a gradient that is 0 up to rounding
    for (_, g1), (_, g2) in zip(by_backward, by_steps):
        if form == "textbook":
            np.testing.assert_array_equal(g1, g2)
        else:
            np.testing.assert_allclose(g1, g2, rtol=1e-4, atol=1e-6 * largest)
    loss = EXAMPLES[example]().loss
    events = list(engine.backward_steps(loss, np.array(1.0, np.float32)))
    assert [s.op for s in steps] == [e.tensor.op for e in events]
    assert [s.output_shape for s in steps] == [e.tensor.shape for e in events]
    assert [s.index for s in steps] == list(range(len(events)))
    assert steps[0].output_shape == () and steps[0].op == "cross_entropy"


def test_leaf_grads_appear_only_once_their_consumers_have_run():
    example = EXAMPLES["mlp"]()
    loss, model = example.loss, example.model
    steps = ta.backprop_steps(loss)
    first = next(steps)
    assert first.op == "cross_entropy" and model.fc1.weight.grad is None
    rest = list(steps)
    assert rest[-1].parameters == ("fc1.weight", "fc1.bias") and model.fc1.weight.grad is not None


def test_step_values_match_the_math_by_hand():
    """The MLP's steps, checked against NumPy: softmax - one-hot, the relu mask, dW = xᵀ dy."""
    example = EXAMPLES["mlp"]()
    loss, model = example.loss, example.model
    x = np.array([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.0], [0.0, -0.5, 2.0]])
    target = np.array([0, 1, 1, 0])
    steps = list(ta.backprop_steps(loss))
    assert [s.op for s in steps] == ["cross_entropy", "linear", "relu", "linear"]
    w1, b1, w2, b2 = (p.numpy().astype(np.float64) for p in model.parameters())
    h = x @ w1 + b1
    logits = np.maximum(h, 0) @ w2 + b2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dlogits = (p - np.eye(2)[target]) / 4
    np.testing.assert_allclose(steps[0].sent[0], dlogits, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps[1].sent[2], dlogits.sum(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps[1].sent[1], np.maximum(h, 0).T @ dlogits, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps[1].sent[0], dlogits @ w2.T, rtol=1e-5, atol=1e-7)
    dh = dlogits @ w2.T * (h > 0)
    np.testing.assert_allclose(steps[2].sent[0], dh, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps[3].sent[1], x.T @ dh, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps[3].sent[2], dh.sum(0), rtol=1e-5, atol=1e-7)
    assert steps[2].saved == tuple(steps[2].tensor.node.ctx.saved)


def test_step_record_and_text():
    example = EXAMPLES["head"]()
    loss, model = example.loss, example.model
    steps = list(ta.backprop_steps(loss, tokens=example.tokens))
    linear = next(s for s in steps if s.op == "linear" and "head.weight" in s.input_names)
    assert linear.formula == ("dx = dy Wᵀ", "dW = xᵀ dy  (x and dy as matrices of their rows)",
                              "db = Σ dy over the rows") and linear.module == "head"
    assert linear.saved == ("x", "w") and linear.input_shapes == ((3, 2), (2, 4), (4,))
    assert linear.parameters == ("head.weight", "head.bias") and linear.input_names[0] == "O"
    np.testing.assert_allclose(linear.sent[1], model.head.weight.grad)
    np.testing.assert_allclose(linear.sent[2], model.head.bias.grad)
    text = str(linear)
    assert text.startswith(f"step {linear.index}: linear → logits (3, 4)  (in head)")
    assert "→ input 1 head.weight (2, 4): gradient sent, dL/d(head.weight):\n      formula  dW = xᵀ dy" \
        in text
    assert "formula  dx = dy Wᵀ" in text
    assert "gradient arriving, dL/d(logits)" in text
    assert "saved by forward: x (the input), W (the weight matrix)" in text
    assert max(map(len, text.splitlines())) < 100
    attention = next(s for s in steps if s.op == "scaled_dot_product_attention")
    assert attention.module == "AttentionHead"
    assert attention.input_names == ("Q", "K", "V", "None", "None") and attention.name == "O"
    assert {p for s in steps for p in s.parameters} == {n for n, _ in model.named_parameters()}


def test_a_non_scalar_loss_needs_a_gradient():
    y = ta.Tensor([1.0, 2.0], requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match="backprop_steps: a tensor of shape"):
        next(ta.backprop_steps(y))
    steps = list(ta.backprop_steps(y, np.array([1.0, -1.0], np.float32)))
    assert [s.op for s in steps] == ["mul"]
    np.testing.assert_array_equal(steps[0].sent[0], [2.0, -2.0])


def test_parameters_are_the_named_leaves_that_take_a_gradient():
    w = ta.Tensor([[1.0, 2.0]], requires_grad=True)
    w.name = "w"
    x = ta.Tensor([[3.0], [4.0]], requires_grad=True)          # a leaf without a name
    (step,) = [s for s in ta.backprop_steps((x @ w).sum()) if s.op == "matmul"]
    assert step.input_names == ("leaf", "w") and step.parameters == ("w",)
    np.testing.assert_array_equal(w.grad, [[7.0, 7.0]])
