"""``tinygrad-attn train TASK``: train a TinyTransformer on a toy task and report what it learned.

Writes to the output folder: checkpoint.npz (weights, optimizer, data stream, config),
metrics.json, loss.png and attention.png (a layer × head grid of attention heatmaps for one
held-out example).
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
from ..tasks import TASKS, decode, get_task
from ..train import (
    TrainConfig,
    TrainState,
    accuracy,
    build,
    config_from_dict,
    restore_rng_states,
    rng_states,
    train,
)

_FLAGS = {  # flag -> (config field, type, help)
    "--steps": ("steps", int, "optimizer steps in all"),
    "--batch-size": ("batch_size", int, "sequences per step"),
    "--lr": ("lr", float, "peak learning rate (linear warmup, then cosine decay)"),
    "--seed": ("seed", int, "seeds the initial weights and the training batches"),
    "--d-model": ("d_model", int, "model width"),
    "--heads": ("num_heads", int, "attention heads per layer"),
    "--layers": ("num_layers", int, "transformer blocks"),
    "--dropout": ("dropout", float, "dropout probability"),
    "--device": ("device", str, "cpu (NumPy) or cuda (CuPy)"),
    "--eval-size": ("eval_size", int, "held-out prompts for the final accuracy"),
}


def save_run(path: Path, state: TrainState, config: TrainConfig) -> None:
    arrays = {f"model/{k}": v for k, v in state.model.state_dict().items()}
    arrays.update({f"optim/{k}": v for k, v in state.optimizer.state_dict().items()})
    arrays["losses"] = np.array(state.losses)
    checkpoint.save(path, arrays, {"config": dataclasses.asdict(config), "step": state.step,
                                   "rng": rng_states(state)})


def load_run(path: Path) -> tuple[TrainState, TrainConfig]:
    """The model, optimizer, data stream and losses of a checkpoint, with its config."""
    arrays, meta = checkpoint.load(path)
    config = config_from_dict(meta["config"])
    state = build(config)
    state.model.load_state_dict({k[6:]: v for k, v in arrays.items() if k.startswith("model/")})
    state.optimizer.load_state_dict({k[6:]: v for k, v in arrays.items() if k.startswith("optim/")})
    state.step, state.losses = int(meta["step"]), arrays["losses"].tolist()
    restore_rng_states(state, meta["rng"])
    return state, config


def run(args: argparse.Namespace) -> int:
    out = Path(args.out or f"runs/{args.task}")
    overrides = {field: getattr(args, field) for field, _, _ in _FLAGS.values()
                 if getattr(args, field) is not None}
    if args.resume:
        resume = Path(args.resume)
        try:
            state, config = load_run(resume / "checkpoint.npz" if resume.is_dir() else resume)
        except CheckpointError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if config.task != args.task:
            print(f"error: {resume} is a {config.task!r} checkpoint, not {args.task!r}", file=sys.stderr)
            return 2
        config = dataclasses.replace(config, **overrides)
    else:
        config = dataclasses.replace(TrainConfig(task=args.task), **overrides)
        state = build(config)
    task = get_task(config.task)
    path = out / "checkpoint.npz"

    from tqdm import tqdm

    bar = tqdm(total=config.steps, initial=state.step, desc=f"train {task.name}", unit="step",
               file=sys.stderr, mininterval=0.5)
    running: list[float] = []

    def on_step(step: int, loss: float) -> None:
        running.append(loss)
        bar.update(1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(running[-50:]):.4f}")
        if args.save_every and step % args.save_every == 0:
            save_run(path, state, config)

    start = time.perf_counter()
    try:
        train(state, config, on_step=on_step, stop_after=args.stop_after)
    except KeyboardInterrupt:
        bar.close()
        save_run(path, state, config)
        print(f"interrupted at step {state.step}; resume with --resume {path}", file=sys.stderr)
        return 130
    bar.close()
    seconds = time.perf_counter() - start
    save_run(path, state, config)
    if state.step < config.steps:
        print(f"stopped at step {state.step} of {config.steps}; resume with --resume {path}")
        return 0

    held_out = task.held_out(config.eval_size)
    acc = accuracy(state.model, task, held_out)
    metrics = {"task": task.name, "steps": state.step, "train_seconds": round(seconds, 2),
               "held_out_exact_match": acc, "held_out_size": len(held_out),
               "final_loss": float(np.mean(state.losses[-50:])), "config": dataclasses.asdict(config),
               "losses": state.losses}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    plots.loss_curve(state.losses, out / "loss.png", f"{task.name}: training loss")
    shown = max(held_out, key=len)
    example = shown + task.solve(shown)
    maps = [m.numpy()[0] for m in state.model.attention_maps(np.array([example[:-1]]))]
    plots.attention_grid(maps, decode(example[:-1]).split(), out / "attention.png",
                         f"{task.name}: attention on held-out '{decode(shown)}'")
    print(f"{task.name}: held-out exact-match accuracy {acc:.2%} on {len(held_out)} sequences "
          f"after {state.step} steps ({seconds:.1f} s); wrote {out}/")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = "\n".join(f"  {t.name:8s} {t.summary}; e.g. {t.example}" for t in TASKS.values())
    parser = subparsers.add_parser(
        "train", help="train a tiny transformer on a toy task",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"tasks (vocabulary: digits 0-9, + = | . and _ for padding):\n{tasks}\n\n"
               "Exact-match accuracy is measured by greedy decoding on held-out prompts (a fixed "
               "5%% of all prompts that training never sees).")
    parser.add_argument("task", choices=sorted(TASKS), help="which toy task")
    defaults = TrainConfig()
    for flag, (field, kind, text) in _FLAGS.items():
        parser.add_argument(flag, dest=field, type=kind, default=None,
                            help=f"{text} (default {getattr(defaults, field)})")
    parser.add_argument("--out", help="output folder (default runs/TASK)")
    parser.add_argument("--resume", metavar="CHECKPOINT",
                        help="continue from a checkpoint file or run folder; flags given override its config")
    parser.add_argument("--save-every", type=int, default=500, metavar="N",
                        help="write the checkpoint every N steps (default 500; 0: only at the end)")
    parser.add_argument("--stop-after", type=int, metavar="N",
                        help="stop after N steps of this run and save (continue later with --resume)")
    parser.set_defaults(run=run)
