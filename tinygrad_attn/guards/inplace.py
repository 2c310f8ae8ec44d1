"""Catching in-place edits of the arrays that a backward pass will read.

NumPy cannot intercept a write such as ``x.data[0] = 5``, so the engine fingerprints, when it
records a node, each array that the op saved for backward and that a user can reach: an input's
or the output's ``.data``. Backward recomputes the fingerprints first and refuses to run a node
whose arrays changed (PyTorch's version-counter check, done by content).

The fingerprint of a NumPy array of up to 64 KiB is a copy of its bytes: exact, and cheaper than
the sum below at those sizes (a reduction costs about 0.9 µs before it reads anything: 0.1
against 0.95 µs at 5 KiB, 0.4 against 1.4 at 32 KiB), for at most 64 KiB kept per saved array. Of
a larger or a CuPy array it is the wrapping integer sum of its bit patterns in its own width: any
change to one element, even of one bit, NaN included, changes it. The sum costs one read of the
array, about 0.4 of an elementwise op on it, keeps nothing, and on the GPU stays on the device
until backward compares it. An array saved by two ops (tanh's output, then
the next mul's input) is fingerprinted once at forward and read once per backward pass.

Limits: a large array edited in a way that keeps the sum (two elements swapped) goes unseen;
private residuals (softmax probabilities) are not fingerprinted. Index arrays (getitem's,
an embedding's ids) are not watched but copied when the op runs, so editing them afterwards
changes no gradient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..labels import input_label, op_location, tensor_label

if TYPE_CHECKING:
    from ..engine import Node
    from ..tensor import Tensor

__all__ = ["check_unchanged", "fingerprint", "watch"]


_UNSIGNED = {n: np.dtype(f"uint{8 * n}") for n in (1, 2, 4, 8)}
_SMALL_BYTES = 64 * 1024     # up to this size, a copy of the bytes


def fingerprint(array: Any) -> Any:
    """The bytes of a small plain NumPy array (an ndarray, not a subclass), or of a NumPy array
    whose itemsize no unsigned integer has (a longdouble's 16); else Σ of its bits as unsigned ints
    of its itemsize, modulo 2^(8·itemsize). (Tensors hold plain ndarrays.)"""
    if type(array) is np.ndarray and array.nbytes <= _SMALL_BYTES:     # first: the cheapest test
        return array.tobytes()
    unsigned = _UNSIGNED.get(array.dtype.itemsize)
    if unsigned is None and isinstance(array, np.ndarray):
        return array.tobytes()
    return array.view(unsigned).sum(dtype=unsigned)


def watch(saved: Mapping[str, Any], inputs: tuple, out: Any) -> tuple[tuple[int | None, Any, Any], ...]:
    """(input index or None for the output, array, fingerprint) for each saved array that is an
    input's or the output's data, each array once.

    An input's array that the op which made it saved as its output (tanh's output read again by
    the next mul) keeps that op's fingerprint: an edit in between is caught at that op's node
    either way, and the array is read once instead of twice.
    """
    watched: list[tuple[int | None, Any, Any]] = []
    for array in saved.values():
        then = None
        if array is out:
            index = None
        else:
            for index, t in enumerate(inputs):  # noqa: B007 -- `index` is read after the break
                if t is not None and t.data is array:     # the first input whose data is `array`
                    break
            else:
                continue                    # a private residual, or None
            producer = inputs[index].node
            if producer is not None:
                for made, seen, print_ in producer.watched:
                    if made is None and seen is array:
                        then = print_
        for _, seen, _ in watched:
            if seen is array:
                break                       # saved twice (x * x): watched once
        else:
            # fingerprint(array) with its commonest case inline, as are the input lookup here and
            # the bytes comparison in check_unchanged: 0.3 µs of a 7.6 µs chain op (200 small
            # ops; own time of the two functions, interleaved with the plain calls in one process)
            if then is None:
                then = array.tobytes() if type(array) is np.ndarray and array.nbytes <= _SMALL_BYTES \
                    else fingerprint(array)
            watched.append((index, array, then))
    return tuple(watched)


def check_unchanged(node: Node, output: Tensor, verified: set[int]) -> None:
    """Refuse to run `node`'s backward (it made `output`) if an array it saved was edited in
    place since forward: a RuntimeError naming the op, the tensor and where the op sits.

    `verified` holds the ids of arrays already found unchanged in this backward pass (an array
    saved by two nodes is read once); the arrays are alive, held by their nodes, so ids are stable.
    """
    for index, array, then in node.watched:
        key = id(array)
        if key in verified:
            continue
        now = array.tobytes() if type(then) is bytes and type(array) is np.ndarray else fingerprint(array)
        if now != then:                     # bytes, or a NumPy or CuPy sum (one number read back)
            _refuse(node, output, index, array)
        verified.add(key)


def _refuse(node: Node, output: Tensor, index: int | None, array: Any) -> None:
    which = (f"its output ({tensor_label(output)})" if index is None
             else input_label(index, node.parents[index]))
    raise RuntimeError(
        f"{node.op.name}: {which} of shape {tuple(array.shape)} was changed in place after the "
        "forward pass saved it for backward, so the gradient would be wrong; change values under "
        "ta.no_grad() before building the graph, or run the forward pass again after changing them"
        f"{op_location(node.scope, node.parents, node.site)}")
