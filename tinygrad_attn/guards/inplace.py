"""Catching in-place edits of the arrays that a backward pass will read, without waiting for the
device.

When the engine records a node, each array the op saved for backward that a user can reach (an
input's or the output's ``.data``) is guarded; backward refuses to run a node whose arrays
changed since (PyTorch's version-counter check). How an array is guarded depends on where it
lives, its size and whose memory it is:

- A NumPy array of up to 64 KiB (the CPU) is fingerprinted, because NumPy cannot intercept a write
  such as ``x.data[0] = 5``: a copy of its bytes (exact; a reduction costs more than the copy at
  those sizes), compared at backward. A broadcast view counts by its distinct elements.
- A larger NumPy array that is an op's own output (memory the op allocated, not a view of an
  input's) is sealed: NumPy's read-only flag is set when the node is recorded, before anyone else
  holds it, so an edit such as ``h.data[0] = 5`` fails at the line that makes it (NumPy's
  ``ValueError: assignment destination is read-only``) and nothing is read at backward: cheaper
  than a fingerprint, and it misses no edit.
- Any other larger NumPy array (a leaf's: a parameter, an input; or a view of one) is
  fingerprinted by the sum of its bits as 32-bit words, in 64 bits (``fingerprint``), which any
  change to one element, even of one bit, NaN included, changes, and so does any edit that moves
  many words the same way; backward sums it again and compares.
- Any other array (CuPy's, on the GPU) carries a version instead: a count that the library's own
  in-place writers raise (``bump``: every optimizer's step, a gradient check's nudges), compared at
  backward as a Python number. Nothing is read back from the device, so a step never waits for it.
  A write straight into a CuPy array's memory (``x.data[0] = 5``) is not seen there, as an edit
  through PyTorch's ``.data`` is not.

An array saved by two ops (a leaf read by two muls) is checked once per backward pass.

Limits: a large leaf's array edited in a way that keeps the sum of its words (two elements
swapped, two changes that cancel) goes unseen; private residuals (softmax probabilities) are not
guarded. Index arrays (getitem's, an embedding's ids) are not watched but copied when the op runs,
so editing them afterwards changes no gradient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..labels import input_label, op_location, tensor_label

if TYPE_CHECKING:
    from ..engine import Node
    from ..tensor import Tensor

__all__ = ["bump", "check_unchanged", "fingerprint", "seal", "version", "watch"]


_UNSIGNED = {n: np.dtype(f"uint{8 * n}") for n in (1, 2, 4, 8)}
_WORD = np.dtype(np.uint64)
_SMALL_BYTES = 64 * 1024     # up to this size, a copy of the bytes
_versions: dict[int, int] = {}  # id of an array that owns its memory → times the library wrote it


def fingerprint(array: np.ndarray) -> Any:
    """The bytes of a small NumPy array (or of one whose itemsize no unsigned integer has: a
    longdouble's 16); else the sum of its bits read as unsigned 32-bit words, in 64 bits: it
    cannot wrap below 2^32 words, so an edit that moves every word the same way (doubling the
    array, flipping every sign) changes it. A broadcast view (a stride of 0) is read as its
    distinct elements, once each, so that an element repeated k times does not multiply its change
    by k."""
    if 0 in array.strides:
        array = array[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in array.strides)]
    if array.nbytes <= _SMALL_BYTES or array.dtype.itemsize not in _UNSIGNED:
        return array.tobytes()
    if array.dtype.itemsize == 8:           # two 32-bit words an element
        words = np.ascontiguousarray(array).reshape(-1).view(np.uint32)
    else:
        words = array.view(_UNSIGNED[array.dtype.itemsize])
    return words.sum(dtype=_WORD)


def _owner(array: Any) -> Any:
    """The array of `array`'s own kind that owns its memory (a view's base, its base's base, …;
    a NumPy array over a bytes object or a file's map is its own owner)."""
    while type(array.base) is type(array):
        array = array.base
    return array


def version(array: Any) -> int:
    """How many times the library wrote into `array`'s memory in place (``bump``)."""
    return _versions.get(id(_owner(array)), 0)


def bump(array: Any) -> None:
    """Note that the library wrote into `array` in place (an optimizer's step): a graph that saved
    it before refuses its backward, also on a device whose arrays are not fingerprinted."""
    if type(array) is np.ndarray:       # fingerprinted: a write into it is seen anyway
        return
    key = id(_owner(array))
    _versions[key] = _versions.get(key, 0) + 1


def seal(out: Any, inputs: tuple) -> None:
    """Make a NumPy output of more than 64 KiB read-only when its memory is the op's own, not an
    input's (a reshape returns a view of its input's): no one else holds it yet, and from now on
    no one can write into it, so it needs no fingerprint. The output and every array between it
    and the memory's owner are sealed (a view made before its base was sealed would stay
    writable). A smaller output is left as it is: copying its bytes costs less than the flag."""
    if type(out) is not np.ndarray or out.nbytes <= _SMALL_BYTES:
        return
    root = out if out.base is None else _owner(out)
    for t in inputs:
        if t is not None:
            memory = t.data
            if memory is root or (memory.base is not None and _owner(memory) is root):
                return
    array: Any = out
    while type(array) is np.ndarray:
        array.setflags(write=False)
        array = array.base


def watch(saved: Mapping[str, Any], inputs: tuple, out: Any) -> tuple[tuple[int | None, Any, Any], ...]:
    """(input index or None for the output, array, its fingerprint or ("version", n)) for each saved
    array that is an input's or the output's data and that a user can still write into (a sealed
    array cannot be), each array once."""
    watched: list[tuple[int | None, Any, Any]] = []
    for array in saved.values():
        if array is out:
            index = None
        else:
            for index, t in enumerate(inputs):  # noqa: B007 -- `index` is read after the break
                if t is not None and t.data is array:     # the first input whose data is `array`
                    break
            else:
                continue                    # a private residual, or None
        for _, seen, _ in watched:
            if seen is array:
                break                       # saved twice (x * x): watched once
        else:
            if type(array) is not np.ndarray:
                watched.append((index, array, ("version", version(array))))
            elif array.nbytes <= _SMALL_BYTES:          # the commonest case first: a copy of its bytes
                watched.append((index, array, array.tobytes()))
            elif array.flags.writeable or (array.base is not None and _owner(array).flags.writeable):
                watched.append((index, array, fingerprint(array)))
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
        if type(then) is bytes and array.nbytes <= _SMALL_BYTES:
            now: Any = array.tobytes()
        elif type(then) is tuple:
            now = ("version", version(array))
        else:
            now = fingerprint(array)
        if now != then:
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
