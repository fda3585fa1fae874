"""Training data by hand: a text's vocabulary and split token for token, batch windows at the boundary, decoding,
the default splits of names and stdlib, and the messages a user reads."""
from __future__ import annotations

import pytest
import torch

from engine.train.data import get_batch, load_data, load_names, load_stdlib, load_text

TEXT = "abcab" * 20   # 100 characters over a, b, c


def test_a_texts_tokens_and_split_by_hand():
    d = load_text("\x00" + TEXT, name="t.txt")          # BOS is removed from user text
    assert (d.name, d.level, d.itos, d.vocab_size) == ("t.txt", "char", ("\x00", "a", "b", "c"), 4)
    ids = [1, 2, 3, 1, 2] * 20
    assert d.train.dtype == d.val.dtype == torch.int64
    assert d.train.tolist() == ids[:90] and d.val.tolist() == ids[90:]     # the last 10% (10 characters)
    assert load_text(TEXT).name == "text"
    assert load_text(TEXT, val_fraction=0.01).val.tolist() == ids[98:]     # at least 2 val tokens


def test_too_short_a_text_is_refused_word_for_word():
    with pytest.raises(ValueError) as e:
        load_text("x" * 63)
    assert str(e.value) == "data: the text has 63 characters; at least 64 are needed to train"
    assert load_text("x" * 64).vocab_size == 2


def test_a_text_file_loads_and_a_missing_one_names_the_sources(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT, encoding="utf-8")
    d = load_data(str(tmp_path / "t.txt"))
    assert d.name == "t.txt" and d.train.tolist()[:5] == [1, 2, 3, 1, 2]
    with pytest.raises(ValueError) as e:
        load_data(str(tmp_path / "missing.txt"))
    assert str(e.value).endswith("; use names, stdlib or a text file") and "missing.txt" in str(e.value)


def test_the_last_window_reaches_the_last_token():
    tokens = torch.arange(10)
    x, y = get_batch(tokens, 3, 8, torch.Generator().manual_seed(0))   # 10 tokens: only the window at 0 fits
    assert x.tolist() == [list(range(8))] * 3 and y.tolist() == [list(range(1, 9))] * 3
    assert x.dtype == torch.int64
    with pytest.raises(ValueError) as e:
        get_batch(tokens, 1, 9, torch.Generator())
    assert str(e.value) == "seq: 9 needs more than 10 tokens, the split has 10"


def test_windows_cover_every_start_and_never_run_past_the_end():
    tokens = torch.arange(12)
    x, y = get_batch(tokens, 400, 8, torch.Generator().manual_seed(0))
    assert sorted({int(r[0]) for r in x}) == [0, 1, 2]     # 12 - 8 - 1 = 3 starts
    assert torch.equal(y, x + 1)


@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_keeps_its_slice_of_the_global_batch(world):
    tokens = torch.arange(100)
    whole = get_batch(tokens, 8, 4, torch.Generator().manual_seed(3))
    per = 8 // world
    for rank in range(world):
        x, y = get_batch(tokens, 8, 4, torch.Generator().manual_seed(3), rank, world)
        assert torch.equal(x, whole[0][rank * per:(rank + 1) * per]) and torch.equal(y, whole[1][rank * per:(rank + 1) * per])


def test_byte_decoding_drops_bos_and_replaces_broken_utf8():
    d = load_text(TEXT)
    assert d.decode([0, 1, 2, 3, 0]) == "\nabc\n"
    b = load_stdlib(max_bytes=64)
    assert (b.level, b.vocab_size, b.itos[1], b.itos[ord("a") + 1]) == ("byte", 257, "\\x00", "a")
    assert b.decode([0, ord("h") + 1, ord("i") + 1, 0xC3 + 1]) == "hi\ufffd"   # a cut-off two-byte character
    assert b.decode([0xC3 + 1, 0xA9 + 1]) == "é"


def test_stdlib_defaults_to_2_000_000_bytes_with_a_tenth_held_out():
    d = load_stdlib()
    assert d.train.dtype == torch.int64 and (len(d.train), len(d.val)) == (1_800_000, 200_000)
    assert int(min(d.train.min(), d.val.min())) >= 1         # token 0 stays BOS
    small = load_stdlib(max_bytes=64)
    assert (len(small.train), len(small.val)) == (58, 6)                     # int(64 x 0.1) = 6
    assert len(load_stdlib(max_bytes=15).val) == 2                             # at least 2 held out (int(1.5) = 1)


def test_names_hold_a_tenth_of_the_names_out_shuffled_by_the_seed():
    d = load_names()
    n_val = int(d.val.eq(0).sum()) - 1
    n_train = int(d.train.eq(0).sum()) - 1
    assert n_val == int((n_val + n_train) * 0.1) and d.val[0] == d.val[-1] == d.train[0] == 0
    assert torch.equal(load_names(seed=0).val, d.val) and not torch.equal(load_names(seed=1).val, d.val)
    assert torch.equal(load_data("names").val, d.val) and torch.equal(load_data("names", seed=1).val,
                                                                     load_names(seed=1).val)
