"""``python -m benchmarks.gpu``: tinygrad_attn on CuPy beside PyTorch on the same GPU, in one process.

Each row builds both sides from the same weights and inputs, takes a first step on each (CuPy
compiles its kernels there; the loss it gives is printed), reads each side's peak memory over one
step, then times the steps in interleaved rounds (ours, PyTorch, ours, …), each sample waiting
for the GPU to finish (``runtimes.py``). A line of the table compares two sides of a row: the
median over rounds of B's time / A's (above 1: A is faster) and A's peak memory / B's, against
the issue's targets (``rows.py``).
"""
