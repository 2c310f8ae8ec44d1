"""Train the same TinyTransformer twice on `sort`, with and without the 1/√d_k scale.

One head of width d_k = 64 per layer (d_model 64, 2 layers), so the unscaled scores are
√64 = 8 times the scaled ones. Same seed, same batches, 300 steps each; printed:
the loss on the answer tokens (mean of 20 steps) at a few points and at the end, and the
held-out exact match.
Run: python examples/05_train_without_scaling.py [--steps 300] [--eval-size 200]
"""

import argparse
import time

import numpy as np
from blas_threads import one_blas_thread

from tinygrad_attn.training import TrainConfig, accuracy, make_model, train
from tinygrad_attn.training.tasks import get_task

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--task", default="sort")
parser.add_argument("--eval-size", type=int, default=200, help="held-out prompts for the accuracy")
args = parser.parse_args()
print(one_blas_thread())

config = TrainConfig(steps=args.steps, warmup=min(30, args.steps), d_model=64, num_heads=1, num_layers=2,
                     eval_size=args.eval_size)
checkpoints = sorted({c for c in (50, 100, 200, 300, 600) if c <= args.steps} | {args.steps})
print(f"task {args.task}, {args.steps} steps, d_model 64, 1 head (d_k = 64), 2 layers, seed 0")
print(f"{'scale':>14} | " + " ".join(f"loss@{c:<4}" for c in checkpoints) + " | held-out | time")
for label, scale in (("1/√d_k = 0.125", None), ("1 (none)", 1.0)):
    model = make_model(args.task, config)                           # same seed: same initial weights
    for block in model.blocks:
        block.attn.scale = scale
    start = time.perf_counter()
    history = train(model, args.task, config)
    seconds = time.perf_counter() - start
    losses = [float(np.mean(history.loss[max(0, c - 20):c])) for c in checkpoints]
    held_out = accuracy(model, args.task, get_task(args.task).held_out(args.eval_size))
    print(f"{label:>14} | " + " ".join(f"{x:9.4f}" for x in losses)
          + f" | {held_out:8.1%} | {seconds:4.1f} s")
