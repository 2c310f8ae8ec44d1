"""Draw one attention head, forward and backward: the graph of 'the cat sat' through one causal
head, with every tensor's value and gradient norm.

Run: python examples/draw_attention_head.py [--out attention_head.svg]
"""

import argparse

import tinygrad_attn as ta
from tinygrad_attn.demos import head

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default="attention_head.svg", help="an .svg or .png path")
args = parser.parse_args()

loss, model = head()
loss.backward()   # so that each record shows its gradient norm
path = ta.viz.render(loss, args.out)
steps = list(ta.backprop_steps(head()[0]))
print(f"loss {loss.item():.4f}; {len(steps)} backward steps; wrote {path}")
grad_norm = float((model.attn.q_proj.weight.grad ** 2).sum() ** 0.5)
print(f"the head's query weights got gradient norm {grad_norm:.4g}")
