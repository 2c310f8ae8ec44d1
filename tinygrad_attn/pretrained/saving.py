"""``save_pretrained``: a model written as a Hugging Face folder that transformers loads.

The folder holds config.json (the model type read from the model's modules, see
``configs.config_for``), model.safetensors (our parameters under transformers' names, linear
weights transposed to (out, in)) and, given a tokenizer that can save itself, tokenizer.json.

No Hugging Face model type of ours has a bias on the LM head, which our toy runs' default models
have (``--arch llama`` models have none). For a LayerNorm model it is folded into ln_f's bias:
logits = (n ⊙ γ + β) W + b equal n ⊙ γ W + (β + δ) W when δ W = b, which has an exact solution
when W (d_model × vocab) has rank vocab (d_model ≥ vocab). It is solved by least squares and
refused if it does not hold.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..nn import LayerNorm, TinyTransformer
from .configs import config_for
from .names import links
from .safetensors_files import write_tensors

__all__ = ["save_pretrained"]


def save_pretrained(model: TinyTransformer, path: str | os.PathLike, tokenizer: Any = None) -> Path:
    """Write `model` (and `tokenizer`, if it has ``save``) as a Hugging Face folder at `path`.

    Raises:
        CheckpointError: the model has no Hugging Face model type (the message says which option
            has none), or its LM head's bias cannot be folded away; nothing is written then.
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
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    write_tensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if hasattr(tokenizer, "save"):
        tokenizer.save(folder / "tokenizer.json")
    return folder


def _fold_head_bias(model: TinyTransformer, state: dict[str, np.ndarray]) -> np.ndarray:
    """ln_f's new bias β + δ, with δ W = b (see the module's docstring)."""
    w, b = state["head.weight"].astype(np.float64), state["head.bias"].astype(np.float64)
    if not isinstance(model.ln_f, LayerNorm):
        raise CheckpointError("save_pretrained: the LM head has a bias, which no llama, mistral or qwen2 "
                              "checkpoint holds, and RMSNorm has no bias to fold it into; a model built "
                              "with head_bias=False exports. A run of `tinygrad-attn train --arch llama` "
                              "saved by an earlier version of tinygrad_attn has one: train it again with "
                              "this version, whose llama models have no head bias")
    delta = np.linalg.lstsq(w.T, b, rcond=None)[0]                 # δ W = b  ⇔  Wᵀ δ = b
    error = np.abs(delta @ w - b).max()
    if error > 1e-6 * max(1.0, np.abs(b).max()):
        raise CheckpointError(f"save_pretrained: the LM head's bias cannot be folded into ln_f's "
                              f"(d_model {w.shape[0]} < vocab {w.shape[1]}; off by {error:.2g}); gpt2 has "
                              f"no head bias")
    return (state["ln_f.bias"] + delta).astype(state["ln_f.bias"].dtype)
