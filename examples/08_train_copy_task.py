"""Train the copy task with the Python API: the loop the `train` command runs, in a few lines.

The first half writes the loop out by hand (AdamW, warmup + cosine learning rate, gradient
clipping, loss only on the answer tokens); the second does the same with ``train``.

Run: python examples/08_train_copy_task.py
"""

import time

import numpy as np
from blas_threads import one_blas_thread

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn, optim
from tinygrad_attn.training import TrainConfig, accuracy, make_model, train
from tinygrad_attn.training.tasks import END, IGNORE, VOCAB, decode, get_task

print(one_blas_thread())

STEPS = 300
task = get_task("copy")
print(task.name, "—", task.summary, "— e.g.", task.example)
held_out = task.held_out(200)                                   # prompts training never sees

# 1. The loop by hand.
ta.manual_seed(0)
model = nn.TinyTransformer(len(VOCAB), d_model=64, num_heads=4, num_layers=2,
                           max_len=task.max_prompt + task.max_answer)
opt = optim.AdamW(model.parameters(), lr=3e-3)
data = np.random.default_rng(0)
start = time.perf_counter()
for step in range(STEPS):
    opt.lr = optim.warmup_cosine(step, 3e-3, warmup_steps=50, total_steps=STEPS, min_lr=1e-4)
    ids, targets = task.batch(data, 64)                         # targets: IGNORE on the prompt
    loss = F.cross_entropy(model(ids), targets, ignore_index=IGNORE)
    opt.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), 1.0)
    opt.step()
    if step % 50 == 0:
        print(f"step {step:3d}  loss {loss.item():.4f}")
print(f"by hand: {time.perf_counter() - start:.1f} s, held-out exact match "
      f"{accuracy(model, task, held_out):.1%}")
prompt = held_out[0]
tokens = model.generate(np.array(prompt), task.max_answer).numpy()[len(prompt):].tolist()
print("  ", decode(prompt), "→", decode(tokens[:tokens.index(END) + 1] if END in tokens else tokens))

# 2. The same with train(): it reports through a callback and returns the history.
config = TrainConfig(steps=STEPS, warmup=50)
model = make_model(task, config)
history = train(model, task, config,
                on_step=lambda step, h: step % 100 == 0 and print(f"step {step}  loss {h.loss[-1]:.4f}"))
print(f"train(): final loss {history.loss[-1]:.4f}, held-out exact match "
      f"{accuracy(model, task, held_out):.1%}")
