"""Benchmarks of tinygrad_attn side by side with PyTorch (CPU eager): ``python -m benchmarks --help``.

Nothing here is part of the package: PyTorch is used only when it is importable, and this package
must not import NumPy at import time (``__main__`` sets the BLAS thread count first).
"""
