"""Why `train add --arch llama` struggles: the same models with learned positions and with RoPE.

`add` pads both numbers to 3 digits, so its prompt always has 8 tokens ("0 4 2 + 1 9 9 =") and
the sum is written least significant digit first. Answer digit i (i = 0, 1, 2) is predicted at
position 7 + i and needs the two digits at positions 2 − i and 6 − i (and the carry): at
distances 5 + 2i and 1 + 2i, which change with i; digit 3 is the last carry alone. A learned
position table tells each position where it is; RoPE gives attention only the distance between a
query and a key, so the model must first work out i from the tokens before it can look at the
right distance.

Four TinyTransformers, each trained on `add` with `tinygrad-attn train`'s defaults (1000 steps,
d_model 64, 4 heads, 2 layers) for each seed, then scored on the 500 held-out prompts (greedy
decoding, the whole answer right): two choices of positions, each in the default block (LayerNorm,
GELU) and in the Llama block (RMSNorm, SwiGLU, 2 kv heads for 4 query heads). The last row is
`tinygrad-attn train add --arch llama`.
Run: python examples/10_positions_for_add.py [--steps 1000] [--seeds 0 1 2]
"""

import argparse
import time

from tinygrad_attn.creation import manual_seed
from tinygrad_attn.nn import TinyTransformer
from tinygrad_attn.training.config import ARCHS, TrainConfig
from tinygrad_attn.training.evaluation import accuracy
from tinygrad_attn.training.loop import make_model, train
from tinygrad_attn.training.tasks import VOCAB, get_task

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--eval-size", type=int, default=500, help="held-out prompts scored")
args = parser.parse_args()

task = get_task("add")
held_out = task.held_out(args.eval_size)
# The Llama block as `--arch llama` builds it (training.loop.make_model: half as many kv heads).
LLAMA_BLOCK = {key: value for key, value in ARCHS["llama"].items() if key != "positions"}
LLAMA_BLOCK["n_kv_heads"] = make_model(task, TrainConfig(arch="llama")).blocks[0].attn.n_kv_heads
MODELS = {                                       # name: TinyTransformer options
    "LayerNorm, GELU, learned positions": {"positions": "learned"},
    "LayerNorm, GELU, RoPE": {"positions": "rope"},
    "RMSNorm, SwiGLU, GQA, learned positions": {**LLAMA_BLOCK, "positions": "learned"},
    "RMSNorm, SwiGLU, GQA, RoPE (--arch llama)": {**LLAMA_BLOCK, "positions": "rope"},
}

print(f"add, {args.steps} steps, d_model 64, 4 heads, 2 layers; held-out exact match on {len(held_out)} "
      f"prompts per seed")
print(f"{'model':>42} | " + " | ".join(f"seed {s:>2}" for s in args.seeds) + " | time")
for name, options in MODELS.items():
    cells, start = [], time.perf_counter()
    for seed in args.seeds:
        config = TrainConfig(steps=args.steps, seed=seed)
        manual_seed(seed)
        model = TinyTransformer(len(VOCAB), config.d_model, config.num_heads, config.num_layers,
                                max_len=task.max_prompt + task.max_answer, **options)
        train(model, task, config)
        model.eval()
        cells.append(accuracy(model, task, held_out))
    seconds = time.perf_counter() - start
    print(f"{name:>42} | " + " | ".join(f"{c:>7.1%}" for c in cells) + f" | {seconds:.0f} s")
