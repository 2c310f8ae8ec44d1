"""Shared fixtures: a seeded generator and the device parameter (cuda only where it works)."""

import numpy as np
import pytest

import tinygrad_attn as ta

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not ta.cuda_available(), reason="needs CuPy and a GPU"))]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seeded():
    ta.manual_seed(0)
