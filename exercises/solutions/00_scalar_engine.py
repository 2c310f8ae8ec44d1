"""Reference solution to exercise 0: the two functions at the heart of backprop, on a tiny scalar engine.

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
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        value, expanded = stack.pop()
        if expanded:                      # all of its parents are in `order` already
            order.append(value)
        elif id(value) not in visited:
            visited.add(id(value))
            stack.append((value, True))
            stack.extend((p, False) for p in value.parents if id(p) not in visited)
    return order


def backward(root):
    """Set .grad of every Value `root` depends on to d(root)/d(value)."""
    order = toposort(root)
    for value in order:
        value.grad = 0.0
    root.grad = 1.0
    for value in reversed(order):         # every consumer of a value runs before the value itself
        for parent, local in zip(value.parents, value.local_grads):
            parent.grad += local * value.grad
