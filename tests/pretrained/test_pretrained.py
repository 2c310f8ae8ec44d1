"""Hugging Face folders loaded and saved, against transformers itself (tiny random models, nothing
downloaded): logits, loss and every parameter's gradient, greedy tokens, the reverse direction,
shards, bfloat16, a tokenizer.json, and the refusals of bad folders."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hf_models import KINDS, exact_float64, hf_model, torch_loss  # noqa: E402

import tinygrad_attn as ta  # noqa: E402
from tinygrad_attn import functional as F  # noqa: E402
from tinygrad_attn.errors import CheckpointError  # noqa: E402
from tinygrad_attn.pretrained.configs import PASSED_OVER, config_from_json  # noqa: E402
from tinygrad_attn.pretrained.names import checkpoint_shapes, links  # noqa: E402


@pytest.fixture
def float64():
    ta.set_default_dtype(np.float64)
    yield
    ta.set_default_dtype(np.float32)


def ids_for(seed=1, shape=(2, 12)):
    return np.random.default_rng(seed).integers(0, 61, shape)


def our_loss(model, ids):
    logits = model(ids)
    flat = logits[:, :-1].reshape(-1, logits.shape[-1])
    return logits, F.cross_entropy(flat, ids[:, 1:].reshape(-1))


def backward_both(theirs, ours, ids):
    """((logits, loss) of transformers, (logits, loss) of ours) on `ids`, both after backward."""
    their_logits, their_loss = torch_loss(theirs, ids)
    their_loss.backward()
    logits, loss = our_loss(ours, ids)
    loss.backward()
    return (their_logits, their_loss), (logits, loss)


def their_grads_as_ours(model_type, theirs, ours):
    """Each of our parameters' gradient as transformers computed it, through the same links."""
    grads = {n: p.grad.numpy() for n, p in theirs.named_parameters()}
    if model_type == "gpt2" and "lm_head.weight" not in dict(theirs.named_parameters()):
        grads.pop("lm_head.weight", None)
    params = dict(ours.named_parameters())
    out = {}
    for link in links(model_type, set(params), len(ours.blocks)):
        for name, grad in zip(link.ours, link.ours_from(grads[link.theirs])):
            out[name] = grad
    assert set(out) == set(params)          # every parameter of ours has its counterpart
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_loaded_model_matches_transformers(kind, tmp_path, monkeypatch, float64):
    exact_float64(monkeypatch)
    theirs = hf_model(kind)
    theirs.save_pretrained(tmp_path)
    ours, tokenizer = ta.load_pretrained(tmp_path)
    assert tokenizer is None                # the folder has no tokenizer.json
    (their_logits, their_loss), (logits, loss) = backward_both(theirs, ours, ids_for())
    np.testing.assert_allclose(logits.numpy(), their_logits.detach().numpy(), rtol=0, atol=1e-10)
    assert abs(loss.item() - their_loss.item()) < 1e-10
    expected = their_grads_as_ours(kind, theirs, ours)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, expected[name], rtol=0, atol=1e-10, err_msg=name)
    prompt = ids_for(2, (1, 6))
    their_tokens = theirs.generate(torch.tensor(prompt), max_new_tokens=20, do_sample=False)
    assert ours.generate(prompt, 20).numpy().tolist() == their_tokens.numpy().tolist()


def test_options_each_kind_uses(tmp_path, float64):
    """What each config turned into: the options the tiny models were built to exercise."""
    seen = {}
    for kind in KINDS:
        hf_model(kind).save_pretrained(tmp_path / kind)
        seen[kind] = ta.load_pretrained(tmp_path / kind)[0]
    llama = seen["llama"].blocks[0].attn
    assert (llama.n_kv_heads, llama.d_head, llama.rope_base, seen["llama"].ln_f.eps) == (2, 8, 500000.0, 1e-5)
    assert llama.d_head * llama.num_heads != llama.d_model
    assert seen["gpt2"].head.weight is seen["gpt2"].tok_emb.weight          # tied: one parameter
    assert "head.weight" not in dict(seen["gpt2"].named_parameters())
    assert seen["mistral"].blocks[1].attn.window == 5
    qwen = seen["qwen2"].blocks[0].attn
    assert qwen.q_proj.bias is not None and qwen.out_proj.bias is None and qwen.n_kv_heads == 1


def test_checkpoint_shapes_are_those_of_the_model_built(tmp_path):
    """The names and shapes checked against the headers before the model is built are those the
    built model's parameters give through `links`."""
    for kind in KINDS:
        hf_model(kind, dtype=torch.float32).save_pretrained(tmp_path / kind)
        config = config_from_json(json.loads((tmp_path / kind / "config.json").read_text()))
        model = ta.load_pretrained(tmp_path / kind)[0]
        assert model.config == config                       # built from the config.json read
        params = dict(model.named_parameters())
        from_model = {link.theirs: link.theirs_shape([params[o].shape for o in link.ours])
                      for link in links(kind, set(params), config.num_layers)}
        assert checkpoint_shapes(kind, config) == from_model, kind


def test_checkpoint_shapes_refuses_a_config_that_leaves_a_size_unset():
    """Every size and bias checkpoint_shapes reads must be set: one left None (which a model reads as
    its default) is refused by name, never multiplied as a number or read as "no bias"."""
    full = ta.nn.TransformerConfig.llama(10, d_model=8, num_heads=2, num_layers=1, max_len=4, d_ff=12,
                                         n_kv_heads=1, head_dim=4, attn_out_bias=False, mlp_bias=False)
    shapes = checkpoint_shapes("llama", full)
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (4, 8)          # (n_kv_heads · head_dim, d)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (8, 12)
    for field in ("d_ff", "head_dim", "n_kv_heads", "attn_out_bias", "mlp_bias"):
        with pytest.raises(ValueError, match=f"checkpoint_shapes: the config leaves {field} unset"):
            checkpoint_shapes("llama", dataclasses.replace(full, **{field: None}))
    gpt2 = ta.nn.TransformerConfig.gpt2(10, d_model=8, num_heads=2, num_layers=1, max_len=4)
    with pytest.raises(ValueError, match="leaves d_ff unset"):
        checkpoint_shapes("gpt2", gpt2)
    gpt2_shapes = checkpoint_shapes("gpt2", dataclasses.replace(gpt2, d_ff=32))
    assert gpt2_shapes["transformer.h.0.mlp.c_fc.weight"] == (8, 32)


def test_float32_within_1e_4(tmp_path, monkeypatch):
    theirs = hf_model("llama", dtype=torch.float32)
    theirs.save_pretrained(tmp_path)
    ours, _ = ta.load_pretrained(tmp_path)
    assert ours.tok_emb.weight.dtype == np.float32
    (their_logits, their_loss), (logits, loss) = backward_both(theirs, ours, ids_for())
    np.testing.assert_allclose(logits.numpy(), their_logits.detach().numpy(), rtol=0, atol=1e-4)
    expected = their_grads_as_ours("llama", theirs, ours)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, expected[name], rtol=0, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_saved_by_us_loads_in_transformers(kind, tmp_path, monkeypatch, float64):
    exact_float64(monkeypatch)
    original = hf_model(kind, seed=3)
    original.save_pretrained(tmp_path / "theirs")
    ours, _ = ta.load_pretrained(tmp_path / "theirs")
    ta.save_pretrained(ours, tmp_path / "ours")
    config = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert config["model_type"] == kind
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours", dtype=torch.float64,
                                                                 attn_implementation="sdpa").eval()
    ids = ids_for(4)
    expected = original(torch.tensor(ids)).logits.detach().numpy()
    their_logits = reloaded(torch.tensor(ids)).logits.detach().numpy()
    np.testing.assert_allclose(their_logits, expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours(ids).numpy(), expected, rtol=0, atol=1e-10)


def test_our_models_of_each_family_save_and_reload(tmp_path, monkeypatch, float64):
    """Models built here (not loaded) with the options of each family round-trip through transformers."""
    exact_float64(monkeypatch)
    ta.manual_seed(0)
    built = {
        "llama": ta.nn.TinyTransformer(30, 16, 4, 2, 32, norm="rms", mlp="swiglu", positions="rope",
                                       n_kv_heads=2, attn_bias=False, head_bias=False, rope_base=500000.0,
                                       norm_eps=1e-5, tie_embeddings=True),
        "gpt2": ta.nn.TinyTransformer(30, 16, 4, 2, 32, head_bias=False, gelu_approximate="none"),
    }
    for kind, model in built.items():
        ta.save_pretrained(model, tmp_path / kind)
        theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / kind, dtype=torch.float64,
                                                                   attn_implementation="sdpa").eval()
        ids = np.random.default_rng(5).integers(0, 30, (2, 9))
        np.testing.assert_allclose(theirs(torch.tensor(ids)).logits.detach().numpy(), model(ids).numpy(),
                                   rtol=0, atol=1e-10)
        again, _ = ta.load_pretrained(tmp_path / kind)
        np.testing.assert_array_equal(again(ids).numpy(), model(ids).numpy())


def test_sharded_and_bfloat16_folders(tmp_path, float64):
    theirs = hf_model("qwen2")
    theirs.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
    assert len(list((tmp_path / "sharded").glob("model-*.safetensors"))) > 2
    whole, _ = ta.load_pretrained(tmp_path / "sharded")
    ids = ids_for()
    expected = theirs(torch.tensor(ids)).logits.detach().numpy()
    np.testing.assert_allclose(whole(ids).numpy(), expected, rtol=0, atol=1e-6)
    theirs.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    halved, _ = ta.load_pretrained(tmp_path / "bf16")
    assert halved.tok_emb.weight.dtype == np.float64
    # exactly the bfloat16 values, widened
    np.testing.assert_array_equal(halved.tok_emb.weight.numpy(),
                                  theirs.model.embed_tokens.weight.detach().to(torch.float64).numpy())
    np.testing.assert_array_equal(halved.blocks[0].attn.q_proj.weight.numpy(),
                                  theirs.model.layers[0].self_attn.q_proj.weight.detach().double().numpy().T)


def test_tokenizer_json_round_trip(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))                  # GPT-2's kind, with a tiny vocabulary
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the cat sat on the mat", "the dog sat on the log"] * 20,
                            trainers.BpeTrainer(vocab_size=40, special_tokens=["[UNK]"]))
    from tinygrad_attn.text import HuggingFaceTokenizer

    theirs = hf_model("gpt2", dtype=torch.float32)
    theirs.save_pretrained(tmp_path)
    tok.save(str(tmp_path / "tokenizer.json"))
    model, tokenizer = ta.load_pretrained(tmp_path)
    assert isinstance(tokenizer, HuggingFaceTokenizer)
    ids = tokenizer.encode("the cat sat")
    assert ids == tok.encode("the cat sat").ids and max(ids) < 61
    assert tokenizer.decode(ids) == tok.decode(ids)
    assert "".join(tokenizer.tokens(ids)) == "the cat sat"       # Ġ shown as a space
    ta.save_pretrained(model, tmp_path / "again", tokenizer)
    assert ta.load_pretrained(tmp_path / "again")[1].encode("the mat") == tok.encode("the mat").ids


# ---- configs read as transformers reads them ------------------------------------------------

def their_config(kind, **changes):
    """The config transformers builds of a config.json of `kind` with `changes`."""
    return transformers.AutoConfig.for_model(kind, **changes)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_keys_left_out_mean_what_transformers_defaults_to(kind):
    ours, theirs = config_from_json({"model_type": kind}), their_config(kind)
    if kind == "gpt2":
        expected = dict(vocab_size=theirs.vocab_size, d_model=theirs.n_embd, num_heads=theirs.n_head,
                        num_layers=theirs.n_layer, max_len=theirs.n_positions, d_ff=4 * theirs.n_embd,
                        norm_eps=theirs.layer_norm_epsilon, tie_embeddings=theirs.tie_word_embeddings)
    else:
        heads = theirs.num_attention_heads
        expected = dict(vocab_size=theirs.vocab_size, d_model=theirs.hidden_size, num_heads=heads,
                        num_layers=theirs.num_hidden_layers, max_len=theirs.max_position_embeddings,
                        d_ff=theirs.intermediate_size, n_kv_heads=theirs.num_key_value_heads,
                        head_dim=getattr(theirs, "head_dim", None) or theirs.hidden_size // heads,
                        norm_eps=theirs.rms_norm_eps, tie_embeddings=theirs.tie_word_embeddings,
                        rope_base=theirs.rope_parameters["rope_theta"],
                        window=getattr(theirs, "sliding_window", None))
    assert {k: getattr(ours, k) for k in expected} == expected
    assert config_from_json(theirs.to_dict()) == ours     # every key transformers writes is read


def test_the_docs_table_names_every_key_transformers_knows():
    """docs/real_model.md §6 has a row for each field of the config classes of the four types (and
    of the Ministral a mistral config with layer_types becomes)."""
    page = (Path(__file__).parents[2] / "docs" / "real_model.md").read_text()
    table = page.split("## 6. What `load_pretrained` does with each key of config.json")[1].split("\n## ")[0]
    named = {key for row in table.splitlines() if row.startswith("| `")
             for key in re.findall(r"`(\w+)`", row.split(" | ")[0])}
    classes = (transformers.GPT2Config, transformers.LlamaConfig, transformers.MistralConfig,
               transformers.Qwen2Config, transformers.MinistralConfig)
    fields = {f.name for cls in classes for f in dataclasses.fields(cls)}
    assert fields - named - PASSED_OVER == set()
    assert "rope_scaling" in named and "rope_theta" in named           # transformers 4's names


def edited_folder(path, kind, changes, drop=(), edit_weights=None):
    """A tiny `kind` model of transformers saved at `path`, its config.json edited."""
    theirs = hf_model(kind)
    theirs.save_pretrained(path)
    config = {k: v for k, v in json.loads((path / "config.json").read_text()).items() if k not in drop}
    (path / "config.json").write_text(json.dumps({**config, **changes}))
    if edit_weights:
        rewrite_weights(path, edit_weights)
    return path


THETA_77 = {"rope_theta": 77.0}
SLIDING_QWEN2 = {"use_sliding_window": True, "sliding_window": 5}
FULL, SLIDING = ["full_attention"] * 2, ["sliding_attention"] * 2
# (kind, config changes, keys dropped, what our model must then be: window and RoPE base)
READ_AS_TRANSFORMERS = {
    "mistral layer_types all full": ("mistral", {"layer_types": FULL}, (), (None, 10000.0)),
    "mistral layer_types all sliding": ("mistral", {"layer_types": SLIDING}, (), (5, 10000.0)),
    "mistral sliding_window null": ("mistral", {"sliding_window": None}, (), (None, 10000.0)),
    "qwen2 sliding from layer 0": ("qwen2", {**SLIDING_QWEN2, "max_window_layers": 0}, ("layer_types",),
                                   (5, 10000.0)),
    "qwen2 sliding from layer 2 of 2": ("qwen2", {**SLIDING_QWEN2, "max_window_layers": 2}, ("layer_types",),
                                        (None, 10000.0)),
    "rope_theta of transformers 4": ("llama", THETA_77, ("rope_parameters",), (None, 77.0)),
    "rope_parameters null": ("llama", {"rope_parameters": None, **THETA_77}, (), (None, 77.0)),
    "plain rope_scaling, rope_theta beside": ("llama", {"rope_scaling": {"rope_type": "default"}, **THETA_77},
                                              ("rope_parameters",), (None, 77.0)),
    "rope_scaling's own theta": ("llama", {"rope_scaling": {"type": "default", "rope_theta": 77.0}},
                                 ("rope_parameters",), (None, 77.0)),
    "no theta anywhere": ("llama", {"rope_parameters": {"rope_type": "default"}}, (), (None, 10000.0)),
    "the same theta twice": ("llama", {"rope_parameters": THETA_77, **THETA_77}, (), (None, 77.0)),
}


@pytest.mark.parametrize("case", sorted(READ_AS_TRANSFORMERS))
def test_configs_compute_what_transformers_computes(case, tmp_path, monkeypatch, float64):
    exact_float64(monkeypatch)
    kind, changes, drop, (window, base) = READ_AS_TRANSFORMERS[case]
    folder = edited_folder(tmp_path, kind, changes, drop)
    ours, _ = ta.load_pretrained(folder)
    attn = ours.blocks[0].attn
    assert (attn.window, attn.rope_base) == (window, base)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                               attn_implementation="sdpa").eval()
    ids = ids_for(shape=(2, 12))                                   # longer than the window of 5
    np.testing.assert_allclose(ours(ids).numpy(), theirs(torch.tensor(ids)).logits.detach().numpy(),
                               rtol=0, atol=1e-10)


def test_no_layers_computes_what_transformers_computes(tmp_path, monkeypatch, float64):
    exact_float64(monkeypatch)
    folder = edited_folder(tmp_path, "llama", {"num_hidden_layers": 0}, edit_weights=lambda t: [
        t.pop(name) for name in list(t) if name.startswith("model.layers.")])
    ours, _ = ta.load_pretrained(folder)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    ids = ids_for()
    assert ours.blocks == []
    np.testing.assert_allclose(ours(ids).numpy(), theirs(torch.tensor(ids)).logits.detach().numpy(),
                               rtol=0, atol=1e-10)


# ---- refusals ----------------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path):
    hf_model("llama", dtype=torch.float32).save_pretrained(tmp_path)
    return tmp_path


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def rewrite_weights(folder, edit):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def test_missing_files_are_named(folder, tmp_path):
    with pytest.raises(CheckpointError, match="no such folder"):
        ta.load_pretrained(tmp_path / "nowhere")
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no model.safetensors and no model.safetensors.index.json"):
        ta.load_pretrained(folder)
    (folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match="no config.json"):
        ta.load_pretrained(folder)


@pytest.mark.parametrize("changes, message", [
    ({"model_type": "bert"},
     r"model_type 'bert' is not supported; tinygrad_attn loads gpt2, llama, mistral, qwen2"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}, "RoPE scaling 'llama3' .* not supported"),
    ({"hidden_act": "gelu"}, r"hidden_act = 'gelu' is not supported for llama"),
    ({"logit_softcapping": 30.0}, "key logit_softcapping unknown to tinygrad_attn for llama"),
])
def test_config_that_changes_the_math_is_refused(folder, changes, message):
    edit_config(folder, **changes)
    with pytest.raises(CheckpointError, match=message):
        ta.load_pretrained(folder)


def test_missing_and_leftover_tensors_are_listed(folder):
    def edit(t):
        del t["model.layers.1.mlp.up_proj.weight"]
        t["model.layers.1.mlp.extra.weight"] = np.ones(3, np.float32)
    rewrite_weights(folder, edit)
    with pytest.raises(CheckpointError, match=r"missing 1: model.layers.1.mlp.up_proj.weight; left over 1: "
                                              r"model.layers.1.mlp.extra.weight"):
        ta.load_pretrained(folder)


def test_truncated_and_foreign_files(folder):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-100])
    with pytest.raises(CheckpointError, match="truncated: tensor .* ends at byte"):
        ta.load_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"PK\x03\x04 a zip, or a pickle" * 4)
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        ta.load_pretrained(folder)


def test_models_without_a_model_type_are_not_saved(tmp_path):
    mixed = ta.nn.TinyTransformer(10, 8, 2, 1, 8, norm="rms")        # RMSNorm with GELU and positions
    with pytest.raises(CheckpointError, match="either GPT-2-like"):
        ta.save_pretrained(mixed, tmp_path)
    assert not list(tmp_path.iterdir())                              # nothing written
