"""Module and Parameter: parameter discovery, names, modes, devices and state dicts.

A module finds its parameters and sub-modules by walking ``vars(self)`` in insertion order
(Parameters, Modules, and lists, tuples or dicts of them), so there is no attribute magic.
Calling a module runs ``forward`` inside ``scopes.module_scope(self)``, so every graph node made
inside records the innermost module running. The first call of a module that no tree has named
yet, made while no other module runs, names its tree once: every module gets ``path`` (its dotted
name from that root, "" for the root, which messages show as its class name) and every parameter
``name`` (``blocks.0.attn.q_proj.weight``), which the stepper, the graph drawing and anomaly
messages show. The names are kept: calling a sub-module on its own later (``block.attn(x)``) runs it
under the names its root gave, so names never depend on which module was called last. Call
``name_tree()`` yourself after replacing sub-modules or parameters of a model already named, or
to name a model from an outer module built around it after it was called.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np

from .. import scopes
from ..backend import device_of, to_device, xp_for
from ..errors import DeviceError, ShapeError
from ..tensor import Tensor

__all__ = ["Module", "Parameter", "check_probability", "check_sizes"]

_M = TypeVar("_M", bound="Module")     # train, eval and to return the module itself, of its own class


class Parameter(Tensor):
    """A learnable tensor of a module: a leaf that requires grad."""

    __slots__ = ()

    def __init__(self, data: Any, dtype: Any = None, device: str = "cpu"):
        super().__init__(data, requires_grad=True, dtype=dtype, device=device)


def check_sizes(owner: str, minimum: int = 1, **sizes: Any) -> None:
    """Raise ValueError naming `owner` and the first size that is not an integer >= `minimum`."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")


def check_probability(owner: str, name: str, p: Any) -> None:
    """Raise ValueError naming `owner` unless 0 <= p < 1 (NaN fails too)."""
    if not 0 <= p < 1:
        raise ValueError(f"{owner}: {name} must be in [0, 1), got {p!r}")


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, (Parameter, Module)):
        yield prefix, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _flatten(f"{prefix}.{i}", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(f"{prefix}.{key}", item)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Module:
    """Base class of layers and models: subclasses set attributes and define ``forward``.

    Example:
        >>> import tinygrad_attn as ta
        >>> from tinygrad_attn import nn
        >>> class Affine(nn.Module):
        ...     def __init__(self):
        ...         self.scale = nn.Parameter(ta.ones(3))
        ...         self.shift = nn.Linear(3, 3)
        ...     def forward(self, x):
        ...         return self.shift(x * self.scale)
        >>> model = Affine()
        >>> [name for name, _ in model.named_parameters()]
        ['scale', 'shift.weight', 'shift.bias']
        >>> _ = model(ta.ones(2, 3))
        >>> model.shift.weight.name, model.shift.path
        ('shift.weight', 'shift')
        >>> _ = model.shift(ta.ones(2, 3))      # a sub-module called alone keeps its names
        >>> model.shift.weight.name, model.shift.path
        ('shift.weight', 'shift')
    """

    training: bool = True
    path: str = ""
    is_named: bool = False      # set by the first ``name_tree`` that reaches this module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.scope():
            return self.forward(*args, **kwargs)

    def scope(self) -> scopes.module_scope:
        """Run code as this module (``with model.scope():``): name its tree if no tree named it
        yet, and give its scope to enter.

        ``__call__`` runs ``forward`` in it; methods that call sub-modules without ``forward``
        (``TinyTransformer.generate``) use it so that nodes record the model's scopes.
        """
        if not self.is_named and scopes.current_scope() is None:
            self.name_tree()
        return scopes.module_scope(self)

    def name_tree(self) -> None:
        """Name this module's tree from it: ``path`` on this module ("") and every sub-module,
        ``name`` on every parameter, all dotted as in ``named_parameters``; they are kept until
        the next ``name_tree`` that reaches them."""
        for path, module in self.named_modules():
            module.path = path
            module.is_named = True
        for name, param in self.named_parameters():
            param.name = name

    def _members(self) -> Iterator[tuple[str, Any]]:
        for name, value in vars(self).items():
            yield from _flatten(name, value)

    def _walk(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """Depth-first over members in insertion order: (dotted name, module or parameter),
        each object once (a shared one under the first name it was found by)."""
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [(prefix, self)]
        while stack:
            name, item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            yield name, item
            if isinstance(item, Module):
                stack.extend(reversed([(_join(name, n), v) for n, v in item._members()]))

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every sub-module, each once, in order."""
        return ((n, m) for n, m in self._walk(prefix) if isinstance(m, Module))

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) for every parameter, in insertion order, a shared one once."""
        return ((n, p) for n, p in self._walk() if isinstance(p, Parameter))

    def parameters(self) -> list[Parameter]:
        """Every parameter once, in the order of ``named_parameters``."""
        return [p for _, p in self.named_parameters()]

    def zero_grad(self) -> None:
        """Set every parameter's grad to None."""
        for p in self.parameters():
            p.grad = None

    def train(self: _M, mode: bool = True) -> _M:
        """Set training mode (dropout active) on this module and every sub-module."""
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self: _M) -> _M:
        """Set evaluation mode (dropout off) on this module and every sub-module."""
        return self.train(False)

    def to(self: _M, device: str) -> _M:
        """Move every parameter (and its grad) to `device`, in place; returns self.

        Raises DeviceError (before moving anything) for an unknown or unusable device.
        """
        xp_for(device)
        for p in self.parameters():
            p.data = to_device(p.data, device)
            if p.grad is not None:
                p.grad = to_device(p.grad, device)
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameter name → a NumPy copy of its data."""
        return {name: p.numpy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Copy arrays into the parameters of the same names.

        Raises (before changing anything) a KeyError naming the missing or unexpected keys when
        `strict`, a ShapeError naming a key whose shape differs, and a DeviceError for a GPU array
        given to a model on the CPU.
        """
        params = dict(self.named_parameters())
        missing = [n for n in params if n not in state]
        unexpected = [n for n in state if n not in params]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        arrays = {}
        for name, array in state.items():
            if name in params:
                device = params[name].device
                if device_of(array) not in ("cpu", device):
                    raise DeviceError(f"load_state_dict: {name} is a {device_of(array)} array but the "
                                      f"model is on {device}; give NumPy arrays (state_dict() does) "
                                      f"or move the model with .to({device_of(array)!r})")
                shape = tuple(array.shape) if hasattr(array, "shape") else tuple(np.shape(array))
                if shape != params[name].shape:
                    raise ShapeError(f"load_state_dict: {name} has shape {shape} "
                                     f"in the state dict but {params[name].shape} in the model")
                xp = xp_for(device_of(array))   # a copy on the array's own device
                arrays[name] = xp.array(array, dtype=params[name].dtype)
        for name, array in arrays.items():
            params[name].data = to_device(array, params[name].device)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for name, value in self._members():
            if isinstance(value, Module):
                lines.append(f"  ({name}): " + repr(value).replace("\n", "\n  "))
            else:
                lines.append(f"  ({name}): Parameter{value.shape}")
        return "\n".join(lines) + ")" if len(lines) > 1 else f"{type(self).__name__}()"
