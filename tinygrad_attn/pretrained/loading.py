"""``load_pretrained``: a Hugging Face model folder (or one of our runs) as a model and its tokenizer.

Everything is checked before any weight is read: the files are there, config.json is understood,
every weight file's header is sound, each tensor has the shape the model's parameter needs, none
is missing and none is left over. Then each tensor is read into the model, one at a time; a NaN
found while reading refuses the whole model. Nothing half-built is ever returned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..dtypes import get_default_dtype
from ..errors import CheckpointError, ShapeError
from ..nn import Parameter, TinyTransformer
from ..text import HuggingFaceTokenizer
from ..training import load_run
from .configs import options_from_config
from .names import GPT2_BUFFERS, Link, links
from .run_tokenizer import task_tokenizer
from .safetensors_files import TensorEntry, list_tensors, read_tensor

__all__ = ["load_pretrained"]

RUN_CHECKPOINT = "checkpoint.npz"


def load_pretrained(path: str | os.PathLike) -> tuple[TinyTransformer, Any]:
    """(model, tokenizer) from a folder in the Hugging Face layout, or from one of our runs.

    A Hugging Face folder holds config.json (model_type gpt2, llama, mistral or qwen2), the weights
    as model.safetensors or as shards listed in model.safetensors.index.json (float64, float32,
    float16 or bfloat16, converted to the default dtype), and tokenizer.json (the tokenizer is
    None without it). A run folder of ``tinygrad-attn train`` (checkpoint.npz), or that checkpoint
    file itself, gives its model and its tokenizer (a text run's own; the toy tasks' symbols
    otherwise). The model is in eval mode.

    Raises:
        CheckpointError: `path` is no folder (a file other than a run's checkpoint); a file is
            missing, not what it should be, or truncated; the config has an unknown model_type,
            key or value that changes the math; tensors are missing or left over (listed); a
            tensor holds NaN.
        ShapeError: a tensor has the wrong shape (its name, shape and the expected shape).
    """
    folder = Path(path)
    if folder.is_file() and folder.suffix == ".npz":            # a run's checkpoint file: as its folder
        folder, checkpoint = folder.parent, folder
    else:
        checkpoint = folder / RUN_CHECKPOINT
    if folder.is_file():
        raise CheckpointError(f"{folder}: a file, not a folder: give a model folder (config.json, "
                              f"model.safetensors, tokenizer.json) or a run folder (or its checkpoint.npz), "
                              f"such as the folder that holds this file, {folder.parent}")
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such folder (a model folder holds config.json and "
                              f"model.safetensors, a run folder checkpoint.npz)")
    if checkpoint.is_file() and not (folder / "config.json").exists():
        run = load_run(checkpoint, device="cpu")                 # a text run keeps its tokenizer
        return run.model.eval(), getattr(run.task, "tokenizer", None) or task_tokenizer()
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder}: no config.json (a Hugging Face model folder holds config.json, "
                              f"model.safetensors and tokenizer.json)")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{folder / 'config.json'}: not JSON ({e})") from None
    options = options_from_config(config)
    has_tokenizer = (folder / "tokenizer.json").is_file()
    tokenizer = HuggingFaceTokenizer.from_file(folder / "tokenizer.json") if has_tokenizer else None
    entries = list_tensors(folder)
    try:
        model = TinyTransformer(**options)
    except ValueError as e:
        raise CheckpointError(f"{folder / 'config.json'}: describes no model tinygrad_attn can build ({e})") \
            from None
    params, dtype = dict(model.named_parameters()), get_default_dtype()
    for link, name in _plan(config["model_type"], entries, params, options["num_layers"]):
        for ours, array in zip(link.ours, link.ours_from(read_tensor(name, entries[name], dtype))):
            params[ours].data = array
    return model.eval(), tokenizer


def _plan(model_type: str, entries: dict[str, TensorEntry], params: dict[str, Parameter],
          layers: int) -> list[tuple[Link, str]]:
    """(link, checkpoint name) for every tensor to read, after checking every name and shape
    against the model's parameters."""
    if model_type == "gpt2":        # older GPT-2 files: no "transformer." prefix, and causal-mask buffers
        entries = {n if n.startswith(("transformer.", "lm_head.")) else f"transformer.{n}": e
                   for n, e in entries.items() if not n.endswith(GPT2_BUFFERS)}
    wanted = links(model_type, set(params), layers)
    missing = [link.theirs for link in wanted if link.theirs not in entries]
    names = {link.theirs for link in wanted}
    tied = "head.weight" not in params          # a copy of the tied embedding may be in the file
    leftover = [n for n in entries if n not in names and not (tied and n == "lm_head.weight")]
    if missing or leftover:
        raise CheckpointError(f"the weights do not fit the config: missing {_listed(missing)}; left over "
                              f"{_listed(leftover)}")
    for link in wanted:
        expected = link.theirs_shape([params[o].shape for o in link.ours])
        if entries[link.theirs].shape != expected:
            raise ShapeError(f"tensor {link.theirs} has shape {entries[link.theirs].shape} but the config "
                             f"needs {expected} (for {', '.join(link.ours)})")
    return [(link, link.theirs) for link in wanted]


def _listed(names: list[str]) -> str:
    return f"{len(names)}: " + ", ".join(names[:8]) + (", …" if len(names) > 8 else "") if names else "none"
