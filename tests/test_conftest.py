"""The test session's own settings: one BLAS thread (see conftest.py)."""

import os

from conftest import THREAD_VARIABLES, openblas_thread_functions


def test_the_session_runs_one_blas_thread():
    """In this process, and in the environment the processes a test starts inherit."""
    assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)
    functions = openblas_thread_functions()
    assert functions is None or functions[0]() == 1
