"""Length generalisation: train `reverse` on lists of 1-8 digits, test on 9-12, learned positions vs RoPE.

Two TinyTransformers, identical but for how they know positions: a learned position table, or
rotary embeddings on Q and K (no table). Same seed, same batches (the `reverse` task's training
lists, 1-8 digits). Then each reverses lists it never saw: 8 digits (held-out lists, in
distribution) and 9, 10, 11, 12 digits (longer than any training list).

The learned table has max_len = 26 rows, enough for 12 digits, "|", 12 digits and ".": training
sequences are at most 17 tokens, so rows 17-25 are never trained (they keep their random
initial values) and every answer longer than 8 digits reads at least one of them. RoPE has no
table: position p turns each pair of Q and K features by p · base^(−2i/D), for any p.

Printed per length: exact match (the whole answer right) and token accuracy (the share of answer
tokens right, "." included), greedy decoding, 200 lists per length.
Run: python examples/09_length_generalisation.py [--steps 1000]
"""

import argparse
import time

import numpy as np
from blas_threads import one_blas_thread

from tinygrad_attn.creation import manual_seed
from tinygrad_attn.nn import TinyTransformer
from tinygrad_attn.training.config import TrainConfig
from tinygrad_attn.training.loop import train
from tinygrad_attn.training.tasks import END, SEP, VOCAB, get_task

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--lists", type=int, default=200, help="test lists per length")
args = parser.parse_args()
print(one_blas_thread())

LENGTHS = (8, 9, 10, 11, 12)
MAX_LEN = 2 * (max(LENGTHS) + 1)              # 12 digits, "|", 12 digits, "."
task = get_task("reverse")
config = TrainConfig(steps=args.steps, d_model=32, batch_size=32, warmup=40)


def test_lists(length: int) -> np.ndarray:
    """`args.lists` prompts of `length` digits then "|"; for 8, the task's held-out lists (never trained)."""
    if length <= 8:
        prompts = [p for p in task.held_out(2000) if len(p) == length + 1][:args.lists]
        return np.array(prompts)
    digits = np.random.default_rng(length).integers(0, 10, (args.lists, length))
    return np.concatenate([digits, np.full((args.lists, 1), SEP)], axis=1)


def scores(model: TinyTransformer, prompts: np.ndarray) -> tuple[float, float]:
    """(exact match, token accuracy) of the greedy answers to `prompts`."""
    length = prompts.shape[1] - 1
    expected = np.concatenate([prompts[:, -2::-1], np.full((len(prompts), 1), END)], axis=1)
    answers = model.generate(prompts, length + 1).numpy()[:, length + 1:]
    right = answers == expected
    return float(right.all(axis=1).mean()), float(right.mean())


print(f"reverse, {args.steps} steps on lists of 1-8 digits, d_model 32, 4 heads, 2 layers, seed 0; "
      f"{args.lists} test lists per length, greedy decoding")
print(f"{'positions':>9} | " + " | ".join(f"{n:>2} digits: exact / tokens" for n in LENGTHS) + " | time")
for positions in ("learned", "rope"):
    manual_seed(config.seed)
    model = TinyTransformer(len(VOCAB), config.d_model, config.num_heads, config.num_layers, max_len=MAX_LEN,
                            positions=positions)
    start = time.perf_counter()
    train(model, task, config)
    seconds = time.perf_counter() - start
    model.eval()
    cells = [scores(model, test_lists(n)) for n in LENGTHS]
    print(f"{positions:>9} | " + " | ".join(f"{exact:>14.1%} / {tokens:>6.1%}" for exact, tokens in cells)
          + f" | {seconds:.0f} s")
