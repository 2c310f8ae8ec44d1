"""The "cuda" path checked without a GPU, on the strict CuPy stand-in (tests/strict_backend.py).

Every registered op's gradcheck and the other `device`-parametrised tests run on it through the
`device` fixture (conftest.py); here: the stand-in itself, a model's forward and backward, an
Adam step, generate and training steps, each equal to the CPU run, and the device errors.
"""

import numpy as np
import pytest
from strict_backend import TRANSFERS, StrictArray

import tinygrad_attn as ta
from tinygrad_attn import nn, optim
from tinygrad_attn.training import TrainConfig, make_model, train


def test_the_stand_in_refuses_host_conversion_and_numpy_calls(strict_cuda):
    a = strict_cuda.asarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="numpy.exp called on a device array"):
        np.exp(a)
    with pytest.raises(TypeError, match="numpy.concatenate called on a device array"):
        np.concatenate([a, a])
    with pytest.raises(TypeError, match="got a NumPy array of shape \\(3,\\)"):
        a + np.ones(3)
    with pytest.raises(TypeError, match="got a NumPy array"):
        strict_cuda.where(a > 1, a, np.zeros((2, 3)))
    assert not hasattr(a.flags, "writeable")
    total = a.sum()
    assert isinstance(total, StrictArray) and total.shape == ()          # 0-d, never a NumPy scalar
    assert float(total) == 15.0 and TRANSFERS[-1] == ("to_host", 1)     # allowed, and recorded
    assert (np.float32(2) * a).get().tolist() == [[0, 2, 4], [6, 8, 10]]
    assert a[:, strict_cuda.asarray(np.array([0, -1, 3]))].get().tolist() == [[0, 2, 0], [3, 5, 3]]  # wraps
    assert ta.Tensor(a, device="cuda").device == "cuda"



def _model():
    ta.manual_seed(3)
    return nn.TinyTransformer(vocab_size=7, d_model=8, num_heads=2, num_layers=2, max_len=8)


def _forward_backward(device):
    model = _model().to(device)
    ids = np.array([[1, 2, 3, 4], [6, 5, 0, 1]])
    logits = model(ids)
    targets = np.array([[2, 3, 4, 5], [5, 0, 1, -100]])
    loss = ta.functional.cross_entropy(logits, targets, ignore_index=-100)
    loss.backward()
    return model, logits, loss


def test_transformer_forward_and_backward_match_the_cpu(strict_cuda):
    cpu_model, cpu_logits, cpu_loss = _forward_backward("cpu")
    model, logits, loss = _forward_backward("cuda")
    assert logits.device == "cuda" and isinstance(logits.data, StrictArray)
    np.testing.assert_allclose(logits.numpy(), cpu_logits.numpy(), rtol=1e-6, atol=1e-6)
    assert loss.item() == pytest.approx(cpu_loss.item(), rel=1e-6)
    for (name, p), (_, q) in zip(model.named_parameters(), cpu_model.named_parameters()):
        assert isinstance(p.grad, StrictArray), name
        np.testing.assert_allclose(p.grad.get(), q.grad, rtol=1e-5, atol=1e-6, err_msg=name)


def test_adam_step_matches_the_cpu(strict_cuda):
    params = {}
    for device in ("cpu", "cuda"):
        model, _, _ = _forward_backward(device)
        opt = optim.Adam(model.parameters(), lr=0.01, weight_decay=0.1)
        opt.step()
        opt.step()
        params[device] = model.state_dict()
        assert all(isinstance(b["m"], (np.ndarray if device == "cpu" else StrictArray)) for b in opt.buffers)
    for name, value in params["cpu"].items():
        np.testing.assert_allclose(params["cuda"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_generate_returns_the_cpu_tokens_on_the_model_device(strict_cuda):
    prompt = np.array([[1, 2], [3, 4]])
    expected = _model().generate(prompt, max_new_tokens=4)
    model = _model().to("cuda")
    TRANSFERS.clear()
    out = model.generate(ta.Tensor(prompt, device="cuda"), max_new_tokens=4)
    assert out.device == "cuda" and out.shape == (2, 6)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    # The prompt is read once to check it; no logits or ids go to the host while decoding.
    big = [t for t in TRANSFERS if t[0] == "to_host" and t[1] > 4]
    assert big == [("to_host", 6 * 2)], big                                # out.numpy() only


def test_embedding_checks_ids_without_copying_them_to_the_host(strict_cuda):
    emb = nn.Embedding(10, 3).to("cuda")
    ids = ta.Tensor(np.arange(40).reshape(4, 10) % 10, device="cuda")
    TRANSFERS.clear()
    out = emb(ids)
    assert out.shape == (4, 10, 3) and out.device == "cuda"
    assert all(n <= 2 for kind, n in TRANSFERS if kind == "to_host"), TRANSFERS
    with pytest.raises(IndexError, match="Embedding: id 10 is out of range for 10 embeddings"):
        emb(ta.Tensor(np.array([[3, 10, 2]]), device="cuda"))
    with pytest.raises(IndexError, match="Embedding: id -1 is out of range"):
        emb(ta.Tensor(np.array([[-1, 0]]), device="cuda"))
    with pytest.raises(ta.DeviceError, match="Embedding: ids are on cuda but the weight is on cpu"):
        nn.Embedding(10, 3)(ids)
    TRANSFERS.clear()
    emb(ids)
    assert not [t for t in TRANSFERS if t[0] == "to_host"]      # ids from the host: checked there
    made_on_device = ta.Tensor(ids.data % 10, device="cuda")   # no host values: checked on the device
    TRANSFERS.clear()
    emb(made_on_device)
    assert sum(1 for kind, _ in TRANSFERS if kind == "to_host") == 1    # the one range check


def test_training_steps_match_the_cpu(strict_cuda):
    histories = {}
    for device in ("cpu", "cuda"):
        config = TrainConfig(steps=3, batch_size=4, d_model=8, num_heads=2, num_layers=1, warmup=1,
                             device=device)
        model = make_model("copy", config)
        histories[device] = train(model, "copy", config)
        assert model.head.weight.device == device
    np.testing.assert_allclose(histories["cuda"].loss, histories["cpu"].loss, rtol=1e-5)
    np.testing.assert_allclose(histories["cuda"].grad_norm, histories["cpu"].grad_norm, rtol=1e-5)


def test_a_gpu_index_for_a_cpu_tensor_is_a_device_error(strict_cuda):
    x = ta.Tensor(np.arange(6.0), requires_grad=True)
    with pytest.raises(ta.DeviceError, match="getitem: the index is on cuda but the tensor is on cpu"):
        x[strict_cuda.asarray(np.array([0, 1]))]
    with pytest.raises(ta.DeviceError, match="getitem: the index is on cuda"):
        x[ta.Tensor(np.array([0, 1]), device="cuda")]


def test_a_gpu_gradient_for_a_cpu_tensor_is_a_device_error(strict_cuda):
    x = ta.Tensor(np.arange(3.0), requires_grad=True)
    y = x * 2
    with pytest.raises(ta.DeviceError, match="backward: grad is on cuda but the tensor is on cpu"):
        y.backward(ta.Tensor(np.ones(3), device="cuda"))
    with pytest.raises(ta.DeviceError, match="grad: a cuda array cannot be the gradient of a tensor on cpu"):
        x.grad = strict_cuda.ones(3)
    assert x.grad is None
    y.backward(np.ones(3))                                    # a NumPy grad is fine
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_a_gpu_state_dict_for_a_cpu_module_is_a_device_error(strict_cuda):
    model = nn.Linear(3, 2)
    state = {name: strict_cuda.asarray(value) for name, value in model.state_dict().items()}
    before = model.weight.numpy()
    with pytest.raises(ta.DeviceError, match="load_state_dict: weight is a cuda array but the model is o"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.weight.numpy(), before)
    model.to("cuda").load_state_dict({k: v * 2 for k, v in state.items()})     # same device: fine
    np.testing.assert_array_equal(model.weight.numpy(), before * 2)


def test_boolean_array_indexing_gives_the_same_values_and_gradients_on_both_devices(device, rng):
    x = ta.Tensor(rng.standard_normal((4, 3)), requires_grad=True, device=device)
    rows = np.array([True, False, True, True])
    y = x[rows]
    assert y.shape == (3, 3) and y.device == device
    np.testing.assert_array_equal(y.numpy(), x.numpy()[rows])
    cot = rng.standard_normal((3, 3))
    y.backward(cot)
    expected = np.zeros((4, 3))
    expected[rows] = cot
    np.testing.assert_array_equal(ta.Tensor(x.grad).numpy() if device == "cpu" else x.grad.get(), expected)
    mask = ta.Tensor(x.numpy() > 0, device=device)               # a Tensor mask, elementwise
    assert ta.gradcheck(lambda t: t[mask], [x])
    assert ta.gradcheck(lambda t: t[:, np.array([True, False, True])], [x])
    with pytest.raises(IndexError, match="getitem: index .* does not fit shape \\(4, 3\\)"):
        x[np.array([True, False])]


def test_the_device_fixture_runs_cuda_on_the_stand_in_without_a_gpu(device):
    from conftest import REAL_CUDA
    x = ta.ones(2, device=device)
    assert x.device == device
    assert isinstance(x.data, StrictArray) == (device == "cuda" and not REAL_CUDA)


@pytest.mark.slow
def test_the_train_command_runs_and_resumes_on_cuda(strict_cuda, tmp_path, capsys):
    from tinygrad_attn.commands import cli
    run = str(tmp_path / "run")
    common = ["--steps", "3", "--batch-size", "4", "--d-model", "8", "--layers", "1", "--eval-size", "5"]
    assert cli.main(["train", "copy", "--device", "cuda", "--stop-after", "2", "--out", run] + common) == 0
    assert cli.main(["train", "copy", "--resume", run]) == 0
    assert "after 3 steps" in capsys.readouterr().out


def test_an_op_that_calls_numpy_fails_on_the_stand_in(strict_cuda):
    from tinygrad_attn.apply import apply
    from tinygrad_attn.ops.elementwise_math import Exp

    class NumpyExp(Exp):
        name = "numpy_exp"

        @staticmethod
        def forward(ctx, x):
            ctx.save(y=np.exp(x))          # the bug: numpy, not ctx.xp
            return ctx.saved["y"]

    x = ta.Tensor(np.zeros(3), device="cuda", requires_grad=True)
    with pytest.raises(TypeError, match="numpy.exp called on a device array"):
        apply(NumpyExp, x)
    assert apply(NumpyExp, ta.Tensor(np.zeros(3))).numpy().tolist() == [1.0, 1.0, 1.0]
