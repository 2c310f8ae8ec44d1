"""The figures of docs/language_model.md, from one fresh `tinygrad-attn train text` run.

It runs the default text run (seed 0, 4000 steps) as a learner would, with a validation loss and
a sample every 25 steps instead of every 250 (`--eval-every 25`: the evaluations draw nothing from
the training's random streams, so the run is step for step the default one), and one BLAS thread
(another thread count sums a matrix product in another order: other last bits, and after a few
hundred steps other samples). Then it samples after "def " as the page does (`tinygrad-attn sample
RUN "def " --seed 1 --max-new-tokens 200`) and measures what each head looks at on the run's
validation windows. It prints every figure as the page shows it; with `--page` it writes them into
the page, between the page's `<!-- figures: NAME -->` and `<!-- end figures: NAME -->` lines, and
leaves the rest of the page as it was.

Run: python examples/11_language_model.py --page docs/language_model.md   (trains runs/text: about
     12 minutes of CPU; docs/README.md says how long it took here)
     python examples/11_language_model.py --from-run runs/text --page docs/language_model.md
     (the figures of a run this script trained before, without training again: seconds)
"""

import argparse
import ast
import json
import os
import platform
import re
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from tinygrad_attn.files import write_atomically
from tinygrad_attn.text.corpus import DEFAULT_CORPUS, default_corpus
from tinygrad_attn.training import Run

ROOT = Path(__file__).resolve().parents[1]
# Kept in the run folder: the train command's printout, and where and how long it ran.
LOG, HOW_IT_RAN = "train.log", "how_it_ran.json"
# The steps the page's table shows (those the run evaluated), and always the last.
TABLE_STEPS = (25, 50, 100, 150, 200, 250, 500, 750, 1000, 1500, 2000, 3000)
SHOWN = 80                           # characters of each sample in the table
PROMPT, SAMPLE_SEED, SAMPLE_TOKENS = "def ", 1, 200
# The characters a head may find "the most recent" of: what a line, a quotation or a call begins with.
MARKS = {"newline": "\n", "quote": "\"'", "open bracket": "([{"}
FIGURES = ("summary", "run", "heads", "marks", "sample")     # the page's marked places, in its order
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def train_flags(args: argparse.Namespace) -> list[str]:
    """The flags this script gives the train command: the defaults, but for the evaluations' spacing."""
    flags = ["--eval-every", str(args.eval_every)]
    for flag, value in (("--steps", args.steps), ("--eval-size", args.eval_size)):
        if value is not None:
            flags += [flag, str(value)]
    return flags


def child_environment() -> dict[str, str]:
    """One BLAS thread for the commands this script starts; attention keeps its split over the
    cores (tinygrad_attn.parallel: bit-identical to one thread, so it changes no figure)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **ONE_THREAD, "PYTHONPATH": path,
            "TINYGRAD_ATTN_THREADS": os.environ.get("TINYGRAD_ATTN_THREADS", str(cores))}


def tinygrad_attn(command: list[str]) -> str:
    """Run `python -m tinygrad_attn COMMAND` (its progress bar on this terminal); its printout."""
    done = subprocess.run([sys.executable, "-m", "tinygrad_attn", *command], stdout=subprocess.PIPE,
                          text=True, env=child_environment())
    if done.returncode:
        sys.exit(f"`tinygrad-attn {' '.join(command)}` failed (exit code {done.returncode}); "
                 f"its printout:\n{done.stdout}")
    return done.stdout


def train(out: Path, args: argparse.Namespace) -> None:
    """Train the run into `out`, keeping there its printout and where and how long it ran."""
    out.parent.mkdir(parents=True, exist_ok=True)          # runs/, as the train command makes it
    load, started, cpu = os.getloadavg()[0], time.perf_counter(), _children_cpu()
    log = tinygrad_attn(["train", "text", "--out", str(out), *train_flags(args)])
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
    (out / LOG).write_text(log, encoding="utf-8")
    load = f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    how_it_ran = {"flags": train_flags(args), "machine": _machine(), "wall": _minutes(wall),
                  "cpu": f"{cpu:.0f} s", "load": load}
    (out / HOW_IT_RAN).write_text(json.dumps(how_it_ran), encoding="utf-8")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def samples_of(log: str) -> dict[int, str]:
    """Each sample the train command printed, by step (the last one: the final report's)."""
    found = {int(step): ast.literal_eval(text)
             for step, text in re.findall(r"^sample after step (\d+): (.*)$", log, re.M)}
    final = re.search(r"^sample \(temperature [\d.]+, top-k \d+\): (.*)$", log, re.M)
    steps = re.search(r"^text: validation loss [\d.]+ nats per (?:token|character) after (\d+) steps",
                      log, re.M)
    if final is None or steps is None:
        sys.exit(f"no final report in the train command's printout:\n{log[-2000:]}")
    found[int(steps.group(1))] = ast.literal_eval(final.group(1))
    return found


def code_span(text: str) -> str:
    """`text` as a Markdown code span in a table cell: newlines as ↵, bars escaped."""
    text = text.replace("\n", "↵").replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def opening(sample: str) -> str:
    """What the table shows of a sample: its first characters after the leading blanks, each run
    of three or more spaces as one ⋯ (the help pages' tables and indents are long runs of them)."""
    return re.sub(" {3,}", " ⋯ ", sample.lstrip(" \n"))[:SHOWN].strip() or "⋯"


def run_table(history, samples: dict[int, str], vocab_size: int) -> str:
    """Step, validation loss, training loss (the mean of the 50 steps before) and a sample."""
    losses = dict(zip(history.val_step, history.val_loss))
    last = history.val_step[-1]
    rows = ["| step | validation loss | training loss | sample (its first 80 characters after the leading "
            "blanks; `↵` a newline, `⋯` three spaces or more) |",
            "|---|---|---|---|",
            f"| 0 | {np.log(vocab_size):.2f} (a uniform guess: ln {vocab_size}) | | |"]
    for step in [s for s in TABLE_STEPS if s in losses and s < last] + [last]:
        train_loss = np.mean(history.loss[max(step - 50, 0):step])
        loss = f"**{losses[step]:.4f}**" if step == last else f"{losses[step]:.2f}"
        rows.append(f"| {step} | {loss} | {train_loss:.2f} | {code_span(opening(samples[step]))} |")
    return "\n".join(rows)


def run_summary(run, how_it_ran: dict) -> str:
    """What was run, where, how long it took and where it ended."""
    history = run.state.history
    command = " ".join(["tinygrad-attn", "train", "text", *how_it_ran["flags"]])
    said = (f"The figures below come from one such run, seed {run.config.seed} (the default): "
            f"`python examples/11_language_model.py --page docs/language_model.md` runs `{command}` "
            f"(the evaluations draw nothing from the training's random streams, so evaluating more "
            f"often changes nothing else) with one BLAS thread (`OPENBLAS_NUM_THREADS=1`), then the "
            f"`sample` command and the head measurements below, and writes every figure of this "
            f"page. On {how_it_ran['machine']}, it took {how_it_ran['wall']} of wall time and "
            f"{how_it_ran['cpu']} of CPU, the evaluations and their samples included (load average "
            f"{how_it_ran['load']}: other work shared the cores, so the CPU time is the figure to "
            f"compare). It ended at a validation loss of **{history.val_loss[-1]:.4f}** and a training "
            f"loss of {np.mean(history.loss[-50:]):.2f} (the mean of the last 50 steps).")
    # break_on_hyphens off: a flag such as --eval-every stays whole inside its code span
    return textwrap.fill(said, width=100, break_on_hyphens=False, break_long_words=False)


def _machine() -> str:
    """The CPU, its cores and NumPy's version, in words."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            name = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"an {name} with {os.cpu_count()} cores, NumPy {np.__version__}"


def attention_by_offset(maps: np.ndarray, offsets=(0, 1, 2)) -> np.ndarray:
    """(heads, offsets): the mean weight a query puts on the key `offset` characters back (0: itself),
    over the queries that have one. `maps`: (windows, heads, T, T)."""
    return np.stack([np.diagonal(maps, offset=-k, axis1=-2, axis2=-1).mean(axis=(0, -1))
                     for k in offsets], axis=-1)


def reads_as(weights: np.ndarray) -> str:
    """A head's row of `attention_by_offset`, in words."""
    best = int(np.argmax(weights))
    if weights[best] < 0.5:
        return "no single one of these"
    return ("itself", "the previous character", "the character two back")[best]


def attention_on_mark(maps: np.ndarray, ids: np.ndarray, mark_ids: list[int]) -> tuple[np.ndarray, float]:
    """((heads,) the mean weight a query puts on the most recent mark character before the
    previous one, what spreading evenly over the keys it sees would put there): over the queries
    that have such a mark. `maps`: (windows, heads, T, T); `ids`: (windows, T)."""
    T = ids.shape[1]
    positions = np.where(np.isin(ids, mark_ids), np.arange(T), -1)
    latest = np.maximum.accumulate(positions, axis=1)                   # the latest mark at or before t
    mark = np.full_like(latest, -1)
    mark[:, 2:] = latest[:, :-2]                                        # … at or before t - 2
    window, query = np.nonzero(mark >= 0)
    weights = maps[window, :, query, mark[window, query]]                # (queries, heads)
    return weights.mean(axis=0), float(np.mean(1.0 / (query + 1)))


def head_figures(run, eval_size: int) -> tuple[str, str]:
    """The first layer's heads by offset, and the head of any layer that finds each mark best."""
    task = run.task.with_text(default_corpus(), DEFAULT_CORPUS)     # a checkpoint keeps its digest only
    ids, _ = task.held_out(eval_size)
    maps = [m.numpy().astype(np.float64) for m in run.model.attention_maps(ids)]
    offsets = attention_by_offset(maps[0])
    heads = ["| head | on itself | 1 back | 2 back | reads as |", "|---|---|---|---|---|"]
    for head, row in enumerate(offsets):
        cells = [f"**{w:.2f}**" if w == row.max() and w >= 0.5 else f"{w:.2f}" for w in row]
        heads.append(f"| layer 0, head {head} | {' | '.join(cells)} | {reads_as(row)} |")
    marks = ["| the most recent … (before the previous character) | the head that looks at it most | "
             "its weight there | an even spread's |", "|---|---|---|---|"]
    for name, characters in MARKS.items():
        mark_ids = [task.tokenizer.encode(c)[0] for c in characters]
        per_layer = [attention_on_mark(layer, ids, mark_ids) for layer in maps]
        layer = int(np.argmax([weights.max() for weights, _ in per_layer]))
        weights, even = per_layer[layer]
        shown = " ".join(code_span(c) for c in characters)
        marks.append(f"| {name} ({shown}) | layer {layer}, head {int(np.argmax(weights))} | "
                     f"{weights.max():.2f} | {even:.2f} |")
    return "\n".join(heads), "\n".join(marks)


def marked(name: str) -> re.Pattern:
    """The lines of a page between which figure `name` goes, and what is between them now."""
    return re.compile(rf"(<!-- figures: {name} -->\n)(?:.*?\n)?(<!-- end figures: {name} -->)", re.S)


def check_page(page: Path) -> None:
    """SystemExit unless `page` can be read and has the markers of every figure (checked before
    training, so that a wrong --page costs no run)."""
    try:
        text = page.read_text(encoding="utf-8")
    except OSError as e:
        sys.exit(f"cannot read --page {page}: {e.strerror or e}")
    missing = [name for name in FIGURES if not marked(name).search(text)]
    if missing:
        sys.exit(f"--page {page} lacks the lines '<!-- figures: NAME -->' and '<!-- end figures: NAME -->' "
                 f"for {', '.join(missing)}")


def write_page(page: Path, figures: dict[str, str]) -> None:
    """Put each figure between its markers in `page` (written whole or not at all); nothing else changes."""
    text = page.read_text(encoding="utf-8")
    for name, figure in figures.items():
        text = marked(name).sub(lambda m, figure=figure: m.group(1) + figure + "\n" + m.group(2), text)
    write_atomically(page, text.encode("utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/text"),
                        help="the run folder to train (default runs/text, the train command's)")
    parser.add_argument("--from-run", type=Path, metavar="RUN",
                        help="read a run this script trained before instead of training one")
    parser.add_argument("--page", type=Path, help="write the figures into this page (docs/language_model.md)")
    parser.add_argument("--steps", type=int, help="a shorter run (default: the train command's, 4000)")
    parser.add_argument("--eval-every", type=int, default=25,
                        help="steps between validation losses and samples (default 25; the table's steps)")
    parser.add_argument("--eval-size", type=int,
                        help="validation windows (default: the train command's, 200)")
    args = parser.parse_args()
    from blas_threads import one_blas_thread  # a sibling file: only when run as a script

    print(one_blas_thread())
    if args.page:
        check_page(args.page)
    out = args.from_run or args.out
    if not args.from_run:
        train(out, args)
    if not (out / LOG).is_file() or not (out / HOW_IT_RAN).is_file():
        sys.exit(f"{out} has no {LOG} and {HOW_IT_RAN}: give --from-run a folder this script trained")
    how_it_ran = json.loads((out / HOW_IT_RAN).read_text(encoding="utf-8"))
    run = Run.load(out)
    samples = samples_of((out / LOG).read_text(encoding="utf-8"))
    sample = tinygrad_attn(["sample", str(out), PROMPT, "--seed", str(SAMPLE_SEED),
                            "--max-new-tokens", str(SAMPLE_TOKENS)])
    heads, marks = head_figures(run, run.config.eval_size)
    figures = {"summary": run_summary(run, how_it_ran),
               "run": run_table(run.state.history, samples, run.task.vocab_size),
               "heads": heads, "marks": marks,
               "sample": f"```text\n{sample.rstrip(chr(10))}\n```"}
    for name, figure in figures.items():
        print(f"\n{name}:\n{figure}")
    if args.page:
        write_page(args.page, figures)
        print(f"\nwrote the figures into {args.page}")


if __name__ == "__main__":
    main()
