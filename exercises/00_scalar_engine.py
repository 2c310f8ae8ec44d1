"""Exercise 0: the two functions at the heart of backprop, on a tiny scalar engine.

`Value` is given: one number, its gradient, and how it was made (its parents and the local
derivative d(self)/d(parent) of each). Write `toposort(root)`: every Value that `root` depends
on, each once, every parent before the values made from it (root last). Use an explicit stack,
not recursion: a chain 3,000 operations deep must work. Then `backward(root)`: root.grad = 1,
then, walking that order backwards, add local_grad · grad into each parent's grad (a value
used twice gets both). docs/how_the_engine_works.md shows how the real engine does both.

Check: python -m tinygrad_attn check exercises/00_scalar_engine.py
"""

import math


class Value:
    """One number in an expression: data, grad = dL/d(this value), and how it was made."""

    def __init__(self, data, parents=(), local_grads=()):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents            # the Values this one was computed from
        self.local_grads = local_grads    # d(this value)/d(parent), one per parent

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other), (1.0, 1.0))

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other), (other.data, self.data))

    def __sub__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data - other.data, (self, other), (1.0, -1.0))

    def tanh(self):
        t = math.tanh(self.data)
        return Value(t, (self,), (1.0 - t * t,))

    def exp(self):
        e = math.exp(self.data)
        return Value(e, (self,), (e,))


def toposort(root):
    """Every Value `root` depends on (itself included), each once, parents first, as a list."""
    raise NotImplementedError("return the list of values, parents before children, root last")


def backward(root):
    """Set .grad of every Value `root` depends on to d(root)/d(value)."""
    raise NotImplementedError("seed root.grad = 1, then pass gradients back in reverse toposort order")
