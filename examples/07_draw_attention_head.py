"""Draw one attention head, forward and backward: 'the cat sat' through one causal head and a
next-word loss, first as built (values only), then after backward (with every gradient norm).

Run: python examples/07_draw_attention_head.py [--out-dir .] [--format svg|png]
"""

import argparse
from pathlib import Path

from blas_threads import one_blas_thread

import tinygrad_attn as ta
from tinygrad_attn.viz.example_graphs import head

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out-dir", default=".", help="folder for the two drawings")
parser.add_argument("--format", choices=["svg", "png"], default="svg")
args = parser.parse_args()
print(one_blas_thread())
out = Path(args.out_dir)

example = head()
loss, model = example.loss, example.model
forward = ta.viz.render(loss, out / f"attention_head_forward.{args.format}", show_grads=False)
steps = list(ta.backprop_steps(loss))          # the backward pass, one node at a time
backward = ta.viz.render(loss, out / f"attention_head_backward.{args.format}")
print(f"loss {loss.item():.4f}; {len(steps)} backward steps: {' '.join(s.op for s in steps)}")
print(f"wrote {forward} and {backward}")
grad = model.q_proj.weight.grad
print(f"the head's query weights got gradient norm {float((grad ** 2).sum() ** 0.5):.4g}")
