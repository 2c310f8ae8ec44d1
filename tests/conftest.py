"""Shared fixtures: a seeded generator and the device parameter.

"cuda" runs on CuPy and a GPU where they are present; elsewhere (CI) it runs on the strict
CuPy stand-in of ``tests/strict_backend.py``, whose arrays refuse implicit host conversion.
"""

import numpy as np
import pytest
import strict_backend

import tinygrad_attn as ta

REAL_CUDA = ta.cuda_available()
DEVICES = ["cpu", "cuda"]


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
