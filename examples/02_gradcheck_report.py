"""Gradcheck every registered op on every one of its cases and print the worst errors.

Inputs are built as the test suite builds them (float64, the same seeded generator). Elements
whose true gradient is about 0 make a relative error meaningless, so the report gives the worst
absolute error and the worst relative error among elements with |numeric| ≥ 1e-3.
Run: python examples/02_gradcheck_report.py
"""

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn.gradcheck import case_inputs, gradient_pairs
from tinygrad_attn.ops import REGISTRY
from tinygrad_attn.tensor import apply


def main() -> None:
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


if __name__ == "__main__":
    main()
