"""Checking gradients: gradcheck every registered op, and choose the step ε by experiment.

Without arguments: every registered op on every one of its cases, with inputs built as the test
suite builds them (float64, the same seeded generator). Elements whose true gradient is about 0
make a relative error meaningless, so the report gives the worst absolute error and the worst
relative error among elements with |numeric| ≥ 1e-3.

With --epsilon: the error of central differences against the exact gradient of ⟨c, softmax(x)⟩
(5 logits, a random cotangent c) for ε = 1e-1 … 1e-12, in float64 and in float32. Large ε errs by
truncation (∝ ε²), small ε by round-off (∝ u / ε, u the unit round-off); --plot PATH draws it
(docs/img/gradcheck_epsilon.png is made by --epsilon --plot docs/img/gradcheck_epsilon.png).
Run: python examples/02_gradcheck_report.py [--epsilon [--plot PATH]]
"""

import argparse

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.apply import apply
from tinygrad_attn.gradcheck import case_inputs, gradient_pairs
from tinygrad_attn.ops import REGISTRY

EPSILONS = [10.0 ** -k for k in range(1, 13)]


def report() -> None:
    rng = np.random.default_rng(1234)
    worst_abs = worst_rel = 0.0
    n_cases = 0
    print(f"{'op':30s} {'cases':>5s} {'max abs err':>12s} {'max rel err':>12s}")
    for name, op in sorted(REGISTRY.items()):
        op_abs = op_rel = 0.0
        for case in op.cases:
            ta.manual_seed(0)
            inputs = case_inputs(case, rng)
            pairs = gradient_pairs(lambda *xs, o=op, c=case: apply(o, *xs, **c.params), inputs)
            for _, analytic, numeric in pairs:
                diff = np.abs(analytic - numeric)
                op_abs = max(op_abs, float(diff.max(initial=0.0)))
                big = np.abs(numeric) >= 1e-3
                if big.any():
                    op_rel = max(op_rel, float((diff[big] / np.abs(numeric[big])).max()))
            n_cases += 1
        worst_abs, worst_rel = max(worst_abs, op_abs), max(worst_rel, op_rel)
        print(f"{name:30s} {len(op.cases):5d} {op_abs:12.2e} {op_rel:12.2e}")
    print(f"\n{len(REGISTRY)} ops, {n_cases} cases; worst abs error {worst_abs:.2e}, "
          f"worst relative error {worst_rel:.2e}")


def epsilon_errors(dtype: type) -> list[float]:
    """Max |numeric − exact| over the 5 elements of x, for each ε, with f evaluated in `dtype`."""
    rng = np.random.default_rng(0)
    x, c = rng.standard_normal(5), rng.standard_normal(5)
    t = ta.Tensor(x, requires_grad=True, dtype=np.float64)
    (F.softmax(t) * ta.Tensor(c, dtype=np.float64)).sum().backward()
    exact = t.grad

    def f(point: np.ndarray) -> float:
        return float((F.softmax(ta.Tensor(point.astype(dtype), dtype=dtype)).data * c.astype(dtype)).sum())

    errors = []
    for eps in EPSILONS:
        step = np.eye(5) * eps
        numeric = np.array([(f(x + step[i]) - f(x - step[i])) / (2 * eps) for i in range(5)])
        errors.append(float(np.abs(numeric - exact).max()))
    return errors


def epsilon_table(errors: dict[str, list[float]]) -> str:
    """The errors as a table, one row per ε, and where each dtype's error is smallest."""
    lines = ["max |numeric − exact| of d⟨c, softmax(x)⟩/dx, 5 logits, central differences",
             f"{'ε':>8} {'float64':>10} {'float32':>10}"]
    lines += [f"{eps:8.0e} {errors['float64'][i]:10.1e} {errors['float32'][i]:10.1e}"
              for i, eps in enumerate(EPSILONS)]
    for name, errs in errors.items():
        best = int(np.argmin(errs))
        lines.append(f"{name}: smallest error {errs[best]:.1e} at ε = {EPSILONS[best]:.0e}")
    return "\n".join(lines)


def draw_epsilon(ax, errors: dict[str, list[float]]) -> None:
    """The errors against ε on log-log axes (ε shrinking to the right), with the ε² and u / ε lines."""
    for name, errs in errors.items():
        ax.loglog(EPSILONS, errs, "o-", label=f"f computed in {name}")
    eps = np.array(EPSILONS)
    large, small = eps[eps >= 1e-6], eps[eps <= 1e-4]
    ax.loglog(large, 1.2e-2 * large ** 2, "k:", lw=1, label="truncation ∝ ε²")
    ax.loglog(small, 2e-16 / small, "k--", lw=1, label="float64 round-off ∝ u / ε")
    ax.axvline(1e-6, color="grey", lw=0.8)
    ax.text(8e-7, 3e-14, "ta.gradcheck's ε = 1e-6", fontsize=8, color="grey")
    ax.set_ylim(1e-14, 1)
    ax.set_xlabel("ε (step of the central difference)")
    ax.set_ylabel("max |numeric − exact gradient|")
    ax.set_title("Choosing ε: central differences on softmax")
    ax.invert_xaxis()
    ax.legend(fontsize=8, loc="lower left")


def epsilon_experiment(plot: str | None) -> None:
    errors = {"float64": epsilon_errors(np.float64), "float32": epsilon_errors(np.float32)}
    print(epsilon_table(errors))
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        draw_epsilon(ax, errors)
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        print(f"wrote {plot}")


def main() -> None:
    from blas_threads import one_blas_thread  # a sibling file: only when run as a script

    print(one_blas_thread())
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilon", action="store_true", help="the ε experiment instead of the op report")
    parser.add_argument("--plot", help="with --epsilon: write the plot to this PNG file")
    args = parser.parse_args()
    epsilon_experiment(args.plot) if args.epsilon else report()


if __name__ == "__main__":
    main()
