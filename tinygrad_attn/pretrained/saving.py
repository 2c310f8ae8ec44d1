"""``save_pretrained``: a model written as a Hugging Face folder that transformers loads.

The folder holds config.json (the model type read from the model's modules, see
``configs.config_for``), model.safetensors (our parameters under transformers' names, linear
weights transposed to (out, in)) and, given a tokenizer, tokenizer.json.

Nothing is overwritten unasked and nothing is half-written: a folder that holds anything is
refused unless told to overwrite a model there, and then the whole model is replaced (every file
of the old one that the new one does not write, such as generation_config.json or weight shards,
is removed; other files, a README or .git, are kept). A run folder of ``tinygrad-attn train`` is
never written into: a config.json there would make the run read as this export from then on. The
files are written together (``files.write_together``): a full disk leaves the folder as it was.

No Hugging Face model type of ours has a bias on the LM head, which our toy runs' default models
have (``--arch llama`` models have none). For a LayerNorm model it is folded into ln_f's bias:
logits = (n ⊙ γ + β) W + b equal n ⊙ γ W + (β + δ) W when δ W = b, which has an exact solution
when W (d_model × vocab) has rank vocab (d_model ≥ vocab). It is solved by least squares and
refused if it does not hold.
"""

from __future__ import annotations

import json
import os
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..files import remove_leftover_temporaries, save_error, write_together
from ..nn import LayerNorm, TinyTransformer
from ..training.run_folder import LOCK, RUN_FILES
from .configs import config_for
from .names import links
from .safetensors_files import encode_tensors

__all__ = ["MODEL_FILES", "save_pretrained"]

# The files of a Hugging Face model folder that transformers or tokenizers read (weights in any
# format, shards and their index, configs, every tokenizer's files): what replacing a model removes.
MODEL_FILES = ("config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json", "*.bin",
               "*.bin.index.json", "*.h5", "*.msgpack", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
               "*.model", "chat_template.jinja", "chat_template.json")


def save_pretrained(model: TinyTransformer, path: str | os.PathLike, tokenizer: Any = None, *,
                    overwrite: bool = False) -> Path:
    """Write `model` (and `tokenizer`, if it has ``to_json``) as a Hugging Face folder at `path`.

    `path` must be new or empty; with `overwrite`, it may hold a model (config.json), which is
    replaced whole (see the module's docstring).

    Raises:
        CheckpointError: the model has no Hugging Face model type (the message says which option
            has none), or its LM head's bias cannot be folded away.
        FileExistsError: `path` is a run folder, or holds files without `overwrite`, or holds
            files but no model with it.
        SaveError: a file could not be written (a full disk); the folder is as it was.
        Nothing is written in any of these cases.
    """
    config = config_for(model)
    state = model.state_dict()
    if "head.bias" in state:
        state["ln_f.bias"] = _fold_head_bias(model, state)
        del state["head.bias"]
    tensors = {link.theirs: link.theirs_from([state.pop(o) for o in link.ours])
               for link in links(config["model_type"], set(model.state_dict()), len(model.blocks))}
    if state:
        raise CheckpointError(f"save_pretrained: parameters with no place in a {config['model_type']} "
                              f"checkpoint: {', '.join(state)}")
    contents = {"model.safetensors": encode_tensors(tensors)}
    if hasattr(tokenizer, "to_json"):
        contents["tokenizer.json"] = tokenizer.to_json().encode("utf-8")
    # config.json last: a folder is a model once config.json is there
    contents["config.json"] = (json.dumps(config, indent=2) + "\n").encode()
    folder = Path(path)
    stale = _model_files_to_replace(folder, overwrite, tuple(contents))
    made = _make_folders(folder)
    try:
        write_together(folder, contents)
    except BaseException:
        for new in reversed(made):
            new.rmdir()
        raise
    for name in stale - set(contents):
        (folder / name).unlink()
    return folder


def _model_files_to_replace(folder: Path, overwrite: bool, written: tuple[str, ...]) -> set[str]:
    """The names of the model files in `folder` (empty for a new folder), after removing the
    temporary files an earlier save of the `written` names left when it was killed;
    FileExistsError for a folder that may not be written (a run's, one holding files without
    `overwrite`, one holding files but no model)."""
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"save_pretrained: {folder} is a file, not a folder")
    if not folder.is_dir():
        return set()
    run_files = [name for name in (*RUN_FILES, LOCK) if (folder / name).exists()]
    if run_files:
        raise FileExistsError(f"save_pretrained: {folder} is the folder of a tinygrad-attn run "
                              f"({', '.join(run_files)}), never written into: a model there would be "
                              f"read instead of the run's checkpoint; write it to another folder")
    remove_leftover_temporaries(folder, written)
    entries = sorted(p.name for p in folder.iterdir())
    if not entries:
        return set()
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    if not overwrite:
        raise FileExistsError(f"save_pretrained: {folder} is not empty ({shown}); write to a new or "
                              f"empty folder, or pass overwrite=True (export: --overwrite) to replace "
                              f"the model in it")
    if "config.json" not in entries:
        raise FileExistsError(f"save_pretrained: {folder} holds no model (no config.json) but other files "
                              f"({shown}); overwrite replaces a model, so write to a new or empty folder")
    return {name for name in entries if (folder / name).is_file()
            and any(fnmatch(name, pattern) for pattern in MODEL_FILES)}


def _make_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; returns those it made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    for i, new in enumerate(missing):
        try:
            new.mkdir()
        except OSError as error:
            for made in reversed(missing[:i]):
                made.rmdir()
            raise save_error(new, error, None) from None
    return missing


def _fold_head_bias(model: TinyTransformer, state: dict[str, np.ndarray]) -> np.ndarray:
    """ln_f's new bias β + δ, with δ W = b (see the module's docstring)."""
    w, b = state["head.weight"].astype(np.float64), state["head.bias"].astype(np.float64)
    if not isinstance(model.ln_f, LayerNorm):
        raise CheckpointError("save_pretrained: the LM head has a bias, which no llama, mistral or qwen2 "
                              "checkpoint holds, and RMSNorm has no bias to fold it into; a model built "
                              "with head_bias=False exports")
    delta = np.linalg.lstsq(w.T, b, rcond=None)[0]                 # δ W = b  ⇔  Wᵀ δ = b
    error = np.abs(delta @ w - b).max()
    if error > 1e-6 * max(1.0, np.abs(b).max()):
        raise CheckpointError(f"save_pretrained: the LM head's bias cannot be folded into ln_f's "
                              f"(d_model {w.shape[0]} < vocab {w.shape[1]}; off by {error:.2g}); gpt2 has "
                              f"no head bias")
    return (state["ln_f.bias"] + delta).astype(state["ln_f.bias"].dtype)
