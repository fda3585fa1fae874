"""Reading a local checkpoint folder (read_checkpoint: config.json, the four weight layouts, shard indexes confined
to the folder, refused pickles) and loading its tensors into a transformers model (load_into: Hub-style names,
stale buffers, tied heads, and the exact error for tensors that do not fit). Engine-level, tiny, no network."""
import io
import json
import zipfile
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", minversion="5.0")
from safetensors.torch import save_file  # noqa: E402

from engine.config import ModelConfig  # noqa: E402
from engine.interop import hf_model_from_config, load_into, read_checkpoint, scramble_, to_transformers  # noqa: E402
from engine.interop import hf_models  # noqa: E402
from engine.limits import MAX_CONFIG_BYTES  # noqa: E402
from engine.model import build_model  # noqa: E402

transformers.logging.set_verbosity_error()
_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
GPT2 = dict(vocab_size=61, n_embd=16, n_layer=1, n_head=2, n_positions=16, **_IDS)
NEOX = dict(vocab_size=61, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=16, **_IDS)
CONFIG = {"model_type": "llama", "hidden_size": 16}
A = {"a": torch.arange(6.0).reshape(2, 3)}
B = {"b": torch.full((4,), -1.5)}


def _folder(tmp_path: Path, files: dict | None = None) -> Path:
    """config.json plus files: name -> tensor dict (saved by suffix) or text."""
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    for name, content in (files or {}).items():
        if isinstance(content, str):
            (tmp_path / name).write_text(content)
        elif name.endswith(".safetensors"):
            save_file(content, str(tmp_path / name))
        else:
            torch.save(content, tmp_path / name)
    return tmp_path


def assert_same_tensors(state, expected):
    assert sorted(state) == sorted(expected)
    for k, v in expected.items():
        assert torch.equal(state[k], v), k


def _index(*shards: str) -> str:
    return json.dumps({"metadata": {}, "weight_map": {f"t{i}": s for i, s in enumerate(shards)}})


# --- read_checkpoint and the weight layouts -------------------------------------------------------------------

@pytest.mark.parametrize("files,source", [
    ({"model.safetensors": A}, "model.safetensors"),
    ({"pytorch_model.bin": A}, "pytorch_model.bin"),
    ({"model.safetensors": A, "pytorch_model.bin": B}, "model.safetensors"),   # safetensors preferred
])
def test_single_weight_files(tmp_path, files, source):
    config, state, where = read_checkpoint(_folder(tmp_path, files))
    assert config == CONFIG and where == source
    assert_same_tensors(state, A)


@pytest.mark.parametrize("kind", ["model.safetensors", "pytorch_model.bin"])
def test_sharded_weights_follow_the_index(tmp_path, kind):
    stem, suffix = kind.split(".")
    names = [f"{stem}-0000{i}-of-00002.{suffix}" for i in (1, 2)]
    _folder(tmp_path, {names[1]: B, names[0]: A, f"{kind}.index.json": _index(names[1], names[0], names[1])})
    config, state, where = read_checkpoint(tmp_path)
    assert config == CONFIG and where == ", ".join(names)   # each shard once, in name order
    assert_same_tensors(state, A | B)


def test_config_only_and_no_weights(tmp_path):
    # weights=False reads no weight file, not even a broken index (the memory guard runs before any tensor)
    _folder(tmp_path, {"model.safetensors.index.json": "[1]"})
    assert read_checkpoint(tmp_path, weights=False) == (CONFIG, None, "not read")
    (tmp_path / "model.safetensors.index.json").unlink()
    assert read_checkpoint(tmp_path) == (CONFIG, None, "random init (no weights in the folder)")


def test_folder_and_config_errors_name_the_file(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ValueError) as e:
        read_checkpoint(missing)
    assert str(e.value) == f"{missing}: not a folder (nor a .json config file)"
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    assert str(e.value) == f"{tmp_path}: no config.json"
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"^config\.json: cannot read it: not valid JSON"):
        read_checkpoint(tmp_path)
    (tmp_path / "config.json").write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    assert str(e.value) == f"config.json: {tmp_path / 'config.json'} is larger than the limit of 65,536 bytes"


def test_a_malformed_config_file_given_alone_is_named(tmp_path):
    # a config.json saved from the Hub's file view under its own name: the message names that file
    path = tmp_path / "Llama-3.1-8B.json"
    path.write_text('{"model_type": "llama",}')
    with pytest.raises(ValueError) as e:
        read_checkpoint(path)
    assert str(e.value).startswith("Llama-3.1-8B.json: cannot read it: not valid JSON (")
    path.write_text("[" * 1000 + "]" * 1000)
    with pytest.raises(ValueError, match=r"^Llama-3\.1-8B\.json: nested 1,000 levels deep"):
        read_checkpoint(path, weights=False)


class _Payload:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_pickles_are_refused_even_when_the_environment_allows_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")   # torch's own switch for unset weights_only
    _folder(tmp_path, {"pytorch_model.bin": {"x": _Payload()}})
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'pytorch_model.bin'}: cannot load weights: ")
    assert "must never run" not in capsys.readouterr().out


def test_weights_saved_from_a_gpu_load_on_the_cpu(tmp_path):
    """A pytorch_model.bin written from CUDA tensors records the location "cuda:0"; it loads here."""
    buf = io.BytesIO()
    torch.save(A, buf)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("data.pkl"):   # the storage location, a pickled string
                assert data.count(b"X\x03\x00\x00\x00cpu") == 1
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            zout.writestr(info, data)
    _folder(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(out.getvalue())
    _, state, _ = read_checkpoint(tmp_path)
    assert_same_tensors(state, A)
    assert state["a"].device.type == "cpu"


# --- shard indexes ----------------------------------------------------------------------------------------------

_WHAT = "model.safetensors.index.json"


def _index_error(tmp_path, text) -> str:
    _folder(tmp_path, {_WHAT: text})
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    return str(e.value)


@pytest.mark.parametrize("text", ["[1]", "{}", json.dumps({"weight_map": {"t": 3}}), json.dumps({"weight_map": []})])
def test_an_index_without_a_weight_map_of_names_is_refused(tmp_path, text):
    assert _index_error(tmp_path, text) == \
        f"{_WHAT}: weight_map: expected a JSON object of tensor name -> shard file name"


@pytest.mark.parametrize("shard", ["../outside.safetensors", ".", "/" + "d" * 100])
def test_shards_outside_the_folder_are_refused(tmp_path, shard):
    assert _index_error(tmp_path, _index(shard)) == \
        f"{_WHAT}: weight_map: shard {shard[:80]!r} is outside the model folder {tmp_path}"


def test_unreadable_indexes_name_the_index(tmp_path):
    assert _index_error(tmp_path, "{oops").startswith(f"{_WHAT}: cannot read it: not valid JSON")
    path = tmp_path / _WHAT
    path.write_bytes(b"\xff{}")
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    assert str(e.value) == f"{_WHAT}: cannot read {path}: not UTF-8 text (byte 0 cannot be decoded)"
    limit = 64 * MAX_CONFIG_BYTES   # an index lists every tensor: 64 times a config's limit, 4 MiB
    path.write_text(_index("model-1.safetensors").ljust(limit))
    with pytest.raises(ValueError) as e:   # at the limit: read, and the shard it names is looked for
        read_checkpoint(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'model-1.safetensors'}: cannot load weights: ")
    path.write_text(" " * (limit + 1))
    with pytest.raises(ValueError) as e:
        read_checkpoint(tmp_path)
    assert str(e.value) == f"{_WHAT}: {path} is larger than the limit of 4,194,304 bytes"


# --- load_into ----------------------------------------------------------------------------------------------------

def _hf(model_type, config, seed):
    hf = hf_model_from_config(model_type, config)
    scramble_(hf, seed=seed)
    return hf


def test_hub_style_gpt2_names_stale_buffers_and_a_tied_head_load(tmp_path):
    """GPT-2 on the Hub: `h.0...` without the `transformer.` prefix, no lm_head (tied), old mask buffers first."""
    source, target = _hf("gpt2", GPT2, 1), _hf("gpt2", GPT2, 2)
    state = {"h.0.attn.bias": torch.ones(1, 1, 16, 16), "h.0.attn.masked_bias": torch.tensor(-1e4)}
    state |= {k.removeprefix("transformer."): v for k, v in source.state_dict().items() if k != "lm_head.weight"}
    load_into(target, state)
    assert_same_tensors(target.state_dict(), source.state_dict())
    assert target.lm_head.weight is target.transformer.wte.weight


def test_full_names_and_gpt_neox_embed_out_load():
    source, target = _hf("gpt_neox", NEOX, 1), _hf("gpt_neox", NEOX, 2)
    state = dict(source.state_dict())
    state["embed_out.weight"] = state.pop("lm_head.weight")   # the head's name before transformers 5
    load_into(target, state)
    assert_same_tensors(target.state_dict(), source.state_dict())


def _load_error(model, state) -> str:
    with pytest.raises(ValueError) as e:
        load_into(model, state)
    return str(e.value)


def test_missing_and_unplaced_tensors_are_named_five_at_most():
    hf = _hf("gpt_neox", NEOX, 0)
    full = hf.state_dict()
    keys = sorted(full)
    untied_head = {k: v for k, v in full.items() if k != "lm_head.weight"}   # NeoX's head is its own tensor
    assert _load_error(hf, untied_head) == \
        "weights do not match the config: missing ['lm_head.weight'], unexpected []"
    junk = dict(full, **{f"extra{i}.weight": torch.zeros(1) for i in range(7)})
    assert _load_error(hf, junk) == ("weights do not match the config: missing [], unexpected "
                                     f"{[f'extra{i}.weight' for i in range(5)]}")
    # a stray name is reported as written, not with the base-model prefix
    assert _load_error(hf, dict(full, **{"foo.weight": torch.zeros(1)})) == \
        "weights do not match the config: missing [], unexpected ['foo.weight']"
    assert _load_error(hf, {k: full[k] for k in keys[7:]}) == \
        f"weights do not match the config: missing {keys[:5]}, unexpected []"


def test_tensors_of_the_wrong_shape_name_the_last_mismatch():
    hf = _hf("gpt_neox", NEOX, 0)
    state = dict(hf.state_dict())
    for k in ("gpt_neox.final_layer_norm.bias", "gpt_neox.embed_in.weight"):
        state[k] = torch.zeros(3)
    assert _load_error(hf, state) == (
        "weights do not match the config: size mismatch for gpt_neox.final_layer_norm.bias: copying a param with "
        "shape torch.Size([3]) from checkpoint, the shape in current model is torch.Size([16]).")


# --- to_transformers -------------------------------------------------------------------------------------------

TINY = ModelConfig(vocab_size=61, context_length=16, d_model=16, n_layers=1, n_heads=2, d_ff=32, norm="rmsnorm",
                   position="rope", ffn="swiglu", bias=False, tie_embeddings=False)


def test_the_transformers_twin_has_our_dtype_device_values_and_attention_kernel():
    ours = build_model(TINY, dtype=torch.bfloat16, seed=3).eval()
    hf = to_transformers(ours, attn_implementation="eager")
    assert hf.config._attn_implementation == "eager" and not hf.training
    assert {(p.dtype, p.device.type) for p in hf.parameters()} == {(torch.bfloat16, "cpu")}
    assert torch.equal(hf.model.embed_tokens.weight, ours.state_dict()["tok_emb.weight"])
    meta = to_transformers(build_model(TINY, device="meta"))
    assert {p.device.type for p in meta.parameters()} == {"meta"}


def test_a_converter_that_drops_a_tensor_is_an_error(monkeypatch):
    convert = hf_models.ours_to_hf
    monkeypatch.setattr(hf_models, "ours_to_hf", lambda *a: {k: v for k, v in convert(*a).items()
                                                             if k != "model.norm.weight"})
    with pytest.raises(RuntimeError, match="Missing key.*model.norm.weight"):
        to_transformers(build_model(TINY))
