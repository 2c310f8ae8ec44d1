"""Reference solution to exercise 5: central differences, the numeric gradient.

Write `numeric_gradient(f, x, eps)`: for every element i of x (any shape), nudge it by ±ε and
take the central difference (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε. `f` takes an array of x's shape
and returns a float. Change x in place and put each element back afterwards (x must end as it
began), or work on a copy. x may be a transposed view: x.reshape(-1) is then a copy, and writing
it leaves x unchanged. docs/gradient_checking.md says why central, and how to choose ε.

Check: python -m tinygrad_attn check exercises/05_numeric_gradient.py
"""

import numpy as np


def numeric_gradient(f, x, eps=1e-6):
    """df/dx by central differences: an array of x's shape."""
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):       # a multi-index writes x itself, whatever its layout
        original = x[i]
        x[i] = original + eps
        plus = f(x)
        x[i] = original - eps
        minus = f(x)
        x[i] = original
        grad[i] = (plus - minus) / (2 * eps)
    return grad
