"""A Hugging Face ``config.json`` read as ``TinyTransformer`` options, and written back.

Each supported model type reads the keys that fix its math and checks the values it cannot
follow (a RoPE scaling, another activation); keys that never change the outputs of a model in
eval mode (dropouts, token ids, bookkeeping) are passed over. Any other key is refused by name:
it might change the math, and a model that silently computes something else is worse than none.

Example:
    >>> options = options_from_config({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
    ...     "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 16,
    ...     "max_position_embeddings": 32, "rope_theta": 500000.0, "rms_norm_eps": 1e-5})
    >>> options["rope_base"], options["norm_eps"], options["attn_bias"], options["tie_embeddings"]
    (500000.0, 1e-05, False, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import CheckpointError
from ..nn import LayerNorm, RMSNorm, SwiGLU, TiedHead, TinyTransformer

__all__ = ["CONFIG_KEYS", "MODEL_TYPES", "config_for", "options_from_config"]

# Keys of every config that change nothing a model computes in eval mode.
PASSED_OVER = frozenset({
    "_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype", "model_type",
    "output_hidden_states", "output_attentions", "return_dict", "use_cache", "id2label", "label2id",
    "problem_type", "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id",
    "chunk_size_feed_forward", "is_encoder_decoder", "task_specific_params", "tokenizer_class",
    "attention_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_ctx", "pretraining_tp",
    "reorder_and_upcast_attn", "_attn_implementation_autoset", "max_window_layers",
})

GPT2_ACTIVATIONS = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}


class _Reader:
    """A config's keys as they are read; ``rest()`` lists those nobody read."""

    def __init__(self, config: dict[str, Any], model_type: str):
        self.config, self.model_type, self.read = config, model_type, set(PASSED_OVER)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        value = self.config.get(key)
        return default if value is None else value

    def need(self, key: str, default: Any, allowed: tuple[Any, ...]) -> Any:
        value = self.get(key, default)
        if value not in allowed:
            raise CheckpointError(f"config.json: {key} = {value!r} is not supported for {self.model_type} "
                                  f"(tinygrad_attn follows {' or '.join(map(repr, allowed))})")
        return value

    def rest(self) -> list[str]:
        return sorted(k for k in self.config if k not in self.read)


def _gpt2(c: _Reader) -> dict[str, Any]:
    c.need("scale_attn_weights", True, (True,))
    c.need("scale_attn_by_inverse_layer_idx", False, (False,))
    c.need("add_cross_attention", False, (False,))
    activation = c.need("activation_function", "gelu_new", tuple(GPT2_ACTIVATIONS))
    d_model = c.get("n_embd", 768)
    return dict(vocab_size=c.get("vocab_size", 50257), d_model=d_model, num_heads=c.get("n_head", 12),
                num_layers=c.get("n_layer", 12), max_len=c.get("n_positions", 1024),
                d_ff=c.get("n_inner", 4 * d_model), norm="layer", mlp="gelu", positions="learned",
                norm_eps=float(c.get("layer_norm_epsilon", 1e-5)),
                gelu_approximate=GPT2_ACTIVATIONS[activation], head_bias=False,
                tie_embeddings=bool(c.get("tie_word_embeddings", True)))


def _rope_base(c: _Reader) -> float:
    """rope_theta, from the key of transformers 4 or the rope_parameters of transformers 5; a RoPE
    scaling (Llama 3.1's "llama3", YaRN, linear, dynamic) is refused by name."""
    parameters = dict(c.get("rope_parameters", {}))
    scaling = c.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", parameters.get("rope_type", "default")))
    if kind != "default":
        raise CheckpointError(f"config.json: RoPE scaling {kind!r} is not supported for {c.model_type} "
                              f"(tinygrad_attn rotates by the plain angles, rope_type 'default')")
    return float(c.get("rope_theta", parameters.get("rope_theta", 10000.0)))


def _llama_family(c: _Reader, qkv_bias: bool, out_bias: bool, mlp_bias: bool,
                  window: int | None) -> dict[str, Any]:
    c.need("hidden_act", "silu", ("silu",))
    layers = c.get("num_hidden_layers", 32)
    kinds = set(c.get("layer_types", ["full_attention"] * layers))
    if window is None and kinds != {"full_attention"}:
        raise CheckpointError(f"config.json: layer_types {sorted(kinds)} are not supported for "
                              f"{c.model_type} (tinygrad_attn follows full attention in every layer)")
    heads = c.get("num_attention_heads", 32)
    return dict(vocab_size=c.get("vocab_size", 32000), d_model=c.get("hidden_size", 4096), num_heads=heads,
                num_layers=layers, max_len=c.get("max_position_embeddings", 2048),
                d_ff=c.get("intermediate_size", 11008), norm="rms", mlp="swiglu", positions="rope",
                n_kv_heads=c.get("num_key_value_heads", heads), window=window, head_dim=c.get("head_dim"),
                rope_base=_rope_base(c), attn_bias=qkv_bias, attn_out_bias=out_bias, mlp_bias=mlp_bias,
                norm_eps=float(c.get("rms_norm_eps", 1e-6)), head_bias=False,
                tie_embeddings=bool(c.get("tie_word_embeddings", False)))


def _llama(c: _Reader) -> dict[str, Any]:
    bias = bool(c.get("attention_bias", False))
    return _llama_family(c, bias, bias, bool(c.get("mlp_bias", False)), None)


def _mistral(c: _Reader) -> dict[str, Any]:
    return _llama_family(c, False, False, False, c.get("sliding_window"))


def _qwen2(c: _Reader) -> dict[str, Any]:
    c.need("use_sliding_window", False, (False,))
    c.need("use_mrope", False, (False,))
    c.get("sliding_window")             # read only with use_sliding_window, which is refused
    return _llama_family(c, True, False, False, None)


MODEL_TYPES: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "gpt2": _gpt2, "llama": _llama, "mistral": _mistral, "qwen2": _qwen2}

# The keys each model type reads, for the docs: those that fix the math.
CONFIG_KEYS = {
    "gpt2": ("vocab_size n_embd n_head n_layer n_positions n_inner activation_function layer_norm_epsilon "
             "tie_word_embeddings scale_attn_weights scale_attn_by_inverse_layer_idx add_cross_attention"),
    "llama": ("vocab_size hidden_size num_attention_heads num_key_value_heads num_hidden_layers head_dim "
              "intermediate_size max_position_embeddings rope_theta rope_parameters rope_scaling "
              "rms_norm_eps attention_bias mlp_bias hidden_act tie_word_embeddings layer_types"),
    "mistral": "as llama without attention_bias and mlp_bias, plus sliding_window",
    "qwen2": "as llama with q/k/v biases, plus use_sliding_window use_mrope sliding_window",
}


def options_from_config(config: Any) -> dict[str, Any]:
    """The ``TinyTransformer`` keyword arguments of a parsed config.json.

    Raises:
        CheckpointError: not a JSON object, an unknown model_type (the message lists the known
            ones), a value tinygrad_attn does not follow, or a key it does not know.
    """
    if not isinstance(config, dict):
        raise CheckpointError(f"config.json: expected a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise CheckpointError(f"config.json: model_type {model_type!r} is not supported; tinygrad_attn "
                              f"loads {', '.join(MODEL_TYPES)}")
    reader = _Reader(config, model_type)
    options = MODEL_TYPES[model_type](reader)
    unknown = reader.rest()
    if unknown:
        raise CheckpointError(f"config.json: key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                              f"unknown to tinygrad_attn for {model_type}: it may change the math, so the "
                              f"model is not loaded")
    return options


def config_for(model: TinyTransformer) -> dict[str, Any]:
    """The config.json of `model`, read from its modules: gpt2 for LayerNorm + GELU + learned
    positions, llama, mistral (a window) or qwen2 (biases on q/k/v only) for RMSNorm + SwiGLU +
    RoPE.

    Raises:
        CheckpointError: the model mixes the two families, or has an option its model type lacks
            (named in the message).
    """
    block = model.blocks[0] if model.blocks else None
    if block is None:
        raise CheckpointError("save_pretrained: a model without blocks has no Hugging Face model type")
    attn, tied = block.attn, isinstance(model.head, TiedHead)
    common = {"vocab_size": model.vocab_size, "tie_word_embeddings": tied,
              "dtype": str(model.tok_emb.weight.dtype), "bos_token_id": None, "eos_token_id": None}
    if isinstance(model.ln_f, LayerNorm) and model.pos_emb is not None and not isinstance(block.mlp, SwiGLU):
        _refuse_unless(attn.q_proj.bias is not None and attn.out_proj.bias is not None
                       and block.mlp.fc1.bias is not None, "gpt2 has biases in every projection")
        _refuse_unless(attn.n_kv_heads == attn.num_heads and attn.window is None and not attn.rope
                       and attn.d_head * attn.num_heads == attn.d_model and attn.scale is None,
                       "gpt2 has as many kv heads as heads, no window, no RoPE, d_model / heads per head")
        activation = {"tanh": "gelu_new", "none": "gelu"}[block.mlp.approximate]
        return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], **common,
                "n_embd": attn.d_model, "n_head": attn.num_heads, "n_layer": len(model.blocks),
                "n_positions": model.max_len, "n_inner": block.mlp.fc1.weight.shape[1],
                "activation_function": activation, "layer_norm_epsilon": model.ln_f.eps}
    _refuse_unless(isinstance(model.ln_f, RMSNorm) and model.pos_emb is None
                   and isinstance(block.mlp, SwiGLU),
                   "a Hugging Face model is either GPT-2-like (LayerNorm, GELU, learned positions) or "
                   "Llama-like (RMSNorm, SwiGLU, RoPE)")
    _refuse_unless(attn.scale is None, "Llama-like models scale scores by 1/sqrt(head_dim)")
    qkv, out, mlp = (attn.q_proj.bias is not None, attn.out_proj.bias is not None,
                     block.mlp.w1.bias is not None)
    llama_like = {**common, "hidden_size": attn.d_model, "num_attention_heads": attn.num_heads,
                  "num_key_value_heads": attn.n_kv_heads, "num_hidden_layers": len(model.blocks),
                  "head_dim": attn.d_head, "intermediate_size": block.mlp.w1.weight.shape[1],
                  "max_position_embeddings": model.max_len, "rope_theta": attn.rope_base,
                  "rms_norm_eps": model.ln_f.eps, "hidden_act": "silu"}
    if attn.window is not None:
        _refuse_unless(not (qkv or out or mlp), "mistral has no biases")
        return {"model_type": "mistral", "architectures": ["MistralForCausalLM"], **llama_like,
                "sliding_window": attn.window}
    if qkv and not out and not mlp:
        return {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], **llama_like,
                "use_sliding_window": False}
    _refuse_unless(qkv == out, "llama has biases on all four attention projections or on none")
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], **llama_like,
            "attention_bias": qkv, "mlp_bias": mlp}


def _refuse_unless(condition: bool, why: str) -> None:
    if not condition:
        raise CheckpointError(f"save_pretrained: this model has no Hugging Face model type: {why}")
