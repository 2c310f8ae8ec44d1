"""tinygrad_attn: a from-scratch autodiff engine for learning how attention really works."""

from . import functional, nn, optim, viz
from .backend import cuda_available
from .creation import arange, manual_seed, ones, randn, tensor, zeros
from .engine import no_grad
from .errors import AnomalyError, DeviceError, GradcheckError, ShapeError
from .gradcheck import gradcheck
from .guards.anomaly import detect_anomaly
from .tensor import Tensor, concat, get_default_dtype, set_default_dtype, stack, where
from .viz.stepper import backprop_steps

__all__ = ["AnomalyError", "DeviceError", "GradcheckError", "ShapeError", "Tensor", "arange",
           "backprop_steps", "concat", "cuda_available", "detect_anomaly", "functional",
           "get_default_dtype", "gradcheck", "manual_seed", "nn", "no_grad", "ones", "optim", "randn",
           "set_default_dtype", "stack", "tensor", "viz", "where", "zeros",]
