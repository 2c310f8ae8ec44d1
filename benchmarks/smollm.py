"""Forward + backward of a real-sized model on 32 tokens: a random model shaped like SmolLM-135M
(Llama family: 30 layers, width 576, 9 heads, 3 key/value heads, SwiGLU width 1536, vocabulary
49152, tied embeddings), ours beside transformers' eager LlamaForCausalLM, float32.

    python -m benchmarks.smollm [--rounds N] [--threads N]     (also a workload of python -m
                                                                 benchmarks: smollm)

Each side runs in its own fresh process, once with one BLAS/intra-op thread and once with all of
them (the CPU count): it builds the model, takes one untimed step, then times `rounds` steps
(cross-entropy of the next token, backward into every parameter; wall clock, median). Peak memory
is the process's peak resident size minus its size after the imports: the model, its gradients
and a step's activations, without the library itself.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence

SHAPE = dict(vocab_size=49152, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
             num_key_value_heads=3, intermediate_size=1536, max_position_embeddings=2048)
TOKENS = 32


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024        # Linux: KiB


def _ours(threads: int):
    import numpy as np

    import tinygrad_attn as ta
    from tinygrad_attn import functional as F

    s = SHAPE
    base = _resident_mb()
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(s["vocab_size"], s["hidden_size"], s["num_attention_heads"],
                                  s["num_hidden_layers"], s["max_position_embeddings"],
                                  d_ff=s["intermediate_size"], norm="rms", mlp="swiglu", positions="rope",
                                  n_kv_heads=s["num_key_value_heads"], attn_bias=False, head_bias=False,
                                  norm_eps=1e-5, tie_embeddings=True).eval()
    ids = np.random.default_rng(0).integers(0, s["vocab_size"], (1, TOKENS))

    def step():
        model.zero_grad()
        logits = model(ids)
        F.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    return base, step


def _torch(threads: int):
    import torch
    import transformers

    torch.set_num_threads(threads)
    base = _resident_mb()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SHAPE, tie_word_embeddings=True, rms_norm_eps=1e-5)
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).float().eval()
    ids = torch.randint(0, SHAPE["vocab_size"], (1, TOKENS))

    def step():
        model.zero_grad(set_to_none=True)
        logits = model(ids).logits
        torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    return base, step


def child(side: str, threads: int, rounds: int) -> dict:
    """One side's figures, in this process: median step seconds and peak MB above the imports."""
    base, step = (_ours if side == "ours" else _torch)(threads)
    step()                                                  # untimed: first-touch of every buffer
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    times.sort()
    return {"seconds": times[len(times) // 2], "peak_mb": _peak_mb() - base}


def run_side(side: str, threads: int, rounds: int) -> dict:
    """`child` in a fresh process with `threads` BLAS/OpenMP threads (and kernels.parallel's)."""
    from .harness import ROOT
    from .options import thread_environment

    env = {**os.environ, **thread_environment(threads)}
    command = [sys.executable, "-m", "benchmarks.smollm", "--child", side, "--threads", str(threads),
               "--rounds", str(rounds)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.splitlines()[-1])


def smollm_rows(sides: Sequence[str], rounds: int, threads: int) -> list:
    """The table's rows: one per thread count, each side's step time and peak memory."""
    from .harness import Row

    rows = []
    for count in sorted({1, threads}):
        figures = {side: run_side(side, count, rounds) for side in ("ours", "torch") if side in sides}
        ours = figures["ours"]
        row = Row(f"SmolLM-135M-shaped random model, forward + backward on {TOKENS} tokens (float32), "
                  f"{count} thread{'s' if count > 1 else ''}",
                  {"ours": f"{ours['seconds'] * 1e3:.0f} ms, {ours['peak_mb']:.0f} MB"})
        if "torch" in figures:
            theirs = figures["torch"]
            row.cells["torch"] = f"{theirs['seconds'] * 1e3:.0f} ms, {theirs['peak_mb']:.0f} MB"
            row.note = (f"ours / transformers eager: time {ours['seconds'] / theirs['seconds']:.2f}×, "
                        f"peak memory {ours['peak_mb'] / theirs['peak_mb']:.2f}×")
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.smollm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed steps per process (default 5)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="the 'all threads' count (default: the CPU count)")
    parser.add_argument("--child", choices=("ours", "torch"), help=argparse.SUPPRESS)   # a side's process
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.threads, args.rounds)))
        return 0
    from .__main__ import installed_sides
    from .harness import format_table

    sides, missing = installed_sides(["ours", "torch"])
    for line in missing:
        print(line)
    rows = smollm_rows(sides, args.rounds, args.threads)
    print(f"Each side in its own process; wall-clock medians of {args.rounds} steps; memory: peak resident "
          f"size above the process's size after its imports")
    print(format_table(rows, sides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
