"""A Hugging Face ``config.json`` read as a ``TransformerConfig``, and written back.

Each supported model type reads the keys that fix its math as transformers 5 reads them: the same
defaults (a key left out), the same meaning of null, the same precedence between old and new
spellings (``rope_scaling``, ``rope_theta`` and ``rope_parameters``; Mistral's ``layer_types``).
Every value's JSON type is checked (a string is never a flag, a float never a size). A value
tinygrad_attn cannot follow (a RoPE scaling, another activation, layers that mix full and
sliding-window attention) is refused by name, and so are two keys that say different things
(transformers 4 and 5 would read them differently). Keys that never change the outputs of a
model in eval mode (dropouts, token ids, bookkeeping) are passed over. Any other key is refused by
name: it might change the math, and a model that silently computes something else is worse than
none. docs/real_model.md §6 lists every key and what is done with it.

Example:
    >>> config = config_from_json({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
    ...     "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 16,
    ...     "max_position_embeddings": 32, "rope_theta": 500000.0, "rms_norm_eps": 1e-5})
    >>> config.rope_base, config.norm_eps, config.attn_bias, config.tie_embeddings
    (500000.0, 1e-05, False, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ..errors import CheckpointError
from ..nn import LayerNorm, RMSNorm, SwiGLU, TiedHead, TinyTransformer, TransformerConfig

__all__ = ["MODEL_TYPES", "PASSED_OVER", "config_for", "config_from_json", "shown"]

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
FULL, SLIDING = "full_attention", "sliding_attention"
ROPE_KEYS = ("rope_type", "type", "rope_theta")        # what a plain ("default") RoPE reads
DEFAULT_THETA = 10000.0


@dataclass(frozen=True)
class _Kind:
    """What a config value must be: `fits` tests a parsed JSON value, `name` says it in messages."""

    name: str
    fits: Callable[[Any], bool]


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:                   # an integer too large for a float
        return False


SIZE = _Kind("an integer ≥ 1", lambda v: type(v) is int and v >= 1)
COUNT = _Kind("an integer ≥ 0", lambda v: type(v) is int and v >= 0)
NUMBER = _Kind("a finite number", lambda v: type(v) in (int, float) and _finite(v))
EPS = _Kind("a finite number ≥ 0", lambda v: NUMBER.fits(v) and v >= 0)
THETA = _Kind("a finite number > 0", lambda v: NUMBER.fits(v) and v > 0)
FLAG = _Kind("true or false", lambda v: type(v) is bool)
TEXT = _Kind("a string", lambda v: type(v) is str)
OBJECT = _Kind("a JSON object", lambda v: type(v) is dict)
NAMES = _Kind("a list of strings", lambda v: type(v) is list and all(type(s) is str for s in v))

_REFUSED = object()     # `null=` of a key that must not be null (transformers refuses null there)


def shown(value: Any, limit: int = 60) -> str:
    """A value as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class _Reader:
    """A config's keys as they are read, each checked to be of its kind; ``rest()`` lists those
    nobody read."""

    def __init__(self, config: dict[str, Any], model_type: str):
        self.config, self.model_type, self.read = config, model_type, set(PASSED_OVER)

    def get(self, key: str, kind: _Kind, default: Any, null: Any = _REFUSED) -> Any:
        """config[key], checked to be `kind`; `default` when the key is absent and `null` when it
        is null (a CheckpointError where null means nothing to transformers)."""
        self.read.add(key)
        if key not in self.config:
            return default
        value = self.config[key]
        if value is None:
            if null is _REFUSED:
                raise CheckpointError(f"config.json: {key} is null; {self.model_type} needs {kind.name}")
            return null
        if not kind.fits(value):
            raise CheckpointError(f"config.json: {key} = {shown(value)} is not {kind.name}")
        return value

    def need(self, key: str, kind: _Kind, default: Any, allowed: tuple[Any, ...]) -> Any:
        """`get`, and a CheckpointError unless the value is one of `allowed`."""
        value = self.get(key, kind, default)
        if value not in allowed:
            raise CheckpointError(f"config.json: {key} = {value!r} is not supported for {self.model_type} "
                                  f"(tinygrad_attn follows {' or '.join(map(repr, allowed))})")
        return value

    def refuse(self, why: str) -> None:
        raise CheckpointError(f"config.json: {why}")

    def rest(self) -> list[str]:
        return sorted(k for k in self.config if k not in self.read)


def _gpt2(c: _Reader) -> TransformerConfig:
    c.need("scale_attn_weights", FLAG, True, (True,))
    c.need("scale_attn_by_inverse_layer_idx", FLAG, False, (False,))
    c.need("add_cross_attention", FLAG, False, (False,))
    activation = c.need("activation_function", TEXT, "gelu_new", tuple(GPT2_ACTIVATIONS))
    d_model = c.get("n_embd", SIZE, 768)
    return TransformerConfig.gpt2(
        c.get("vocab_size", SIZE, 50257), d_model=d_model, num_heads=c.get("n_head", SIZE, 12),
        num_layers=c.get("n_layer", COUNT, 12), max_len=c.get("n_positions", SIZE, 1024),
        d_ff=c.get("n_inner", SIZE, 4 * d_model, null=4 * d_model),
        norm_eps=float(c.get("layer_norm_epsilon", EPS, 1e-5)), gelu_approximate=GPT2_ACTIVATIONS[activation],
        tie_embeddings=c.get("tie_word_embeddings", FLAG, True))


def _rope_base(c: _Reader) -> float:
    """RoPE's theta as transformers 5 reads it: ``rope_scaling`` (the name of transformers 4)
    replaces ``rope_parameters`` whole; its rope_theta, else the top-level rope_theta, else 10000.
    Two places that give different thetas, or both dicts given and different, are refused (the
    two versions of transformers read them differently); so is a RoPE scaling (Llama 3.1's
    "llama3", YaRN, linear, dynamic) and any key a plain RoPE does not read."""
    scaling = c.get("rope_scaling", OBJECT, {}, null={})
    parameters = c.get("rope_parameters", OBJECT, {}, null={})
    if scaling and parameters and scaling != parameters:
        c.refuse(f"rope_scaling {shown(scaling)} and rope_parameters {shown(parameters)} disagree "
                 f"(transformers 5 reads rope_scaling alone, 4 knows no rope_parameters); give one")
    name, rope = ("rope_scaling", scaling) if scaling else ("rope_parameters", parameters)
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        c.refuse(f"RoPE scaling {shown(kind)} ({name}) is not supported for {c.model_type} "
                 f"(tinygrad_attn rotates by the plain angles, rope_type 'default')")
    unread = sorted(set(rope) - set(ROPE_KEYS))
    if unread:
        c.refuse(f"{name} has {', '.join(unread)}, which a plain RoPE (rope_type 'default') does not "
                 f"read (transformers passes over it); remove it, or it is not the model you meant")
    theta = c.get("rope_theta", THETA, None)
    if "rope_theta" in rope:
        if theta is not None and rope["rope_theta"] != theta:
            c.refuse(f"rope_theta = {theta!r} and {name}.rope_theta = {shown(rope['rope_theta'])} disagree "
                     f"(transformers 5 reads {name}'s, 4 the top-level one); give one")
        theta = rope["rope_theta"]
        if not THETA.fits(theta):
            c.refuse(f"{name}.rope_theta = {shown(theta)} is not {THETA.name}")
    return float(DEFAULT_THETA if theta is None else theta)


def _one_window(c: _Reader, kinds: set[str], window: int | None) -> int | None:
    """The window of every layer, given the layers' attention `kinds` (of layer_types) and the
    sliding layers' `window`; refused when layers differ (tinygrad_attn has one for all)."""
    unknown = sorted(kinds - {FULL, SLIDING})
    if unknown:
        c.refuse(f"layer_types {', '.join(map(repr, unknown))} are not supported for {c.model_type} "
                 f"(tinygrad_attn follows {FULL!r} and {SLIDING!r})")
    if SLIDING in kinds and window is None:
        c.refuse(f"layer_types has {SLIDING!r} layers but no sliding_window is set for them")
    if len(kinds) > 1:
        c.refuse(f"layer_types mixes {FULL!r} and {SLIDING!r} layers; tinygrad_attn gives every layer "
                 f"the same attention")
    return window if kinds == {SLIDING} else None


def _layer_kinds(c: _Reader, layers: int, default: set[str]) -> set[str]:
    """The attention kinds of layer_types (one per layer), or `default` (those of the type's own
    rule) when it is absent or null."""
    kinds = c.get("layer_types", NAMES, None, null=None)
    if kinds is None:
        return default if layers else set()
    if len(kinds) != layers:
        c.refuse(f"layer_types has {len(kinds)} entries but num_hidden_layers is {layers}")
    return set(kinds)


def _llama_family(c: _Reader, defaults: dict[str, int], window: Callable[[int], int | None],
                  qkv_bias: bool, out_bias: bool, mlp_bias: bool) -> TransformerConfig:
    """The config of llama, mistral and qwen2: `defaults` holds transformers' defaults of the keys
    where the three differ; `window(layers)` reads the type's sliding-window keys."""
    c.need("hidden_act", TEXT, "silu", ("silu",))
    d_model, heads = c.get("hidden_size", SIZE, 4096), c.get("num_attention_heads", SIZE, 32)
    layers = c.get("num_hidden_layers", COUNT, 32)
    head_dim, kv_heads = d_model // heads, defaults["num_key_value_heads"] or heads    # when not given
    return TransformerConfig.llama(
        c.get("vocab_size", SIZE, defaults["vocab_size"]), d_model=d_model, num_heads=heads,
        num_layers=layers,
        max_len=c.get("max_position_embeddings", SIZE, defaults["max_position_embeddings"]),
        d_ff=c.get("intermediate_size", SIZE, defaults["intermediate_size"]), window=window(layers),
        n_kv_heads=c.get("num_key_value_heads", SIZE, kv_heads, null=heads),
        head_dim=c.get("head_dim", SIZE, head_dim, null=head_dim), rope_base=_rope_base(c),
        attn_bias=qkv_bias, attn_out_bias=out_bias, mlp_bias=mlp_bias,
        norm_eps=float(c.get("rms_norm_eps", EPS, 1e-6)),
        tie_embeddings=c.get("tie_word_embeddings", FLAG, False))


def _llama(c: _Reader) -> TransformerConfig:
    def window(layers: int) -> int | None:  # LlamaModel reads no layer_types: full attention only
        return _one_window(c, _layer_kinds(c, layers, {FULL}), None)

    bias = c.get("attention_bias", FLAG, False)
    return _llama_family(c, LLAMA_DEFAULTS["llama"], window, bias, bias, c.get("mlp_bias", FLAG, False))


def _mistral(c: _Reader) -> TransformerConfig:
    def window(layers: int) -> int | None:
        """sliding_window on every layer; with layer_types, transformers 5 builds a Ministral, whose
        "full_attention" layers have none."""
        sliding = c.get("sliding_window", SIZE, 4096, null=None)
        return _one_window(c, _layer_kinds(c, layers, {FULL if sliding is None else SLIDING}), sliding)

    return _llama_family(c, LLAMA_DEFAULTS["mistral"], window, False, False, False)


def _qwen2(c: _Reader) -> TransformerConfig:
    def window(layers: int) -> int | None:
        """sliding_window only with use_sliding_window, on the layers from max_window_layers on."""
        sliding = c.get("sliding_window", SIZE, 4096, null=None)
        sliding = sliding if c.get("use_sliding_window", FLAG, False) else None
        first = c.get("max_window_layers", COUNT, 28)       # layers before it have full attention
        kinds = {FULL if sliding is None or i < first else SLIDING for i in (0, layers - 1)}  # ends
        return _one_window(c, _layer_kinds(c, layers, kinds), sliding)

    c.need("use_mrope", FLAG, False, (False,))
    return _llama_family(c, LLAMA_DEFAULTS["qwen2"], window, True, False, False)


# transformers' defaults of the keys where the Llama-family types differ (num_key_value_heads 0:
# as many as num_attention_heads)
LLAMA_DEFAULTS = {
    "llama": dict(vocab_size=32000, intermediate_size=11008, max_position_embeddings=2048,
                  num_key_value_heads=0),
    "mistral": dict(vocab_size=32000, intermediate_size=14336, max_position_embeddings=131072,
                    num_key_value_heads=8),
    "qwen2": dict(vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768,
                  num_key_value_heads=32),
}

MODEL_TYPES: dict[str, Callable[[_Reader], TransformerConfig]] = {
    "gpt2": _gpt2, "llama": _llama, "mistral": _mistral, "qwen2": _qwen2}


def config_from_json(config: Any) -> TransformerConfig:
    """The ``TransformerConfig`` of a parsed config.json.

    Raises:
        CheckpointError: not a JSON object, an unknown model_type (the message lists the known
            ones), a value of the wrong type or one tinygrad_attn does not follow, two keys that
            disagree, or a key it does not know (each named in the message).
    """
    if not isinstance(config, dict):
        raise CheckpointError(f"config.json: expected a JSON object, got {type(config).__name__}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in MODEL_TYPES:
        raise CheckpointError(f"config.json: model_type {shown(model_type)} is not supported; tinygrad_attn "
                              f"loads {', '.join(MODEL_TYPES)}")
    reader = _Reader(config, model_type)
    transformer = MODEL_TYPES[model_type](reader)
    unknown = reader.rest()
    if unknown:
        raise CheckpointError(f"config.json: key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                              f"unknown to tinygrad_attn for {model_type}: it may change the math, so the "
                              f"model is not loaded")
    return transformer


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
    if not (isinstance(model.ln_f, RMSNorm) and model.pos_emb is None and isinstance(block.mlp, SwiGLU)):
        _refuse("a Hugging Face model is either GPT-2-like (LayerNorm, GELU, learned positions) or "
                "Llama-like (RMSNorm, SwiGLU, RoPE)")
    _refuse_unless(attn.scale is None, "Llama-like models scale scores by 1/sqrt(head_dim)")
    qkv, out, mlp = (attn.q_proj.bias is not None, attn.out_proj.bias is not None,
                     block.mlp.gate_proj.bias is not None)
    llama_like = {**common, "hidden_size": attn.d_model, "num_attention_heads": attn.num_heads,
                  "num_key_value_heads": attn.n_kv_heads, "num_hidden_layers": len(model.blocks),
                  "head_dim": attn.d_head, "intermediate_size": block.mlp.gate_proj.weight.shape[1],
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
        _refuse(why)


def _refuse(why: str) -> NoReturn:
    raise CheckpointError(f"save_pretrained: this model has no Hugging Face model type: {why}")
