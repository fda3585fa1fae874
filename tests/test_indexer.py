"""DeepSeek Sparse Attention (engine/layers/indexer.py): logits parity with transformers' DeepseekV32 and
GlmMoeDsa (fp32, every weight redrawn, T = 24 > index_topk = 5 so the top-k binds), the kept keys equal to
transformers' top-k, decode with a cache equal to a full forward, cache bytes == the closed form == the real
tensors (FP8 keys with their scales: 132 B a token at width 128), parameters == transformers == the closed form,
FLOPs == FlopCounterMode and the sparse counts by hand, saved bytes == saved-tensor hooks, field-named
validation."""
import pytest
import torch

from engine.budget.flops import decode_flops, flops_budget, headline_flops
from engine.budget.memory import index_key_cache_bytes, kv_cache_bytes, memory_budget
from engine.budget.params import count_params
from engine.config import ConfigError, ModelConfig
from engine.layers.indexer import fp8_key_width, from_fp8, indexer_params, to_fp8
from engine.measure.activations import measure_activations
from engine.measure.flops import counted_flops
from engine.measure.kvcache import measure_kv_cache
from engine.model import KVCache, build_model

transformers = pytest.importorskip("transformers", minversion="5.0")
from engine.interop import (from_hf_config, from_transformers, hf_model_from_config, scramble_,  # noqa: E402
                            to_hf_config, to_transformers)
from tests.hf_checks import (assert_both_attention_paths_match, assert_counts_match, assert_same_weights,  # noqa: E402
                             hooked_outputs, unit_scale_model)

transformers.logging.set_verbosity_error()
V, T, TOPK = 97, 24, 5
_HF = dict(vocab_size=V, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=12, q_lora_rank=20, qk_rope_head_dim=6,
           qk_nope_head_dim=10, v_head_dim=14, n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
           n_shared_experts=1, first_k_dense_replace=1, routed_scaling_factor=2.5, max_position_embeddings=64,
           index_topk=TOPK, index_n_heads=8, index_head_dim=16, bos_token_id=None, eos_token_id=None,
           pad_token_id=None)
CASES = {"deepseek_v32": ("deepseek_v32", _HF),
         "glm_moe_dsa": ("glm_moe_dsa", dict(_HF, rms_norm_eps=1e-5)),           # latent norms stay at 1e-6
         "glm_shared": ("glm_moe_dsa", dict(_HF, indexer_types=["full", "shared", "full"])),
         "v32_yarn": ("deepseek_v32", dict(_HF, rope_parameters=dict(
             rope_type="yarn", factor=4.0, original_max_position_embeddings=16, mscale_all_dim=1.0,
             rope_theta=10000.0)))}


def _hf(name: str, seed: int = 0):
    family, config = CASES[name]
    torch.manual_seed(seed)
    hf = hf_model_from_config(family, config, attn_implementation="eager").eval()
    scramble_(hf, seed=seed)
    return hf


def _ids(seed: int = 3) -> torch.Tensor:
    return torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(seed))


def _kept(model, idx) -> dict[int, torch.Tensor]:
    """Our model's kept keys per indexer layer (bool [B, T, S])."""
    indexers = {i: b.attn.indexer for i, b in enumerate(model.blocks) if b.attn.indexer is not None}
    return hooked_outputs(indexers, lambda: model(idx))


def _hf_topk(hf, idx) -> dict[int, torch.Tensor]:
    """transformers' top-k indices per indexer layer ([B, T, topk])."""
    indexers = {i: layer.self_attn.indexer for i, layer in enumerate(hf.model.layers)
                if getattr(layer.self_attn, "indexer", None) is not None}
    return hooked_outputs(indexers, lambda: hf(input_ids=idx))


@pytest.mark.parametrize("name", CASES)
def test_logits_and_kept_keys_match_transformers(name):
    hf = _hf(name)
    ours = from_transformers(hf)
    idx = _ids()
    kept = _kept(ours, idx)
    with torch.no_grad():
        want = hf(input_ids=idx).logits
    assert ours.cfg.index_topk == TOPK and ours.cfg.index_rope_interleave == name.startswith("glm")
    assert_both_attention_paths_match(ours, idx, want)   # SDPA and the explicit path under the top-k mask
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i, top in _hf_topk(hf, idx).items():   # transformers' top-k, its causally hidden picks dropped
        chosen = torch.zeros(2, T, T, dtype=torch.bool).scatter(-1, top.long(), True) & causal
        assert torch.equal(kept[i], chosen), (name, i)
        assert (kept[i].sum(-1) == torch.arange(1, T + 1).clamp(max=TOPK)).all()   # min(t + 1, k) keys a query
    assert set(kept) == ({0, 2} if name == "glm_shared" else {0, 1, 2})


@pytest.mark.parametrize("change", [dict(index_topk=T), dict(index_rope_interleave=None)])
def test_the_top_k_and_the_indexer_rope_decide_the_logits(change):
    """The parity above is not vacuous: attending to every key, or rotating the indexer's other pairing, moves
    the logits far beyond its tolerance."""
    hf = _hf("deepseek_v32")
    ours = from_transformers(hf)
    flip = {k: (not ours.cfg.index_rope_interleave if v is None else v) for k, v in change.items()}
    other = build_model(ours.cfg.replace(**flip), init=False)
    other.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (other.eval()(_ids()) - hf(input_ids=_ids()).logits).abs().max().item() > 1e-2


@pytest.mark.parametrize("name", CASES)
def test_param_count_matches_transformers_and_closed_form(name):
    hf = _hf(name)
    assert_counts_match(hf)
    cfg = from_hf_config(hf.config.to_dict())
    own = 2 if name == "glm_shared" else 3
    # wq_b 20*8*16 + wk 32*16 + k_norm 2*16 + weights_proj 32*8 per indexer layer
    assert count_params(cfg).components["indexer"] == own * (2560 + 512 + 32 + 256) == own * indexer_params(cfg)


@pytest.mark.parametrize("name", CASES)
def test_round_trip_to_transformers_gives_the_same_state_dict(name):
    hf = _hf(name)
    back = to_transformers(from_transformers(hf))
    assert back.config.model_type == CASES[name][0]
    assert_same_weights(hf.state_dict(), back.state_dict(), CASES[name][0])


def _tiny(**kw) -> ModelConfig:
    return ModelConfig(**{**dict(vocab_size=V, d_model=32, n_layers=3, n_heads=4, position="rope", norm="rmsnorm",
                                 norm_eps=1e-6, norm_bias=False, ffn="swiglu", d_ff=48, bias=False, kv_lora_rank=12, q_lora_rank=20,
                                 qk_rope_head_dim=6, qk_nope_head_dim=10, v_head_dim=14, index_topk=TOPK,
                                 index_n_heads=8, index_head_dim=16), **kw})


@pytest.mark.parametrize("kind", ["latent", "expanded"])
@pytest.mark.parametrize("shared", [None, ("full", "shared", "full")])
def test_decode_with_a_cache_matches_the_full_forward(kind, shared):
    cfg = _tiny(indexer_types=shared)
    model = unit_scale_model(cfg)
    for a in model.attention_layers():
        a.cache_kind = kind
    idx = _ids()
    cache = KVCache(cfg.n_layers, index_keys="dtype")
    with torch.no_grad():
        full = model(idx)
        steps = [model(idx[:, :7], cache)] + [model(idx[:, t:t + 1], cache) for t in range(7, T)]
    assert (torch.cat(steps, dim=1) - full).abs().max().item() < 1e-5
    own = sum(cfg.indexer_layers)
    assert sum(layer.index_nbytes() for layer in cache.layers) == own * 2 * T * 16 * 4   # B * S * D * fp32
    assert [layer.index_keys is not None for layer in cache.layers] == cfg.indexer_layers


def test_fp8_key_cache_holds_132_bytes_a_token_at_width_128():
    """DeepSeek's Indexer caches k_cache float8_e4m3fn [.., 128] and k_scale_cache float32 [.., 128 // 128]."""
    assert fp8_key_width(128) == 128 * 1 + 1 * 4 == 132
    assert fp8_key_width(16) == 20 and fp8_key_width(160) == 168   # a scale per block of up to 128 values
    k = torch.randn(2, 5, 160) * 3
    q, scale = to_fp8(k)
    assert (q.dtype, scale.dtype, q.shape, scale.shape) == (torch.float8_e4m3fn, torch.float32, (2, 5, 160), (2, 5, 2))
    assert torch.equal(scale, torch.exp2(torch.round(torch.log2(scale))))        # powers of two (ue8m0)
    back = from_fp8(q, scale, torch.float32)
    assert ((back - k).abs() <= k.abs() / 16 + scale.repeat_interleave(torch.tensor([128, 32]), dim=-1) / 64).all()


@pytest.mark.parametrize("index_keys", ["fp8", "dtype"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("tokens", [1, 9])
def test_cache_bytes_equal_the_real_tensors(index_keys, dtype, tokens):
    cfg = _tiny(indexer_types=("full", "shared", "full"))
    m = measure_kv_cache(cfg, 2, tokens, dtype, index_keys=index_keys)
    assert m.estimate == m.measured
    e = 4 if dtype == "fp32" else 2
    index = 2 * tokens * 2 * (20 if index_keys == "fp8" else 16 * e)   # 2 indexer layers * B * T * bytes
    assert index_key_cache_bytes(cfg, 2, tokens, dtype, index_keys) == index
    assert m.measured == 3 * 2 * tokens * (12 + 6) * e + index


def test_fp8_decode_stays_close_and_keeps_what_its_keys_say():
    """With FP8 keys the indexer scores the dequantized keys (as DeepSeek's kernel does): bytes as above, logits
    near the full-precision forward's (a key near the top-k boundary may swap)."""
    cfg = _tiny()
    model = unit_scale_model(cfg)
    idx = _ids()
    cache = KVCache(cfg.n_layers)
    with torch.no_grad():
        full = model(idx)
        steps = [model(idx[:, :7], cache)] + [model(idx[:, t:t + 1], cache) for t in range(7, T)]
    assert cache.layers[0].index_keys.dtype == torch.float8_e4m3fn
    assert sum(layer.index_nbytes() for layer in cache.layers) == 3 * 2 * T * 20
    assert (torch.cat(steps, dim=1) - full).abs().mean().item() < 0.1 * full.abs().mean().item()


def test_deepseek_v32_cache_per_token_and_layer():
    cfg = ModelConfig(n_layers=61, d_model=7168, n_heads=128, position="rope", norm="rmsnorm", norm_bias=False,
                      kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                      index_topk=2048)
    assert kv_cache_bytes(cfg, 1, 1) == 61 * ((512 + 64) * 2 + 132) == 78_324
    assert kv_cache_bytes(cfg, 1, 1, index_keys="dtype") == 61 * (512 + 64 + 128) * 2
    b = memory_budget(cfg, 1, 4096)
    assert b.kv_cache_index_bytes == 61 * 4096 * 132 and b.formulas["kv_cache_index_bytes"].startswith("61 indexer")
    assert "index_head_dim=128 FP8" in b.formulas["kv_cache_bytes"]


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("v_head_dim", [14, 16])   # 16 = 10 + 6: SDPA's flash kernel with the top-k mask
def test_flops_equal_flop_counter_and_the_sparse_counts(impl, v_head_dim):
    cfg = _tiny(v_head_dim=v_head_dim, indexer_types=("full", "shared", "full"))
    fwd, bwd = counted_flops(cfg, 2, 9, impl)
    full = flops_budget(cfg, 2, 9)
    assert (full.forward_flops, full.backward_flops) == (fwd, bwd)   # the dense kernel under the mask
    sparse = headline_flops(cfg, 2, 9)
    pairs = sum(min(i + 1, TOPK) for i in range(9))                  # 1+2+3+4+5+5+5+5+5 = 35 per layer
    assert sparse.attention_flops == 3 * 2 * 2 * 4 * (16 + v_head_dim) * pairs
    proj = 20 * 8 * 16 + 32 * 16 + 32 * 8                             # wq_b, wk, weights_proj
    assert sparse.indexer_flops == 2 * (2 * proj * 2 * 9 + 2 * 8 * (16 + 1) * 2 * 45)   # every visible pair
    assert sparse.backward_flops == 2 * (sparse.matmul_flops + sparse.attention_flops)   # none for the indexer


def test_decode_flops_read_top_k_keys_and_score_all():
    cfg = _tiny()
    for context in (3, 40):
        step = headline_flops(cfg, 1, context + 1).forward_flops - headline_flops(cfg, 1, context).forward_flops
        assert decode_flops(cfg, 1, context) == step
    grow = decode_flops(cfg, 1, 41) - decode_flops(cfg, 1, 40)   # past the top-k only the indexer grows
    assert grow == 3 * 2 * 8 * (16 + 1)


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("v_head_dim", [14, 16])
def test_saved_bytes_equal_the_closed_form(impl, dtype, v_head_dim):
    m = measure_activations(_tiny(v_head_dim=v_head_dim), 2, 9, impl, dtype)
    assert m.estimate == m.measured


@pytest.mark.parametrize("changes,field", [
    (dict(kv_lora_rank=None), "kv_lora_rank:"), (dict(q_lora_rank=None), "q_lora_rank:"),
    (dict(index_head_dim=4), "index_head_dim:"), (dict(indexer_types=("full", "shared")), "indexer_types:"),
    (dict(indexer_types=("shared", "full", "full")), "indexer_types:"), (dict(index_topk=0), "index_topk:")])
def test_validation_names_the_field(changes, field):
    with pytest.raises(ConfigError) as e:
        _tiny(**changes)
    assert any(p.startswith(field) for p in e.value.problems), e.value.problems


def test_export_picks_the_family_by_the_indexer_rope_and_refuses_sparse_elsewhere():
    assert to_hf_config(_tiny())[0] == "deepseek_v32"
    family, d = to_hf_config(_tiny(index_rope_interleave=True, indexer_types=("full", "shared", "full")))
    assert family == "glm_moe_dsa" and d["indexer_types"] == ["full", "shared", "full"]
    back = from_hf_config({"model_type": family, **d})
    assert back.replace(name="gpt2", norm_bias=False) == _tiny(index_rope_interleave=True,
                                                               indexer_types=("full", "shared", "full"))
    with pytest.raises(ConfigError, match="index_topk: 5 is not expressible in deepseek_v3"):
        to_hf_config(_tiny(), "deepseek_v3")


@pytest.mark.parametrize("changes,key", [
    (dict(rope_interleave=False), "rope_interleave"), (dict(layer_types=["full_attention"] * 3), "layer_types"),
    (dict(mlp_layer_types=["sparse", "dense", "sparse"]), "mlp_layer_types")])
def test_what_transformers_builds_otherwise_is_refused_naming_the_key(changes, key):
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "deepseek_v32", **_HF, **changes})
    assert any(p.startswith(key) for p in e.value.problems), e.value.problems


def test_glm_reads_its_indexer_schedule_as_transformers_does():
    glm = {**_HF, "num_hidden_layers": 6}
    cases = [({}, None), ({"index_topk_freq": 2, "index_skip_topk_offset": 1}, ("full", "shared") * 3),
             ({"index_topk_pattern": "FSSFFS"}, ("full", "shared", "shared", "full", "full", "shared"))]
    for extra, want in cases:
        cfg = from_hf_config({"model_type": "glm_moe_dsa", **glm, **extra})
        hf = transformers.AutoConfig.for_model("glm_moe_dsa", **{**glm, **extra})
        assert cfg.indexer_types == want
        assert list(cfg.indexer_types or ("full",) * 6) == hf.indexer_types


def test_deepseek_v4_is_refused_naming_each_part_we_do_not_build():
    with pytest.raises(ConfigError) as e:
        from_hf_config({"model_type": "deepseek_v4", "hc_mult": 4, "compress_ratios": [0, 4, 128]})
    keys = [p.split(":")[0] for p in e.value.problems]
    assert keys == ["hc_mult", "layer_types", "mlp_layer_types", "o_groups", "scoring_func"]
    assert "hyper-connections" in e.value.problems[0] and "compress" in e.value.problems[1]


def test_the_first_attention_layer_must_pick_its_own_keys():
    """Behind an FFN-only first layer (layer type none), the first layer with attention is the one whose indexer
    picks the keys the shared layers reuse: a shared one there is refused by its position, not a crash in the
    forward; a 'shared' entry on the FFN-only layer itself is harmless."""
    from tests.helpers import MLA_BASE, make
    base = make(dict(MLA_BASE, index_topk=2))
    with pytest.raises(ConfigError) as e:
        base.replace(n_layers=2, layer_types=("none", "full"), indexer_types=("full", "shared"))
    assert e.value.problems == ["indexer_types: the first attention layer (2) must be full (a shared layer reuses "
                                "an earlier layer's choice)"]
    cfg = base.replace(n_layers=3, layer_types=("none", "full", "full"), indexer_types=("shared", "full", "shared"))
    model = build_model(cfg, seed=0).eval()
    with torch.no_grad():
        logits = model(torch.randint(cfg.vocab_size, (1, 5), generator=torch.Generator().manual_seed(0)))
    assert logits.shape == (1, 5, cfg.vocab_size) and torch.isfinite(logits).all()


@pytest.mark.parametrize("layer_types", [("gdn", "full"), ("full", "mamba2"), ("full+kda", "full")])
def test_sparse_attention_beside_a_recurrent_mixer_is_refused_by_name(layer_types):
    """The indexer's choice of keys is handed to each layer's mixer; a recurrent mixer has no keys to choose
    from (it crashed in the forward): the config is refused, naming the first such layer."""
    from engine.config import ConfigError
    from tests.knob_cases import BASE_FIELDS, KNOBS
    base = dict(BASE_FIELDS, **KNOBS["index_n_heads"][0])
    with pytest.raises(ConfigError) as e:
        ModelConfig(**base, layer_types=layer_types)
    i = next(i for i, t in enumerate(layer_types) if t != "full")
    assert e.value.problems == [f"layer_types: sparse attention (index_topk set) is modelled on attention layers "
                                f"only; layer {i + 1} is {layer_types[i]}"]


def test_a_misspelled_layer_type_is_reported_beside_indexer_types_not_a_crash():
    """The editor validates every field at once: with a misspelled layer_types word, the indexer's rule cannot
    find the first attention layer, and the user reads the layer_types problem (indexer_types 'full' first is
    then not judged), not a KeyError from the rule."""
    from tests.helpers import MLA_BASE, make
    base = make(dict(MLA_BASE, index_topk=2))
    with pytest.raises(ConfigError) as e:
        base.replace(n_layers=2, layer_types=("none", "bogus"), indexer_types=("full", "shared"))
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith("layer_types: entry 2 of 2, 'bogus', is not")
