"""Model folders that are wrong, as a hostile user makes them: each refused by ``load_pretrained``
with a CheckpointError naming the key, tensor or file at fault, before the model is built where a
size is at fault, and by every command that reads a model with one line and exit status 2.

The folders are built here (``save_pretrained`` of a tiny model, then edited); the comparisons
with transformers of the configs that load are in test_pretrained.py."""

import json
import re
import struct

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import tinygrad_attn as ta
from tinygrad_attn.commands.cli import main
from tinygrad_attn.errors import CheckpointError, TokenizerError
from tinygrad_attn.pretrained import loading
from tinygrad_attn.text import HuggingFaceTokenizer

VOCAB = 61
TEXT = "w1 w2 w3 w4"


def word_tokenizer(size: int) -> HuggingFaceTokenizer:
    """Words w0 … w{size-1}, split at spaces."""
    inner = Tokenizer(models.WordLevel({f"w{i}": i for i in range(size)}, unk_token="w0"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    return HuggingFaceTokenizer(inner)


def llama_folder(path, tokenizer_size=VOCAB):
    """A 2-layer Llama (GQA, head_dim 6) saved with a word tokenizer of `tokenizer_size` ids."""
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(VOCAB, 24, 4, 2, 64, norm="rms", mlp="swiglu", positions="rope",
                                  n_kv_heads=2, attn_bias=False, head_bias=False)
    ta.save_pretrained(model, path, word_tokenizer(tokenizer_size))
    return model


def edit_config(folder, changes=None, text=None):
    if text is None:
        config = json.loads((folder / "config.json").read_text())
        config.update(changes)
        text = json.dumps(config)
    (folder / "config.json").write_text(text)


def edit_header(folder, edit):
    """Rewrite model.safetensors' JSON header through `edit(header)`, keeping its bytes."""
    path = folder / "model.safetensors"
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])


def overlap(header):
    """Layer 0's second norm weight on the bytes of its first (both (24,) float32)."""
    layer = "model.layers.0"
    header[f"{layer}.post_attention_layernorm.weight"]["data_offsets"] = \
        list(header[f"{layer}.input_layernorm.weight"]["data_offsets"])


def nested(depth=100_000):
    return "[" * depth + "]" * depth


def rewrite_weights(folder, edit):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def save_tensor(folder, name, array):
    rewrite_weights(folder, lambda tensors: tensors.update({name: array}))


ROPE = {"rope_type": "default", "rope_theta": 500000.0}
SCALED = {"rope_type": "default", "factor": 8}
NORM = "model.norm.weight"
YARN = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 500000.0, "original_max_position_embeddings": 32}

# name → (how the folder is spoiled, what the one-line error says)
BAD = {
    "tie a string": (lambda f: edit_config(f, {"tie_word_embeddings": "false"}),
                     r"config.json: tie_word_embeddings = 'false' is not true or false"),
    "100000 layers": (lambda f: edit_config(f, {"num_hidden_layers": 100000}),
                      r"num_hidden_layers is 100000 but the weights hold 2: layer 0, layer 1"),
    "10**12 layers": (lambda f: edit_config(f, {"num_hidden_layers": 10**12}),
                      r"num_hidden_layers is 1000000000000 but the weights hold 2"),
    "vocab 2e7": (lambda f: edit_config(f, {"vocab_size": 2 * 10**7}),
                  r"tensor model.embed_tokens.weight has shape \(61, 24\) in model.safetensors but "
                  r"config.json's sizes give \(20000000, 24\)"),
    "vocab 1e12": (lambda f: edit_config(f, {"vocab_size": 10**12}),
                   r"model.embed_tokens.weight has shape \(61, 24\) .* give \(1000000000000, 24\)"),
    "width 1e9": (lambda f: edit_config(f, {"intermediate_size": 10**9}),
                  r"gate_proj.weight has shape \(64, 24\) .* give \(1000000000, 24\)"),
    "eps a word": (lambda f: edit_config(f, {"rms_norm_eps": "tiny"}),
                   r"rms_norm_eps = 'tiny' is not a finite number ≥ 0"),
    "eps a list": (lambda f: edit_config(f, {"rms_norm_eps": [1e-5]}),
                   r"rms_norm_eps = \[1e-05\] is not a finite number ≥ 0"),
    "eps null": (lambda f: edit_config(f, {"rms_norm_eps": None}), r"rms_norm_eps is null; llama needs"),
    "model_type a list": (lambda f: edit_config(f, {"model_type": ["llama"]}),
                          r"model_type \['llama'\] is not supported; tinygrad_attn loads gpt2, llama"),
    "rope_scaling a string": (lambda f: edit_config(f, {"rope_scaling": "abc"}),
                              r"rope_scaling = 'abc' is not a JSON object"),
    "layer_types a number": (lambda f: edit_config(f, {"layer_types": 5}),
                             r"layer_types = 5 is not a list of strings"),
    "layer_types too short": (lambda f: edit_config(f, {"layer_types": ["full_attention"]}),
                              r"layer_types has 1 entries but num_hidden_layers is 2"),
    "sliding llama": (lambda f: edit_config(f, {"layer_types": ["sliding_attention"] * 2}),
                      r"layer_types has 'sliding_attention' layers but no sliding_window"),
    "mistral mixing full and sliding layers": (
        lambda f: edit_config(f, {"model_type": "mistral", "sliding_window": 5,
                                  "layer_types": ["sliding_attention", "full_attention"]}),
        r"layer_types mixes 'full_attention' and 'sliding_attention' layers"),
    "qwen2 sliding from layer 1 of 2": (
        lambda f: edit_config(f, {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 5,
                                  "max_window_layers": 1}), r"layer_types mixes"),
    "layer kind unknown": (lambda f: edit_config(f, {"layer_types": ["linear_attention"] * 2}),
                           r"layer_types 'linear_attention' are not supported for llama"),
    "activation null": (lambda f: edit_config(f, {"hidden_act": None}),
                        r"hidden_act is null; llama needs a string"),
    "vocab a float": (lambda f: edit_config(f, {"vocab_size": 61.0}),
                      r"vocab_size = 61.0 is not an integer ≥ 1"),
    "layers a flag": (lambda f: edit_config(f, {"num_hidden_layers": True}),
                      r"num_hidden_layers = True is not an integer ≥ 0"),
    "config nested 100k deep": (lambda f: edit_config(f, text=nested()), r"config.json: not JSON"),
    "theta a word": (lambda f: edit_config(f, {"rope_theta": "abc", "rope_parameters": ROPE}),
                     r"rope_theta = 'abc' is not a finite number > 0"),
    "theta negative": (lambda f: edit_config(f, {"rope_theta": -1.0}), r"rope_theta = -1.0 is not a finite"),
    "two thetas": (lambda f: edit_config(f, {"rope_theta": 10000.0, "rope_parameters": ROPE}),
                   r"rope_theta = 10000.0 and rope_parameters.rope_theta = 500000.0 disagree"),
    "rope_scaling beside rope_parameters": (
        lambda f: edit_config(f, {"rope_scaling": SCALED, "rope_parameters": ROPE}),
        r"rope_scaling \{'rope_type': 'default', 'factor': 8\} and rope_parameters .* disagree"),
    "default rope_scaling beside yarn": (
        lambda f: edit_config(f, {"rope_scaling": {"rope_type": "default"}, "rope_parameters": YARN}),
        r"rope_scaling .* and rope_parameters \{'rope_type': 'yarn'.* disagree"),
    "factor on plain RoPE": (lambda f: edit_config(f, {"rope_scaling": SCALED}),
                             r"rope_scaling has factor, which a plain RoPE .* does not read"),
    "yarn": (lambda f: edit_config(f, {"rope_parameters": YARN}), r"RoPE scaling 'yarn' \(rope_parameters\)"),
    "offsets strings": (lambda f: edit_header(f, lambda h: h[NORM].update(data_offsets=["0", "96"])),
                        r"tensor 'model.norm.weight' has data_offsets \['0', '96'\]; they are two integers"),
    "offsets floats": (lambda f: edit_header(f, lambda h: h[NORM].update(
        data_offsets=[float(o) for o in h[NORM]["data_offsets"]])),
        r"tensor 'model.norm.weight' has data_offsets \[\d+\.0, \d+\.0\]"),
    "dtype a list": (lambda f: edit_header(f, lambda h: h[NORM].update(dtype=["F32"])),
                     r"tensor 'model.norm.weight' has dtype \['F32'\]; tinygrad_attn reads F64, F32"),
    "shape a string": (lambda f: edit_header(f, lambda h: h[NORM].update(shape="24")),
                       r"tensor 'model.norm.weight' has shape '24'; a shape is a list of integers"),
    "entry a number": (lambda f: edit_header(f, lambda h: h.update({NORM: 7})),
                       r"tensor 'model.norm.weight' has a malformed header entry 7"),
    "overlapping tensors": (lambda f: edit_header(f, overlap),
                            r"post_attention_layernorm.weight' starts at byte \d+ but tensor "
                            r"'model.layers.0.input_layernorm.weight' ends at byte \d+: .* without overlaps"),
    "bytes after the tensors": (lambda f: (f / "model.safetensors").write_bytes(
        (f / "model.safetensors").read_bytes() + bytes(8)), r"the last 8 bytes belong to no tensor"),
    "header nested deep": (lambda f: (f / "model.safetensors").write_bytes(
        struct.pack("<Q", 200_000) + nested().encode()), r"its header is not JSON"),
    "index nested deep": (lambda f: ((f / "model.safetensors").unlink(),
                                     (f / "model.safetensors.index.json").write_text(nested())),
                          r"model.safetensors.index.json: not a safetensors index"),
    "wrong shape": (lambda f: save_tensor(f, NORM, np.ones(25, np.float32)),
                    r"tensor model.norm.weight has shape \(25,\) in model.safetensors but config.json's "
                    r"sizes give \(24,\)"),
    "1e300 in float64": (lambda f: save_tensor(f, NORM, np.full(24, 1e300)),
                         r"'model.norm.weight' holds values up to 1e\+300 in float64, beyond float32's "
                         r"largest \(3.4e\+38\); read it with ta.set_default_dtype\(np.float64\)"),
    "NaN": (lambda f: save_tensor(f, NORM, np.full(24, np.nan, np.float32)),
            r"'model.norm.weight' holds 24 NaN or infinite values"),
    "garbage tokenizer": (lambda f: (f / "tokenizer.json").write_text('{"model": 3}'),
                          r"tokenizer.json is not a Hugging Face tokenizer.json"),
    "tokenizer larger than the vocabulary": (
        lambda f: word_tokenizer(70).save(f / "tokenizer.json"),
        r"tokenizer.json: 70 ids, but the model's vocab_size is 61: ids 61 to 69 have no embedding"),
}


def spoiled(tmp_path, name):
    folder = tmp_path / "model"
    llama_folder(folder)
    BAD[name][0](folder)
    return folder


@pytest.mark.parametrize("name", sorted(BAD))
def test_load_pretrained_refuses_with_the_reason(tmp_path, name):
    folder = spoiled(tmp_path, name)
    with pytest.raises(CheckpointError, match=BAD[name][1]):
        ta.load_pretrained(folder)


SIZES = ("100000 layers", "10**12 layers", "vocab 2e7", "vocab 1e12", "width 1e9")


@pytest.mark.parametrize("name", SIZES)
def test_sizes_are_checked_against_the_headers_before_the_model_is_built(tmp_path, monkeypatch, name):
    folder = spoiled(tmp_path, name)

    def never(**options):
        raise AssertionError(f"the model was built with {options}")
    monkeypatch.setattr(loading, "TinyTransformer", never)
    with pytest.raises(CheckpointError, match="the weights do not fit the config"):
        ta.load_pretrained(folder)


def commands(folder, out):
    """Every command that reads a model folder, on `folder`."""
    model, text = ["--model", str(folder)], ["--text", TEXT]
    return {"sample": ["sample", *model, TEXT, "--max-new-tokens", "3"],
            "step": ["step", *model, *text, "--all"],
            "graph": ["graph", *model, *text, "--out", str(out / "graph.svg")],
            "explore": ["explore", *model, *text, "--out", str(out / "explorer.html")],
            "export": ["export", str(folder), str(out / "exported")]}


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_command_says_one_line(tmp_path, capsys, name):
    folder = spoiled(tmp_path, name)
    for command, argv in commands(folder, tmp_path).items():
        assert main(argv) == 2, command
        out, err = capsys.readouterr()
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (command, err)
        assert re.search(BAD[name][1], err), (command, err)
    assert not (tmp_path / "exported").exists() and not (tmp_path / "explorer.html").exists()


def test_the_good_folder_runs_in_every_command(tmp_path, capsys):
    """The control: the folder every bad one is made from loads in each command."""
    folder = tmp_path / "model"
    model = llama_folder(folder)
    for command, argv in commands(folder, tmp_path).items():
        assert main(argv) == 0, (command, capsys.readouterr().err)
    out = capsys.readouterr().out
    ids = word_tokenizer(VOCAB).encode(TEXT)
    expected = model.generate(np.array(ids), 3).numpy()
    assert TEXT + " " + " ".join(f"w{i}" for i in expected[len(ids):]) in out


def test_a_tokenizer_smaller_than_the_vocabulary(tmp_path, capsys):
    """Its ids past the tokenizer's decode to no text (as transformers decodes them): the text
    sample prints is the decoding of the tokens the model chose, whole, with no error."""
    model = llama_folder(tmp_path, tokenizer_size=30)
    _, tokenizer = ta.load_pretrained(tmp_path)
    assert tokenizer.vocab_size == VOCAB and tokenizer.decode([1, 60, 2]) == "w1 w2"
    assert tokenizer.tokens([1, 60]) == ["w1", ""]
    with pytest.raises(TokenizerError, match="the tokenizer has 30 ids, more than vocab_size 20"):
        HuggingFaceTokenizer(tokenizer.tokenizer, 20)
    ids = tokenizer.encode("w1 w2 w3")
    chosen = model.generate(np.array(ids), 12).numpy()[len(ids):]
    assert (chosen >= 30).any() and (chosen < 30).any()     # the test means something: both kinds written
    assert main(["sample", "--model", str(tmp_path), "w1 w2 w3", "--max-new-tokens", "12"]) == 0
    words = ["w1", "w2", "w3"] + [f"w{i}" for i in chosen if i < 30]
    assert capsys.readouterr().out.split() == words


def test_no_layers_loads_and_step_says_why_it_cannot(tmp_path, capsys):
    """num_hidden_layers 0 is a model transformers builds (embedding, norm, head): it loads, and
    step, which walks a layer, says that there is none."""
    model = llama_folder(tmp_path)
    edit_config(tmp_path, {"num_hidden_layers": 0})
    rewrite_weights(tmp_path, lambda t: [t.pop(n) for n in list(t) if n.startswith("model.layers.")])
    loaded, _ = ta.load_pretrained(tmp_path)
    assert loaded.blocks == []
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(loaded(ids).numpy(), model.head(model.ln_f(model.tok_emb(ids))).numpy())
    assert main(["step", "--model", str(tmp_path), "--text", TEXT, "--all"]) == 2
    assert "the model has no layers (its config gives 0)" in capsys.readouterr().err
