"""Exercise 5: central differences, the numeric gradient every backward is checked against.

Write `numeric_gradient(f, x, eps)`: for every element i of x (any shape), nudge it by ±ε and
take the central difference (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε. `f` takes an array of x's shape
and returns a float. Change x in place and put each element back afterwards (x must end as it
began), or work on a copy. x may be a transposed view: x.reshape(-1) is then a copy, and writing
it leaves x unchanged. docs/gradient_checking.md says why central, and how to choose ε.

Check: python -m tinygrad_attn check exercises/05_numeric_gradient.py
"""

import numpy as np  # noqa: F401  (you will need it)


def numeric_gradient(f, x, eps=1e-6):
    """df/dx by central differences: an array of x's shape."""
    raise NotImplementedError("return an array g with g[i] = (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε")
