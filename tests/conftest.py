"""Shared fixtures: a seeded generator, the device parameter, one BLAS thread for the session.

"cuda" runs on CuPy and a GPU where they are present; elsewhere (CI) it runs on the strict
CuPy stand-in of ``tests/strict_backend.py``, whose arrays refuse implicit host conversion.
"""

import ctypes
import os

import numpy as np
import pytest
import strict_backend

import tinygrad_attn as ta

REAL_CUDA = ta.cuda_available()
DEVICES = ["cpu", "cuda"]


THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def openblas_thread_functions():
    """OpenBLAS's (get, set) thread-count functions in this process, or None (another BLAS)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            get, put = (getattr(lib, f"{prefix}_{verb}_num_threads{suffix}", None) for verb in ("get", "set"))
            if get is not None and put is not None:
                return get, put
    return None


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """One BLAS/OpenMP thread for the session, in this process and in those the tests start.

    The tests' arrays are small: a second thread gains nothing, and on a loaded machine threads
    that spin waiting for a busy core made a training step 10 times slower. Restored afterwards.
    """
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    functions = openblas_thread_functions() if os.path.exists("/proc/self/maps") else None
    before = functions[0]() if functions else None
    if functions:
        functions[1](1)
    yield
    if functions:
        functions[1](before)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def threads_line():
    """The line a command prints first, on stderr, in the suite (one BLAS thread, from the environment)."""
    from tinygrad_attn.commands.thread_count import describe
    from tinygrad_attn.kernels.threads import thread_count

    return describe(thread_count()) + "\n"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def strict_cuda():
    """The strict CuPy stand-in installed as the "cuda" device for one test."""
    with strict_backend.install() as module:
        yield module


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "cuda" and not REAL_CUDA:
        request.getfixturevalue("strict_cuda")
    return request.param


@pytest.fixture(autouse=True)
def _seeded():
    ta.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_dtype_kept():
    """The library's default dtype as each test found it. A test that changes it (the benchmark
    sides set it for their own process) would otherwise change every later test in this process:
    after one, a training run here was float64 and the resume test, which compares it with a run
    in a fresh (float32) process, saw losses 3e-7 apart."""
    before = ta.get_default_dtype()
    yield
    ta.set_default_dtype(before)
