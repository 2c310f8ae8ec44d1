"""``load_pretrained``: a Hugging Face model folder (or one of our runs) as a model and its tokenizer.

Everything is checked before any memory is taken for the model: the files are there, config.json
is understood, the tokenizer fits the model's vocabulary, every weight file's header is sound, each
tensor has the shape the config gives it, none is missing and none is left over. Then the model is
built and each tensor read into it, one at a time; a NaN found while reading refuses the whole
model. Nothing half-built is ever returned, and every refusal is a CheckpointError.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..dtypes import get_default_dtype
from ..errors import CheckpointError, TokenizerError
from ..nn import TinyTransformer, TransformerConfig
from ..text import HuggingFaceTokenizer
from ..training import Run
from ..training.run_folder import CHECKPOINT
from .configs import config_from_json
from .names import GPT2_BUFFERS, checkpoint_shapes, layers_held, links
from .run_tokenizer import task_tokenizer
from .safetensors_files import TensorEntry, list_tensors, read_tensor

__all__ = ["load_pretrained"]


def load_pretrained(path: str | os.PathLike) -> tuple[TinyTransformer, Any]:
    """(model, tokenizer) from a folder in the Hugging Face layout, or from one of our runs.

    A Hugging Face folder holds config.json (model_type gpt2, llama, mistral or qwen2), the weights
    as model.safetensors or as shards listed in model.safetensors.index.json (float64, float32,
    float16 or bfloat16, converted to the default dtype), and tokenizer.json (the tokenizer is
    None without it). A run folder of ``tinygrad-attn train`` (checkpoint.npz), or that checkpoint
    file itself, gives its model and its tokenizer (a text run's own; the toy tasks' symbols
    otherwise). The model is in eval mode.

    Raises:
        CheckpointError: `path` is no folder (a file other than a run's checkpoint); anything
            wrong with the folder, each named in the message: a file is
            missing, unreadable, not what it should be, or truncated; the config has an unknown
            model_type, key or value that changes the math, or a value of the wrong type; the
            weights do not fit the config (tensors missing, left over or of another shape: checked
            against the files' headers before any memory is taken for the model); a tensor holds
            NaN; tokenizer.json is not a tokenizer, or has ids the model has no embedding for.
    """
    folder = Path(path)
    if folder.is_file() and folder.suffix == ".npz":            # a run's checkpoint file: as its folder
        folder, checkpoint = folder.parent, folder
    else:
        checkpoint = folder / CHECKPOINT
    if folder.is_file():
        raise CheckpointError(f"{folder}: a file, not a folder: give a model folder (config.json, "
                              f"model.safetensors, tokenizer.json) or a run folder (or its {CHECKPOINT}), "
                              f"such as the folder that holds this file, {folder.parent}")
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such folder (a model folder holds config.json and "
                              f"model.safetensors, a run folder {CHECKPOINT})")
    if checkpoint.is_file() and not (folder / "config.json").exists():
        run = Run.load(checkpoint, device="cpu")                 # a text run keeps its tokenizer
        return run.model.eval(), getattr(run.task, "tokenizer", None) or task_tokenizer()
    try:
        return _load_folder(folder)
    except OSError as e:                # a file we cannot read: no permission, a folder in its place
        raise CheckpointError(f"{e.filename or folder}: cannot be read ({e.strerror or e})") from None


def _load_folder(folder: Path) -> tuple[TinyTransformer, Any]:
    """`load_pretrained` of a Hugging Face folder: every check first, then the model built and read."""
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder}: no config.json (a Hugging Face model folder holds config.json, "
                              f"model.safetensors and tokenizer.json)")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{folder / 'config.json'}: not JSON ({e})") from None
    transformer = config_from_json(config)
    model_type = config["model_type"]
    tokenizer = _tokenizer(folder, transformer.vocab_size)
    entries = _checked_entries(model_type, transformer, list_tensors(folder))
    try:
        model = TinyTransformer(transformer)
    except ValueError as e:
        raise CheckpointError(f"{folder / 'config.json'}: describes no model tinygrad_attn can build ({e})") \
            from None
    params, dtype = dict(model.named_parameters()), get_default_dtype()
    for link in links(model_type, set(params), transformer.num_layers):
        array = read_tensor(link.theirs, entries[link.theirs], dtype)
        for ours, part in zip(link.ours, link.ours_from(array)):
            params[ours].data = part
    return model.eval(), tokenizer


def _tokenizer(folder: Path, vocab_size: int) -> HuggingFaceTokenizer | None:
    """The folder's tokenizer.json (None without one), with no id the model's embedding lacks; a
    tokenizer with fewer ids than the model (a vocabulary padded to a round size, as Qwen2's) takes
    the model's ids, those past its own decoding to no text, as in transformers."""
    if not (folder / "tokenizer.json").is_file():
        return None
    try:
        tokenizer = HuggingFaceTokenizer.from_file(folder / "tokenizer.json")
    except TokenizerError as e:
        raise CheckpointError(str(e)) from None
    if tokenizer.vocab_size > vocab_size:
        raise CheckpointError(f"{folder / 'tokenizer.json'}: {tokenizer.vocab_size} ids, but the model's "
                              f"vocab_size is {vocab_size}: ids {vocab_size} to {tokenizer.vocab_size - 1} "
                              f"have no embedding (the tokenizer belongs to another model)")
    return HuggingFaceTokenizer(tokenizer.tokenizer, vocab_size)


def _checked_entries(model_type: str, transformer: TransformerConfig,
                     entries: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
    """The weight files' tensors under the names `links` gives, after checking that they are the
    tensors the config describes, every name and shape, before any model is built: a config whose
    sizes the files do not hold is refused at once, however large it claims to be."""
    if model_type == "gpt2":        # older GPT-2 files: no "transformer." prefix, and causal-mask buffers
        entries = {n if n.startswith(("transformer.", "lm_head.")) else f"transformer.{n}": e
                   for n, e in entries.items() if not n.endswith(GPT2_BUFFERS)}
    layers, held = transformer.num_layers, layers_held(model_type, set(entries))
    if len(held) != layers or held != list(range(len(held))):     # first: checkpoint_shapes lists them all
        key = "n_layer" if model_type == "gpt2" else "num_hidden_layers"
        raise CheckpointError(f"the weights do not fit the config: config.json's {key} is {layers} but the "
                              f"weights hold {_listed([f'layer {i}' for i in held])}")
    wanted = checkpoint_shapes(model_type, transformer)
    missing = [name for name in wanted if name not in entries]
    tied = transformer.tie_embeddings               # a copy of the tied embedding may be in the file
    leftover = [n for n in entries if n not in wanted and not (tied and n == "lm_head.weight")]
    if missing or leftover:
        raise CheckpointError(f"the weights do not fit the config: missing {_listed(missing)}; left over "
                              f"{_listed(leftover)}")
    for name, shape in wanted.items():
        if entries[name].shape != shape:
            raise CheckpointError(f"the weights do not fit the config: tensor {name} has shape "
                                  f"{entries[name].shape} in {entries[name].file.name} but config.json's "
                                  f"sizes give {shape}")
    return entries


def _listed(names: list[str]) -> str:
    return f"{len(names)}: " + ", ".join(names[:8]) + (", …" if len(names) > 8 else "") if names else "none"
