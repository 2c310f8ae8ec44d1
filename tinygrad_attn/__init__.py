"""tinygrad_attn: a from-scratch autodiff engine for learning how attention really works."""

from . import functional, nn, optim, viz
from .backend import cuda_available
from .creation import (
    arange,
    eye,
    full,
    full_like,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .dtypes import get_default_dtype, set_default_dtype
from .engine import no_grad
from .errors import AnomalyError, DeviceError, GradcheckError, ShapeError
from .gradcheck import gradcheck
from .guards.anomaly import detect_anomaly
from .kernels import textbook
from .kernels.threads import apply as _use_the_thread_count
from .pretrained import load_pretrained, save_pretrained
from .tensor import Tensor, concat, stack, where
from .viz.stepper import backprop_steps

_use_the_thread_count()      # one thread unless asked: kernels/threads.py says why

__all__ = [
    "AnomalyError", "DeviceError", "GradcheckError", "ShapeError", "Tensor", "arange", "backprop_steps",
    "concat", "cuda_available", "detect_anomaly", "eye", "full", "full_like", "functional",
    "get_default_dtype", "gradcheck", "linspace", "load_pretrained", "manual_seed", "nn", "no_grad",
    "ones", "ones_like", "optim", "rand", "randint", "randn", "save_pretrained", "set_default_dtype",
    "stack", "tensor", "textbook", "viz", "where", "zeros", "zeros_like",
]
