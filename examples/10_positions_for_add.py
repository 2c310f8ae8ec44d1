"""Why `add` writes its numbers least significant digit first: learned positions and RoPE on two encodings.

`add` pads both numbers to 3 digits, so its prompt always has 8 tokens, and the sum is written
least significant digit first (each digit then needs only the carry of the digit before it).
Answer digit i (i = 0, 1, 2) is predicted at position 7 + i from digit i of each number and the
carry. Where those digits sit depends on how the numbers are written:

- most significant digit first (42 + 199 as "0 4 2 + 1 9 9 =", this project's encoding 1): at
  positions 2 − i and 6 − i, that is 5 + 2i and 1 + 2i tokens back, a distance that changes with i;
- least significant digit first ("2 4 0 + 9 9 1 =", what `add` does now): at positions i and
  4 + i, always 7 and 3 tokens back.

A learned position table tells each position where it is, so either layout works. RoPE gives
attention only the distance between a query and a key: with the first layout the model must work
out i from the tokens before it can look at the right distance; with the second, one distance
serves every digit.

Four TinyTransformers, each trained with `tinygrad-attn train add`'s defaults (3000 steps, d_model
64, 4 heads, 2 layers) for each seed, then scored on 500 held-out prompts (greedy decoding, the
whole answer right): the default model (LayerNorm, GELU, learned positions) and `--arch llama`
(RMSNorm, SwiGLU, RoPE, 2 kv heads for 4 query heads), each on both encodings.
Run: python examples/10_positions_for_add.py [--steps 3000] [--seeds 0 1 2]
"""

import argparse
import time

from blas_threads import one_blas_thread

from tinygrad_attn.training.config import TrainConfig
from tinygrad_attn.training.loop import make_model, train
from tinygrad_attn.training.tasks import ADD_DIGITS, EQUALS, PLUS, Add, accuracy, get_task


class AddMostSignificantFirst(Add):
    """Encoding 1 of `add`: the numbers most significant digit first, the sum least significant
    first; 42 + 199 is ``0 4 2 + 1 9 9 =`` → ``1 4 2 0 .``. (The held-out split is the same rule
    on the tokens, so it holds out other sums than `add`'s.)"""

    def solve(self, prompt: list[int]) -> list[int]:
        return super().solve(_flip_numbers(prompt))

    @classmethod
    def _prompt(cls, a: int, b: int) -> list[int]:
        return _flip_numbers(super()._prompt(a, b))


def _flip_numbers(prompt: list[int]) -> list[int]:
    """Each number's digits in the other order: [2, 4, 0, +, 9, 9, 1, =] ↔ [0, 4, 2, +, 1, 9, 9, =]."""
    a, b = prompt[:ADD_DIGITS], prompt[ADD_DIGITS + 1:2 * ADD_DIGITS + 1]
    return a[::-1] + [PLUS] + b[::-1] + [EQUALS]


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=TrainConfig.for_task(get_task("add")).steps)
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--eval-size", type=int, default=500, help="held-out prompts scored")
args = parser.parse_args()
print(one_blas_thread())

ENCODINGS = {"most significant first": AddMostSignificantFirst(), "least significant first": get_task("add")}
ARCHS = {"learned positions (default)": "default", "RoPE (--arch llama)": "llama"}

print(f"add, {args.steps} steps, d_model 64, 4 heads, 2 layers; held-out exact match on {args.eval_size} "
      f"prompts per seed")
print(f"{'numbers written':>23} | {'model':>27} | " + " | ".join(f"seed {s:>2}" for s in args.seeds)
      + " | time")
for encoding, task in ENCODINGS.items():
    held_out = task.held_out(args.eval_size)
    for model_name, arch in ARCHS.items():
        cells, start = [], time.perf_counter()
        for seed in args.seeds:
            config = TrainConfig(steps=args.steps, seed=seed, arch=arch)
            model = make_model(task, config)     # seeded by config.seed
            train(model, task, config)
            model.eval()
            cells.append(accuracy(model, task, held_out))
        seconds = time.perf_counter() - start
        print(f"{encoding:>23} | {model_name:>27} | " + " | ".join(f"{c:>7.1%}" for c in cells)
              + f" | {seconds:.0f} s", flush=True)
