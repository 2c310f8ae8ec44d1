"""Why divide the scores by √d_k: measure softmax saturation with and without the scale.

For each d_k in 4 … 4096, Q and K (n = 32 tokens) get independent N(0, 1) entries, so each
q·k has variance d_k. For both scales (1/√d_k, the default, and 1.0, none) the engine computes
P = softmax(S) and, for a random dO, the gradients dP and dS (each as the leaf of a small graph)
and dQ. Printed per d_k and scale, averaged over 8 draws: the mean of each row's largest weight
(max P; 1/n = 0.031 is uniform, 1 is one-hot), the mean row entropy of P in nats (log 32 = 3.47
is uniform, 0 one-hot), ‖dS‖/‖dP‖ (how much gradient survives softmax's backward) and ‖dQ‖.
Run: python examples/04_why_sqrt_dk.py [--plot docs/img/sqrt_dk.png]
"""

import argparse

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F

D_KS = (4, 16, 64, 256, 1024, 4096)
N, D_V, DRAWS = 32, 8, 8


def measure(d_k: int, scaled: bool, rng: np.random.Generator) -> dict[str, float]:
    """Means over DRAWS of max P, entropy of P, ‖dS‖/‖dP‖ and ‖dQ‖ for one d_k and scale."""
    scale = 1 / np.sqrt(d_k) if scaled else 1.0
    rows = []
    for _ in range(DRAWS):
        Q, K = rng.standard_normal((N, d_k)), rng.standard_normal((N, d_k))
        V, dO = rng.standard_normal((N, D_V)), rng.standard_normal((N, D_V))
        s_leaf = ta.Tensor(scale * Q @ K.T, requires_grad=True)
        p = F.softmax(s_leaf)
        (p @ ta.Tensor(V)).backward(dO)                                 # s_leaf.grad = dS
        p_leaf = ta.Tensor(p.numpy(), requires_grad=True)
        (p_leaf @ ta.Tensor(V)).backward(dO)                            # p_leaf.grad = dP
        q = ta.Tensor(Q, requires_grad=True)
        F.scaled_dot_product_attention(q, ta.Tensor(K), ta.Tensor(V), scale=scale).backward(dO)
        P = p.numpy()
        entropy = -(P * np.log(np.where(P > 0, P, 1))).sum(axis=1).mean()
        rows.append((P.max(axis=1).mean(), entropy,
                     np.linalg.norm(s_leaf.grad) / np.linalg.norm(p_leaf.grad), np.linalg.norm(q.grad)))
    return dict(zip(("max_p", "entropy", "ds_over_dp", "dq"), np.mean(rows, axis=0)))


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("max_p", "mean of each row's max P", "1 = one-hot"),
              ("entropy", "entropy of P's rows (nats)", f"log {N} = uniform"),
              ("ds_over_dp", "‖dS‖ / ‖dP‖ (log scale)", "gradient through softmax"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, (key, title, note) in zip(axes, panels):
        for scaled, style, label in ((True, "o-", "S = QKᵀ/√d_k"), (False, "s--", "S = QKᵀ (no scaling)")):
            ax.plot(D_KS, [results[d, scaled][key] for d in D_KS], style, label=label, linewidth=2)
        ax.set_xscale("log", base=2)
        ax.set_xticks(D_KS, [str(d) for d in D_KS])
        ax.set_xlabel("d_k (log scale)", fontsize=11)
        ax.set_title(f"{title}\n({note})", fontsize=11)
        ax.grid(alpha=0.3)
    axes[0].axhline(1 / N, color="gray", linewidth=1, linestyle=":")
    axes[1].axhline(np.log(N), color="gray", linewidth=1, linestyle=":")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=10, loc="center right")
    fig.suptitle(f"Softmax saturation with and without √d_k scaling (n = {N} tokens, q, k ~ N(0, 1))",
                 fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    from blas_threads import one_blas_thread  # a sibling file: only when run as a script

    print(one_blas_thread())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="write the three panels to this PNG")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    results = {(d, scaled): measure(d, scaled, rng) for d in D_KS for scaled in (True, False)}
    print(f"n = {N} tokens, {DRAWS} draws; q, k entries N(0, 1); Var(q·k) = d_k")
    head = f"{'max P':>7} {'entropy':>8} {'‖dS‖/‖dP‖':>10} {'‖dQ‖':>7}"
    print(f"{'':>5} | {'scaled by 1/√d_k':^35} | {'no scaling':^35}")
    print(f"{'d_k':>5} | {head} | {head}")
    for d in D_KS:
        cells = " | ".join(f"{r['max_p']:7.3f} {r['entropy']:8.3f} {r['ds_over_dp']:10.2e} {r['dq']:7.2f}"
                           for r in (results[d, True], results[d, False]))
        print(f"{d:>5} | {cells}")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
