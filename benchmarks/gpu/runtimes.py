"""How each library's GPU work is waited for and its memory read: one Runtime per library.

A call on the GPU returns before its kernels finish, so a clock is read only after the library has
synchronized the device. Peak memory is each library's allocator's high-water mark over one step:
for CuPy, its memory pool, counted by a memory hook (every block the pool hands out and gets back);
for PyTorch, ``torch.cuda.max_memory_allocated``. Both count the blocks arrays hold (rounded up to
the allocator's sizes), not what a pool keeps cached for reuse, and not the cuBLAS workspaces or
compiled kernels outside the allocators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

__all__ = ["Peak", "PeakCounter", "Place", "Runtime", "cupy_runtime", "host_runtime", "torch_runtime"]


@dataclass(frozen=True)
class Peak:
    """Bytes a library's arrays held before a step (weights, optimizer state, inputs) and at the
    step's high point."""

    before: int
    peak: int

    @property
    def step(self) -> int:
        """What the step itself added at its high point: activations, gradients, temporaries."""
        return self.peak - self.before


@dataclass(frozen=True)
class Runtime:
    """A library's device: `synchronize` waits for its queued work, `peak_of(step)` runs the step
    once and gives its Peak (None where nothing is measured: the host), `release` hands cached
    blocks back to the driver (between rows, so that one row's arrays do not crowd the next)."""

    name: str
    synchronize: Callable[[], None]
    peak_of: Callable[[Callable[[], object]], Peak | None]
    release: Callable[[], None]


@dataclass(frozen=True)
class Place:
    """Where a row's sides run: our device ("cuda"; in the tests the stand-in) and its runtime,
    PyTorch's device and runtime, and the host's runtime (our CPU side of the reverse row)."""

    ours_device: str
    ours: Runtime
    torch_device: str
    torch: Runtime
    host: Runtime


class PeakCounter:
    """Bytes in use, followed block by block from a starting count, and the most seen."""

    def __init__(self, in_use: int):
        self.before = self.in_use = self.peak = in_use

    def take(self, size: int) -> None:
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def give(self, size: int) -> None:
        self.in_use -= size

    def result(self) -> Peak:
        return Peak(self.before, self.peak)


def host_runtime() -> Runtime:
    """The CPU (and the stand-in device of the tests): nothing queued, no memory read."""
    def run_unmeasured(step: Callable[[], object]) -> None:
        step()
    return Runtime("host", lambda: None, run_unmeasured, lambda: None)


def cupy_runtime(cupy: ModuleType) -> Runtime:
    """CuPy on its current device: its default memory pool, counted by a memory hook."""
    pool = cupy.get_default_memory_pool()

    def synchronize() -> None:
        cupy.cuda.Device().synchronize()

    class Counting(cupy.cuda.MemoryHook):
        """Counts into `counter` the blocks the pool hands out (a failed malloc's pointer is 0) and
        gets back."""

        name = "benchmarks.gpu peak"

        def __init__(self, counter: PeakCounter):
            self.counter = counter

        def malloc_postprocess(self, **block) -> None:
            if block["mem_ptr"]:
                self.counter.take(block["mem_size"])

        def free_postprocess(self, **block) -> None:
            self.counter.give(block["mem_size"])

    def peak_of(step: Callable[[], object]) -> Peak:
        synchronize()
        counter = PeakCounter(pool.used_bytes())
        with Counting(counter):
            step()                      # what it gives (a loss and its graph) is freed in the count
            synchronize()
        return counter.result()
    return Runtime("CuPy", synchronize, peak_of, pool.free_all_blocks)


def torch_runtime(torch: ModuleType) -> Runtime:
    """PyTorch on its current CUDA device: its caching allocator's statistics."""
    def synchronize() -> None:
        torch.cuda.synchronize()

    def peak_of(step: Callable[[], object]) -> Peak:
        synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        synchronize()
        return Peak(before, torch.cuda.max_memory_allocated())
    return Runtime("PyTorch", synchronize, peak_of, torch.cuda.empty_cache)
