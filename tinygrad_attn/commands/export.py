"""``tinygrad-attn export RUN OUT``: a run (or any model folder tinygrad_attn loads) written as a
Hugging Face model folder, which ``transformers.AutoModelForCausalLM.from_pretrained(OUT)`` loads:
config.json, model.safetensors and tokenizer.json. A model trained here goes on into the tools a
learner uses next.

OUT must be new or empty; ``--overwrite`` replaces the model in a model folder, whole (no file of the
old model is left: a generation_config.json, weight shards). A run folder is never written into.
The files are written together: a full disk is one line and leaves OUT as it was."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..pretrained import load_pretrained, save_pretrained
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    try:
        if Path(args.out).resolve() == Path(args.run_folder).resolve():
            raise ValueError(f"OUT is RUN ({args.out}): write the model to another folder")
        model, tokenizer = load_pretrained(args.run_folder)
        folder = save_pretrained(model, args.out, tokenizer, overwrite=args.overwrite)
    except (ValueError, OSError) as error:      # a bad run, a model with no HF type, OUT not writable
        print(f"tinygrad-attn export: {error}", file=sys.stderr)
        return 2
    say_threads()
    config = (folder / "config.json").read_text()
    kind = config.split('"model_type": "')[1].split('"')[0]
    count = sum(p.data.size for p in model.parameters())
    print(f"wrote {folder}: a {kind} model of {count:,} parameters (config.json, model.safetensors"
          f"{', tokenizer.json' if (folder / 'tokenizer.json').exists() else ''}); load it with "
          f"transformers.AutoModelForCausalLM.from_pretrained({str(folder)!r})")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="write a run as a Hugging Face model folder",
                                   description=__doc__)
    parser.add_argument("run_folder", metavar="RUN",
                        help="a run folder of `tinygrad-attn train` (or a model folder)")
    parser.add_argument("out", help="the folder to write: new or empty")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the model in OUT, every file of it (other files there are kept)")
    add_threads_option(parser)
    parser.set_defaults(run=run)
