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
from ..backend import xp_for
from ..errors import CheckpointError, DeviceError
from ..nn import TinyTransformer
from ..run_folder import RunFolder
from ..tasks import TASKS, VOCAB, Task, decode, get_task
from ..train import (
    DivergedError,
    History,
    InterruptedMidStep,
    TrainConfig,
    TrainState,
    accuracy,
    make_model,
    train,
)

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


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("interrupted before training started; nothing was saved", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    task = get_task(args.task)
    if args.stop_after is not None and args.stop_after < 1:
        return _fail(f"--stop-after must be at least 1, got {args.stop_after}")
    if args.save_every < 0:
        return _fail(f"--save-every must be 0 (only at the end) or more, got {args.save_every}")
    overrides = {field: getattr(args, field) for field, _, _ in _FLAGS.values()
                 if getattr(args, field) is not None}
    source = None
    try:
        if args.resume:
            resume = Path(args.resume)
            source = resume / "checkpoint.npz" if resume.is_dir() else resume
            model, state, config, saved_task = checkpoint.load_run(source, overrides.get("device"))
            if saved_task.name != task.name:
                return _fail(f"{resume} is a {saved_task.name!r} checkpoint, not {task.name!r}")
            changed = [f for f in _FIXED_ON_RESUME if f in overrides and overrides[f] != getattr(config, f)]
            if changed:
                return _fail(f"cannot change {', '.join(changed)} when resuming (the checkpoint has "
                             + ", ".join(f"{f}={getattr(config, f)}" for f in changed) + ")")
            config = dataclasses.replace(config, **overrides)
            if "steps" in overrides and config.steps <= state.step:
                return _fail(f"{source} has done {state.step} steps already, so --steps {config.steps} "
                             f"leaves none to do; pass --steps above {state.step} to train further")
        else:
            config = TrainConfig(**overrides)
            xp_for(config.device)
        held_out = task.held_out(config.eval_size)
        folder = RunFolder(args.out or (source.parent if source else Path("runs", task.name)),
                           overwrite=args.overwrite, continues=source)
        if not args.out and not source:
            folder.path.parent.mkdir(exist_ok=True)
        with folder:
            if source is None:
                model = make_model(task, config)
                state = TrainState.fresh(model, config)
            return _train_and_report(args, task, config, model, state, held_out, folder)
    except (CheckpointError, DeviceError, ValueError) as e:
        return _fail(str(e))
    except MemoryError as e:
        return _fail(f"the model (d_model={config.d_model}, {config.num_layers} layers) does not fit in "
                     f"memory ({e or 'MemoryError'})")


def _train_and_report(args: argparse.Namespace, task: Task, config: TrainConfig, model: TinyTransformer,
                      state: TrainState, held_out: list[list[int]], folder: RunFolder) -> int:
    out, path = folder.path, folder.checkpoint
    resume_hint = f"tinygrad-attn train {task.name} --resume {out}"
    from tqdm import tqdm

    bar = tqdm(total=config.steps, initial=state.step, desc=f"train {task.name}", unit="step",
               file=sys.stderr, mininterval=0.5)

    def on_step(step: int, history: History) -> None:
        bar.update(1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(history.loss[-50:]):.4f}")
        if args.save_every and step % args.save_every == 0 and _is_finite(model):
            checkpoint.save_run(path, model, state, config, task)

    start = time.perf_counter()
    try:
        train(model, task, config, on_step=on_step, state=state, stop_after=args.stop_after)
    except InterruptedMidStep:
        bar.close()
        kept = f"{path} (the last checkpoint saved) is kept" if path.exists() else "nothing was saved"
        print(f"interrupted twice: stopped inside step {state.step + 1} without saving; {kept}",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        bar.close()
        checkpoint.save_run(path, model, state, config, task)
        print(f"interrupted after step {state.step}; saved it; resume with: {resume_hint}", file=sys.stderr)
        return 130
    except DivergedError as e:
        bar.close()
        if _is_finite(model):
            checkpoint.save_run(path, model, state, config, task)
        kept = f"{path} holds step {checkpoint.load(path)[1]['step']}" if path.exists() else \
            "no finite state was saved"
        return _fail(f"{e}. {kept}; resume with other settings, e.g. {resume_hint} --lr {config.lr / 10:g}",
                     code=1)
    bar.close()
    seconds = time.perf_counter() - start
    checkpoint.save_run(path, model, state, config, task)
    if state.step < config.steps:
        print(f"stopped at step {state.step} of {config.steps}; resume with: {resume_hint}")
        return 0
    try:
        _evaluate(task, config, model, state, held_out, out, seconds)
    except KeyboardInterrupt:
        print(f"interrupted during evaluation; the trained model (step {state.step}) is saved in {path}; "
              f"evaluate it with: {resume_hint}", file=sys.stderr)
        return 130
    return 0


def _is_finite(model: TinyTransformer) -> bool:
    return all(bool(np.isfinite(p.numpy()).all()) for p in model.parameters())


def _evaluate(task: Task, config: TrainConfig, model: TinyTransformer, state: TrainState,
              held_out: list[list[int]], out: Path, seconds: float) -> None:
    """Held-out accuracy, metrics.json, the loss curve and the attention grid."""
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
    parser.add_argument("--out", help="output folder, whose parent must exist (default runs/TASK, or "
                                      "the resumed run's own folder); locked while the run lasts")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a run already in the output folder (refused without it)")
    parser.add_argument("--resume", metavar="CHECKPOINT",
                        help="continue from a checkpoint file or run folder with the same losses "
                             "as an uninterrupted run, also after Ctrl-C (which stops at the end of "
                             "the running step and saves it); --steps, --lr, --eval-size and "
                             "--device may change")
    parser.add_argument("--save-every", type=int, default=500, metavar="N",
                        help="write the checkpoint every N steps (default 500; 0: only at the end)")
    parser.add_argument("--stop-after", type=int, metavar="N",
                        help="stop after N (≥ 1) steps of this run and save (continue later with --resume)")
    parser.set_defaults(run=run)
