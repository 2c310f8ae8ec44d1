"""Backprop by hand: build a small expression, run backward, and check each gradient on paper.

    L = Σ tanh(x @ w) ⊙ c        x (2, 3), w (3, 2), c a fixed (2, 2) weighting

By the chain rule, with h = x @ w and t = tanh h:
    dL/dt = c,  dL/dh = c ⊙ (1 − t²),  dL/dw = xᵀ · dL/dh,  dL/dx = dL/dh · wᵀ
Run: python examples/01_backprop_by_hand.py
"""

import numpy as np
from blas_threads import one_blas_thread

import tinygrad_attn as ta

print(one_blas_thread())

x = ta.Tensor([[1.0, -2.0, 0.5], [0.0, 1.5, -1.0]], requires_grad=True)
w = ta.Tensor([[0.3, -0.1], [0.2, 0.4], [-0.5, 0.1]], requires_grad=True)
c = np.array([[1.0, -1.0], [2.0, 0.5]])

loss = ((x @ w).tanh() * c).sum()
loss.backward()
print("loss     =", round(loss.item(), 6))
print("dL/dx    =\n", x.grad)
print("dL/dw    =\n", w.grad)

# The same gradients written out by hand with NumPy.
t = np.tanh(x.data @ w.data)
grad_h = c * (1 - t**2)
np.testing.assert_allclose(x.grad, grad_h @ w.data.T, rtol=1e-5)
np.testing.assert_allclose(w.grad, x.data.T @ grad_h, rtol=1e-5)
print("hand-derived gradients match backward()")

# And both against central differences in float64.
print("gradcheck:", ta.gradcheck(lambda a, b: (a @ b).tanh() * c, [x, w]))
