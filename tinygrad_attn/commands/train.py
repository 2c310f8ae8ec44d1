"""``tinygrad-attn train TASK``: train a TinyTransformer on a toy task and report what it learned.

Writes to the output folder: checkpoint.npz (weights, optimizer state, step, losses, config and
the random generators' states), metrics.json, loss.png and attention.png (a layer × head grid of
attention heatmaps for one held-out example).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from .. import checkpoint, plots
from ..errors import CheckpointError
from ..tasks import TASKS, VOCAB, decode, get_task
from ..train import History, TrainConfig, TrainState, accuracy, make_model, train

_FLAGS = {  # flag -> (config field, type, help)
    "--steps": ("steps", int, "optimizer steps in all"),
    "--batch-size": ("batch_size", int, "sequences per step"),
    "--lr": ("lr", float, "peak learning rate (linear warmup, then cosine decay)"),
    "--warmup": ("warmup", int, "warmup steps"),
    "--seed": ("seed", int, "seeds the initial weights and the training batches"),
    "--d-model": ("d_model", int, "model width"),
    "--heads": ("num_heads", int, "attention heads per layer"),
    "--layers": ("num_layers", int, "transformer blocks"),
    "--dropout": ("dropout", float, "dropout probability"),
    "--device": ("device", str, "cpu (NumPy) or cuda (CuPy)"),
    "--eval-size": ("eval_size", int, "held-out prompts for the final accuracy"),
}
# A resumed run keeps the model and the random streams it was started with.
_FIXED_ON_RESUME = ("seed", "d_model", "num_heads", "num_layers", "dropout", "batch_size")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    task = get_task(args.task)
    out = Path(args.out or f"runs/{task.name}")
    overrides = {field: getattr(args, field) for field, _, _ in _FLAGS.values()
                 if getattr(args, field) is not None}
    try:
        if args.resume:
            resume = Path(args.resume)
            model, state, config, saved_task = checkpoint.load_run(
                resume / "checkpoint.npz" if resume.is_dir() else resume, overrides.get("device"))
            if saved_task.name != task.name:
                return _fail(f"{resume} is a {saved_task.name!r} checkpoint, not {task.name!r}")
            changed = [f for f in _FIXED_ON_RESUME if f in overrides and overrides[f] != getattr(config, f)]
            if changed:
                return _fail(f"cannot change {', '.join(changed)} when resuming (the checkpoint has "
                             + ", ".join(f"{f}={getattr(config, f)}" for f in changed) + ")")
            config = dataclasses.replace(config, **overrides)
        else:
            config = TrainConfig(**overrides)
            model = make_model(task, config)
            state = TrainState.fresh(model, config)
    except (CheckpointError, ValueError) as e:
        return _fail(str(e))
    path = out / "checkpoint.npz"

    from tqdm import tqdm

    bar = tqdm(total=config.steps, initial=state.step, desc=f"train {task.name}", unit="step",
               file=sys.stderr, mininterval=0.5)

    def on_step(step: int, history: History) -> None:
        bar.update(1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(history.loss[-50:]):.4f}")
        if args.save_every and step % args.save_every == 0:
            checkpoint.save_run(path, model, state, config, task)

    start = time.perf_counter()
    try:
        train(model, task, config, on_step=on_step, state=state, stop_after=args.stop_after)
    except KeyboardInterrupt:
        bar.close()
        checkpoint.save_run(path, model, state, config, task)
        print(f"interrupted at step {state.step}; resume with --resume {path}", file=sys.stderr)
        return 130
    bar.close()
    seconds = time.perf_counter() - start
    checkpoint.save_run(path, model, state, config, task)
    if state.step < config.steps:
        print(f"stopped at step {state.step} of {config.steps}; resume with --resume {path}")
        return 0

    held_out = task.held_out(config.eval_size)
    acc = accuracy(model, task, held_out)
    losses = state.history.loss
    metrics = {"task": task.name, "steps": state.step, "train_seconds": round(seconds, 2),
               "held_out_exact_match": acc, "held_out_size": len(held_out),
               "final_loss": float(np.mean(losses[-50:])), "config": dataclasses.asdict(config),
               **dataclasses.asdict(state.history)}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    plots.loss_curve(losses, out / "loss.png", f"{task.name}: training loss")
    shown = max(held_out, key=len)
    example = shown + task.solve(shown)       # the model reads all but the last token
    maps = [m.numpy()[0] for m in model.attention_maps(np.array([example[:-1]]))]
    plots.attention_grid(maps, decode(example[:-1]).split(), out / "attention.png",
                         f"{task.name}: attention (rows: queries, columns: keys) on held-out "
                         f"'{decode(shown)}'")
    print(f"{task.name}: held-out exact-match accuracy {acc:.2%} on {len(held_out)} sequences "
          f"after {state.step} steps ({seconds:.1f} s of training); wrote {out}/")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = "\n".join(
        f"  {t.name:8s} {t.summary};\n"
        f"           prompt ≤ {t.max_prompt} tokens, answer ≤ {t.max_answer} (with its '.'), "
        f"e.g. {t.example}" for t in TASKS.values())
    parser = subparsers.add_parser(
        "train", help="train a tiny transformer on a toy task",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"tasks (vocabulary of {len(VOCAB)} tokens: digits 0-9, '+', '=', '|' ends a list, "
               f"'.' ends an answer, '_' pads):\n{tasks}\n\n"
               "The loss counts only answer tokens. Exact-match accuracy is measured by greedy "
               "decoding (token by token)\non held-out prompts: a fixed 5% of all prompts that "
               "training never sees.")
    parser.add_argument("task", choices=sorted(TASKS), help="which toy task")
    defaults = TrainConfig()
    for flag, (field, kind, text) in _FLAGS.items():
        parser.add_argument(flag, dest=field, type=kind, default=None,
                            help=f"{text} (default {getattr(defaults, field)})")
    parser.add_argument("--out", help="output folder (default runs/TASK)")
    parser.add_argument("--resume", metavar="CHECKPOINT",
                        help="continue from a checkpoint file or run folder with the same losses "
                             "as an uninterrupted run; --steps, --lr, --eval-size and --device may change")
    parser.add_argument("--save-every", type=int, default=500, metavar="N",
                        help="write the checkpoint every N steps (default 500; 0: only at the end)")
    parser.add_argument("--stop-after", type=int, metavar="N",
                        help="stop after N steps of this run and save (continue later with --resume)")
    parser.set_defaults(run=run)
