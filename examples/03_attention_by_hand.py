"""Attention by hand: the worked example of docs/worked_example.md, every matrix from the engine.

One head, 3 tokens, d_model = 4, d_k = d_v = 2: the forward (Q, K, V, QKᵀ, S, P, O), then one
backward with a given dO (dV, dP, dS, dQ, dK, dW_Q, dW_K, dW_V, dX), printed to 4 decimals.
Run: python examples/03_attention_by_hand.py
"""

import numpy as np
from blas_threads import one_blas_thread

import tinygrad_attn as ta
from tinygrad_attn import functional as F

print(one_blas_thread())

np.set_printoptions(precision=4, suppress=True, floatmode="fixed")
X = np.array([[1.0, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 1]])
W = {"W_Q": [[1.0, 0], [0, 1], [1, 0], [0, 1]], "W_K": [[0.5, 0], [0, 0.5], [0, 1], [1, 0]],
     "W_V": [[1.0, 0], [0, 1], [0, 0], [1, 1]]}
dO = np.array([[1.0, 0], [0, -1], [0.5, 0.5]])

x = ta.Tensor(X, requires_grad=True)
w_q, w_k, w_v = (ta.Tensor(np.array(w), requires_grad=True) for w in W.values())
q, k, v = x @ w_q, x @ w_k, x @ w_v
out, p = F.scaled_dot_product_attention(q, k, v, return_weights=True)
out.backward(dO)

# Gradients of the intermediates: make each one the leaf of a small graph with the same dO.
Q, K, V = q.numpy(), k.numpy(), v.numpy()
leaves = [ta.Tensor(a, requires_grad=True) for a in (Q, K, V)]
F.scaled_dot_product_attention(*leaves).backward(dO)
p_leaf = ta.Tensor(p.numpy(), requires_grad=True)
(p_leaf @ ta.Tensor(V)).backward(dO)
s_leaf = ta.Tensor(Q @ K.T / np.sqrt(2), requires_grad=True)
(F.softmax(s_leaf) @ ta.Tensor(V)).backward(dO)

shown = [("value Q = X W_Q", Q), ("value K = X W_K", K), ("value V = X W_V", V),
         ("value Q Kᵀ (unscaled scores)", Q @ K.T), ("value S = Q Kᵀ / √2 (scaled scores)", s_leaf.numpy()),
         ("value P = softmax(S) (rows sum to 1)", p.numpy()), ("value O = P V", out.numpy()),
         ("given dO = ∂L/∂O", dO), ("gradient dV = Pᵀ dO", leaves[2].grad),
         ("gradient dP = dO Vᵀ", p_leaf.grad),
         ("gradient dS = P ⊙ (dP − rowsum(dP ⊙ P))", s_leaf.grad),
         ("gradient dQ = s · dS K", leaves[0].grad), ("gradient dK = s · dSᵀ Q", leaves[1].grad),
         ("gradient dW_Q = Xᵀ dQ", w_q.grad), ("gradient dW_K = Xᵀ dK", w_k.grad),
         ("gradient dW_V = Xᵀ dV", w_v.grad), ("gradient dX = dQ W_Qᵀ + dK W_Kᵀ + dV W_Vᵀ", x.grad)]
for label, matrix in shown:
    print(f"{label}  {matrix.shape}\n{matrix}\n")
assert np.allclose(x.grad, leaves[0].grad @ w_q.data.T + leaves[1].grad @ w_k.data.T
                   + leaves[2].grad @ w_v.data.T)
print("dX is the sum of its three paths: checked")
