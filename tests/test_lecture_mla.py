"""'MLA: cache the latent, not the heads': engine.lecture.latent_cache against the tensors of a real decode step
(every kind, MLA's latent and expanded caches included), against DeepSeek-V3's published latent size, and
against a few-line formula; its chart; the Lecture section in AppTest (numbers, URL keys, one-click link)."""
import pytest
import torch

from app.charts.lecture import latent_cache_figure
from engine.config import ConfigError, ModelConfig
from engine.lecture import latent_cache, mla_sizes
from engine.model import KVCache, build_model
from engine.presets import PRESETS

LECTURE = "pages/lecture.py"
TINY = ModelConfig(vocab_size=50, context_length=16, d_model=24, n_layers=2, n_heads=4, n_kv_heads=2,
                   position="rope", ffn="swiglu", d_ff=32)


@torch.no_grad()
def cache_bytes(cfg: ModelConfig, kind: str, tokens: int) -> int:
    """Bytes of the cache tensors after prefilling tokens - 1 positions and decoding one (fp32)."""
    model = build_model(cfg, seed=0).eval()
    if cfg.mla:   # plain attention has one kind of cache
        for layer in model.attention_layers():
            layer.cache_kind = kind
    idx = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    cache = KVCache(cfg.n_layers)
    if tokens > 1:
        model(idx[:, :-1], cache)
    model(idx[:, -1:], cache)
    return cache.nbytes()


@pytest.mark.parametrize("cfg, gqa", [(TINY, ["GQA-2"]),   # the config's own GQA; an MLA config's 4 heads have none
                                      (TINY.replace(n_kv_heads=None, kv_lora_rank=8, qk_rope_head_dim=4,
                                                    qk_nope_head_dim=6, v_head_dim=5), [])], ids=["gqa", "mla"])
def test_every_kind_equals_the_real_cache_tensors(cfg, gqa):
    tokens = (1, 7, 12)
    r = latent_cache(cfg, tokens, dtype="fp32")
    assert [k.kind for k in r.kinds] == ["MHA", *gqa, "MQA", "MLA latent", "MLA expanded"]
    for k in r.kinds:
        assert r.series[k.kind] == tuple(cache_bytes(k.config, k.cache, t) for t in tokens), k.kind
        assert k.per_token == r.series[k.kind][0]


def test_deepseek_v3_per_token_bytes():
    """bf16, 61 layers: the latent (512 + 64) x 61 x 2 = 70,272 bytes; MHA/GQA/MQA with 128 heads of 128; the
    expanded cache 128 x (192 + 128) numbers per layer, about 71 times the latent (issue 12, DeepSeek-V2 paper)."""
    r = latent_cache(PRESETS["deepseek-v3"].config, (1, 65_536))
    got = {k.kind: k.per_token for k in r.kinds}
    assert got == {"MHA": 61 * 2 * 128 * 128 * 2, "GQA-32": 61 * 2 * 32 * 128 * 2, "MQA": 61 * 2 * 128 * 2,
                   "MLA latent": 70_272, "MLA expanded": 61 * 128 * (192 + 128) * 2}
    assert r.series["MLA latent"][-1] == 70_272 * 65_536
    assert round(got["MLA expanded"] / got["MLA latent"]) == 71
    assert r.gqa_groups == 2.25   # the paper: MLA's cache equals GQA with 2.25 groups


def test_plain_configs_take_deepseek_v2_ratios():
    """d_c = 4 d_h and d_h^R = d_h / 2: Llama-3-8B's heads of 128 give DeepSeek's own 512 and 64."""
    assert mla_sizes(PRESETS["llama-3-8b"].config) == (512, 64)
    assert mla_sizes(PRESETS["gpt2"].config) == (256, 32)
    assert mla_sizes(TINY.replace(d_model=24, n_heads=4)) == (24, 4)   # head 6: half is 3, rounded up to even
    r = latent_cache(PRESETS["llama-3-8b"].config, (8192,), kv_lora_rank=256, rope_dim=32)
    latent = next(k for k in r.kinds if k.kind == "MLA latent")
    assert latent.values == 256 + 32 and latent.per_token == 32 * (256 + 32) * 2
    assert next(k for k in r.kinds if k.kind == "GQA-8").per_token == 32 * 2 * 8 * 128 * 2   # the config's own


def test_an_odd_rotary_width_names_the_field():
    with pytest.raises(ConfigError, match="qk_rope_head_dim"):
        latent_cache(TINY, (4,), rope_dim=3)


def test_chart_has_a_line_per_kind_with_units():
    r = latent_cache(PRESETS["deepseek-v3"].config, (1, 81_920, 163_840))
    fig = latent_cache_figure(r)
    assert [t.name.split(":")[0] for t in fig.data] == [k.kind for k in r.kinds]
    assert fig.layout.xaxis.title.text == "context length (tokens)" and fig.layout.yaxis.title.text == "KV cache (GiB)"
    latent = fig.data[3]
    assert latent.line.width > fig.data[0].line.width and latent.y[-1] * 2**30 == 70_272 * 163_840


def test_lecture_section_on_deepseek_v3(new_app):
    at = new_app(page=LECTURE, section="mla", preset="deepseek-v3")
    at.run()
    assert not at.exception and not at.error and not at.warning
    assert at.header[0].value.endswith("MLA: cache the latent, not the heads")
    shown = {m.label: m.value for m in at.metric}
    assert shown["MLA latent"] == "68.62 KiB/token"   # 70,272 B
    assert shown["MHA"] == "3.81 MiB/token"
    link = at.get("page_link")[0].proto   # one click: the latent width swept on the Trade-offs page
    assert link.page == "tradeoffs" and link.query_string == "knob=kv_lora_rank&values=128%2C256%2C512%2C1024"


def test_lecture_section_settings_round_trip_through_the_url(new_app):
    at = new_app(page=LECTURE, section="mla", preset="gpt2")
    at.run()
    at.number_input(key="lec_mla_rank_256").set_value(128).run()
    at.selectbox(key="lec_mla_dtype").set_value("fp32").run()
    assert not at.exception
    url = dict(at.query_params)
    assert url["mla_rank"] == "128" and url["mla_dtype"] == "fp32" and "mla_rope" not in url   # default left out
    again = new_app(page=LECTURE, **url)
    again.run()
    assert not again.exception and not again.warning
    assert again.number_input(key="lec_mla_rank_256").value == 128
    shown = {m.label: m.value for m in again.metric}
    assert shown["MLA latent"] == "7.50 KiB/token"   # 12 layers x (128 + 32) x 4 bytes
    bad = new_app(page=LECTURE, section="mla", mla_rope="x")
    bad.run()
    assert any("mla_rope" in w.value for w in bad.warning)
