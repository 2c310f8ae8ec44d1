"""The rule that picks a model's attention kernel (tinygrad_attn/nn/attention_choice.py): flash from
512 keys on the CPU; fused on the GPU until one call's score matrix passes a 64th of its memory."""

import numpy as np
import pytest

from tinygrad_attn import functional as F
from tinygrad_attn.nn import TinyTransformer, attention_choice
from tinygrad_attn.nn.attention_choice import FLASH_FROM, attention_kernel

GIB = 2**30


def test_the_cpu_runs_flash_from_512_keys_whatever_the_batch():
    assert FLASH_FROM == 512
    for elements in (1, 10**12):
        assert attention_kernel("cpu", elements, 4, 511) == "fused"
        assert attention_kernel("cpu", elements, 4, 512) == "flash"


def test_the_gpu_stays_fused_until_one_calls_scores_take_a_64th_of_its_memory(monkeypatch):
    monkeypatch.setattr(attention_choice, "gpu_memory", lambda: 64 * GIB)      # a share of 1 GiB
    assert attention_kernel("cuda", GIB // 4, 4, 100_000) == "fused"            # exactly 1 GiB of float32
    assert attention_kernel("cuda", GIB // 4 + 1, 4, 16) == "flash"             # one element more
    assert attention_kernel("cuda", GIB // 4 + 1, 2, 16) == "fused"             # in float16: half the bytes
    b, h = 4, 8                                                                 # issue 41's attention rows
    monkeypatch.setattr(attention_choice, "gpu_memory", lambda: 141 * GIB)     # an H200
    assert [attention_kernel("cuda", b * h * n * n, 4, n) for n in (1024, 4096)] == ["fused", "fused"]
    monkeypatch.setattr(attention_choice, "gpu_memory", lambda: 16 * GIB)
    assert [attention_kernel("cuda", b * h * n * n, 4, n) for n in (1024, 4096)] == ["fused", "flash"]


def test_the_gpus_memory_is_its_total_not_what_is_free(strict_cuda):
    attention_choice.gpu_memory.cache_clear()
    try:
        assert attention_choice.gpu_memory() == strict_cuda.cuda.Device().mem_info[1] == 16 * GIB
    finally:
        attention_choice.gpu_memory.cache_clear()


@pytest.mark.parametrize("memory, on_the_gpu", [(16 * GIB, "fused"), (1, "flash")])
def test_a_model_runs_the_kernel_the_rule_names(device, monkeypatch, memory, on_the_gpu):
    """512 keys: flash on the CPU whatever the memory; on "cuda" fused while the scores fit in a
    64th of the GPU's memory, flash when they do not."""
    monkeypatch.setattr(attention_choice, "gpu_memory", lambda: memory)
    calls = []
    flash = F.flash_attention
    monkeypatch.setattr(F, "flash_attention", lambda *a, **k: calls.append(a[0].shape) or flash(*a, **k))
    model = TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=FLASH_FROM).to(device)
    model(np.random.default_rng(0).integers(0, 5, (1, FLASH_FROM)))
    assert ("flash" if calls else "fused") == ("flash" if device == "cpu" else on_the_gpu)
