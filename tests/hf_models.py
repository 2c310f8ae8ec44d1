"""Tiny random transformers models (the oracle of the pretrained tests), built without downloads.

transformers' Llama family keeps RMSNorm and the RoPE angles in float32 even in a float64 model
(and the eager softmax too), which limits agreement to about 1e-7. ``exact_float64`` replaces
those two forwards by the same formulas in float64, and the models run PyTorch's SDPA, which
keeps float64, so that the comparison can be held to 1e-10.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch
import transformers as T

COMMON = dict(vocab_size=61, hidden_size=24, num_attention_heads=4, num_hidden_layers=2,
              intermediate_size=40, max_position_embeddings=64)

# model type → (config, model class); each with the options its test is about
KINDS = {
    "llama": (lambda: T.LlamaConfig(**COMMON, num_key_value_heads=2, head_dim=8, rope_theta=500000.0,
                                    rms_norm_eps=1e-5), T.LlamaForCausalLM),
    "gpt2": (lambda: T.GPT2Config(vocab_size=61, n_embd=24, n_head=4, n_layer=2, n_positions=64),
             T.GPT2LMHeadModel),
    "mistral": (lambda: T.MistralConfig(**COMMON, num_key_value_heads=2, sliding_window=5),
                T.MistralForCausalLM),
    "qwen2": (lambda: T.Qwen2Config(**COMMON, num_key_value_heads=1), T.Qwen2ForCausalLM),
}


def _rms_norm(self, x):
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _rotary(self, x, position_ids):
    dim = self.inv_freq.shape[0] * 2
    base = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def exact_float64(monkeypatch) -> None:
    """RMSNorm and RoPE's angles of every Llama-family model computed in the model's dtype
    (Ministral: what transformers builds of a mistral config with layer_types)."""
    for family in ("llama", "mistral", "ministral", "qwen2"):
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
        prefix = {"llama": "Llama", "mistral": "Mistral", "ministral": "Ministral", "qwen2": "Qwen2"}[family]
        monkeypatch.setattr(getattr(module, f"{prefix}RMSNorm"), "forward", _rms_norm)
        monkeypatch.setattr(getattr(module, f"{prefix}RotaryEmbedding"), "forward", _rotary)


def hf_model(kind: str, dtype=torch.float64, seed: int = 0):
    """A tiny random model of `kind` in eval mode, every weight (norms and biases too) ~ N(0, 0.3²)
    so that each one matters."""
    make_config, cls = KINDS[kind]
    config = make_config()
    config._attn_implementation = "sdpa"
    config.eos_token_id = None
    torch.manual_seed(seed)
    model = cls(config).to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def torch_loss(model, ids: np.ndarray):
    """(logits, next-token cross-entropy) of a transformers model on `ids` (batch, seq)."""
    logits = model(torch.tensor(ids)).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             torch.tensor(ids[:, 1:]).reshape(-1))
    return logits, loss
