"""The real shapes, GPT-2 124M and SmolLM-135M: built at random by transformers, saved in the
Hugging Face layout, read back by ``ta.load_pretrained``, and trained one AdamW step at a time by
both engines on the same batch.

The model transformers builds is PyTorch's side, as a PyTorch user trains it (its default
attention, ``use_cache=False``); the folder it saves is what ours reads, so both start from the
same weights and their first losses agree to float32 rounding.
"""

from __future__ import annotations

import tempfile

import numpy as np

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import optim

from .. import specs
from ..smollm import SHAPE as SMOLLM_SHAPE
from .measure import Contender
from .runtimes import Place

__all__ = ["GPT2", "SMOLLM", "twins"]

# GPT-2 small (124M) and SmolLM-135M, each with the batch of the row: 8 sequences of 512 tokens.
GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
        "n_head": 12, "batch": 8, "seq": 512}
SMOLLM = {"model_type": "llama", **SMOLLM_SHAPE, "batch": 8, "seq": 512}


def _config(sizes: dict):
    """The transformers config of `sizes` (dropout off: the two engines take the same step)."""
    import transformers

    shape = {k: v for k, v in sizes.items() if k not in ("model_type", "batch", "seq")}
    if sizes["model_type"] == "gpt2":
        return transformers.GPT2Config(**shape, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.LlamaConfig(**shape, tie_word_embeddings=True, rms_norm_eps=1e-5)


def twins(sizes: dict, place: Place) -> list[Contender]:
    """Ours and PyTorch's train step (forward, next-token cross-entropy, backward, AdamW) of the
    model `sizes` describes (``GPT2`` or ``SMOLLM``, or smaller for a test), each on its device."""
    import torch
    import transformers

    config = _config(sizes)
    torch.manual_seed(0)
    kind = {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM}[sizes["model_type"]]
    with torch.device(place.torch_device):
        theirs = kind(config).float().train()
    with tempfile.TemporaryDirectory() as folder:
        theirs.save_pretrained(folder)
        ours = ta.load_pretrained(folder)[0].to(place.ours_device).train()
    tokens = np.random.default_rng(0).integers(0, sizes["vocab_size"], (sizes["batch"], sizes["seq"] + 1))
    ids, targets = tokens[:, :-1], tokens[:, 1:]
    training = specs.TEXT_TRAINING
    our_optimizer = optim.AdamW(ours.parameters(), lr=training["lr"], weight_decay=training["weight_decay"])
    their_optimizer = torch.optim.AdamW(theirs.parameters(), lr=training["lr"],
                                        weight_decay=training["weight_decay"])
    our_ids, our_targets = (ta.Tensor(a, device=place.ours_device) for a in (ids, targets))
    their_ids, their_targets = (torch.from_numpy(a).to(place.torch_device) for a in (ids, targets))

    def our_step() -> ta.Tensor:
        loss = F.cross_entropy(ours(our_ids), our_targets)                      # logits (B, T, V)
        our_optimizer.zero_grad()
        loss.backward()
        our_optimizer.step()
        return loss

    def their_step() -> torch.Tensor:
        logits = theirs(their_ids, use_cache=False).logits                      # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), their_targets.flatten())
        their_optimizer.zero_grad()
        loss.backward()
        their_optimizer.step()
        return loss
    attention = theirs.config._attn_implementation
    return [Contender("ours", place.ours, our_step, gives_loss=True),
            Contender(f"PyTorch (transformers, {attention} attention)", place.torch, their_step,
                      gives_loss=True)]
