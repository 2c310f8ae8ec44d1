"""keep_freed_memory: after it, arrays made and freed again and again reuse the same pages (no new
page faults), where by default each round maps fresh pages. Run in child processes, so that this
test process keeps glibc's default malloc."""

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="keep_freed_memory only sets glibc's malloc")

PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from tinygrad_attn.training.host_memory import keep_freed_memory
    assert keep_freed_memory() is True
def faults_of_one_round():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(2**20, dtype=np.float32) for _ in range(8)]      # 8 arrays of 4 MiB, filled
    del arrays
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_round()
print(min(faults_of_one_round() for _ in range(5)))
"""


def page_faults_per_round(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(run.stdout)


def test_freed_arrays_are_reused_instead_of_mapped_again():
    pages = 8 * 4 * 2**20 // 4096
    assert page_faults_per_round("default") > pages // 8      # fresh pages every round
    assert page_faults_per_round("keep") < pages // 100       # the same pages again
