"""One BLAS thread for the examples, so that the figures they print are the same on every run.

A matrix product split over several BLAS threads adds its partial sums in an order that depends
on the thread count, which changes the last bits of the result; training is chaotic in the last
bits, so after a few hundred steps the accuracies differ (example 10's RoPE row once read
100 / 94.8 / 9.6 % with the default threads, 100 / 99.8 / 96.4 % with one). With threadpoolctl
(in the dev extra) each example limits BLAS to one thread and says so; without it, it says that
its figures may differ. The docs' figures were printed with one thread; another CPU (other BLAS
kernels) or another version of the engine can still move the last digits of a trained figure.
"""

import numpy as np  # noqa: F401  (loads the BLAS library that threadpoolctl limits)


def one_blas_thread() -> str:
    """Limit BLAS to one thread for the rest of the run; the line to print that says so."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return ("BLAS threads: the default (threadpoolctl is not installed: pip install threadpoolctl); "
                "trained figures may differ from the docs' in their last digits")
    threadpool_limits(limits=1, user_api="blas")
    return "BLAS threads: 1 (set by threadpoolctl): every run prints the same figures"
