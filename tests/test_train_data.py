"""Offline training data: the names lists inside the `names` package, the stdlib source, user text."""
from __future__ import annotations

import string

import pytest
import torch

from engine.train.data import get_batch, load_data, load_names, load_stdlib, load_text, names_files


def test_names_come_from_the_installed_package():
    files = names_files()
    assert {f.name for f in files} == {"dist.female.first", "dist.male.first"}


def test_names_are_character_level_with_bos_separators():
    d = load_names()
    assert d.level == "char" and d.itos[0] == "\x00"
    assert set(d.itos[1:]) == set(string.ascii_lowercase) and d.vocab_size == 27
    docs = d.decode(d.train.tolist()).split("\n")
    assert docs[0] == "" and docs[-1] == ""          # the stream starts and ends with BOS
    names = [n for n in docs if n]
    assert 4000 < len(names) + len(d.decode(d.val.tolist()).split()) < 6000
    assert all(n.isalpha() and n.islower() for n in names)


def test_names_split_is_by_document_and_seeded():
    a, b, c = load_names(seed=0), load_names(seed=0), load_names(seed=1)
    train = set(a.decode(a.train.tolist()).split())
    val = set(a.decode(a.val.tolist()).split())
    assert not train & val and 0.05 < len(val) / (len(train) + len(val)) < 0.15
    assert torch.equal(a.train, b.train) and not torch.equal(a.train, c.train)


def test_stdlib_is_byte_level_and_round_trips():
    d = load_stdlib(max_bytes=50_000)
    assert d.level == "byte" and d.vocab_size == 257
    assert len(d.train) + len(d.val) == 50_000 and int(d.train.min()) >= 1
    assert "import" in d.decode(d.train.tolist())


def test_text_is_character_level_over_its_own_characters():
    text = "to be or not to be, that is the question. " * 4
    d = load_text(text)
    assert d.vocab_size == 1 + len(set(text))
    assert d.decode(d.train.tolist()) + d.decode(d.val.tolist()) == text


def test_bad_sources_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="data: the text has 5 characters"):
        load_text("hello")
    with pytest.raises(ValueError, match="data: cannot read .*names, stdlib or a text file"):
        load_data(str(tmp_path / "missing.txt"))
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00" * 40)
    with pytest.raises(ValueError, match="not UTF-8"):
        load_data(str(tmp_path / "bin"))


def test_batches_are_shifted_windows_and_ranks_share_one_global_batch():
    tokens = torch.arange(1000)
    x, y = get_batch(tokens, 8, 16, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (8, 16) and torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, 0], x[:, 0] + 1)
    halves = [get_batch(tokens, 8, 16, torch.Generator().manual_seed(3), rank=r, world=2)[0] for r in (0, 1)]
    assert torch.equal(torch.cat(halves), x)
    with pytest.raises(ValueError, match="seq: 16 needs more than 17 tokens"):
        get_batch(torch.arange(10), 2, 16, torch.Generator())


def test_each_source_by_name_gives_its_dataset(tmp_path):
    names = load_data("names")
    assert names.name == "names" and torch.equal(names.train, load_names(seed=0).train)      # seed 0 by default
    assert torch.equal(load_data("names", seed=3).val, load_names(seed=3).val)
    stdlib = load_data("stdlib")
    assert stdlib.name == "stdlib" and len(stdlib.train) + len(stdlib.val) == 2_000_000 and len(stdlib.val) == 200_000
    text = "the quick brown fox jumps over the lazy dog\n" * 3
    (tmp_path / "fox.txt").write_text(text, encoding="utf-8")
    d = load_data(str(tmp_path / "fox.txt"))
    assert (d.name, d.level) == ("fox.txt", "char") and d.decode(torch.cat([d.train, d.val]).tolist()) == text


def test_stdlib_bytes_split_and_printable_tokens():
    d = load_stdlib(max_bytes=50_000)
    assert (d.name, d.level, len(d.val)) == ("stdlib", "byte", 5_000)      # the last 10% held out
    assert len(load_stdlib(max_bytes=20).val) == 2                          # at least one input and its target
    # token b+1 is byte b: printable ASCII (0x20 space .. 0x7e ~) as itself, every other byte as \xNN
    assert len(d.itos) == 257 and d.itos[1 + 65] == "A"
    assert [d.itos[1 + b] for b in (0x00, 0x1f, 0x20, 0x7e, 0x7f, 0x80, 0xff)] == \
        ["\\x00", "\\x1f", " ", "~", "\\x7f", "\\x80", "\\xff"]


def test_stdlib_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("sysconfig.get_paths", lambda: {"stdlib": str(tmp_path)})
    with pytest.raises(FileNotFoundError, match=f"no .py files in the standard library directory {tmp_path}$"):
        load_stdlib()


def test_text_split_name_and_length_limit():
    text = "abcdefgh" * 21                                                    # 168 characters
    d = load_text(text)
    assert (d.name, d.level, len(d.train), len(d.val)) == ("text", "char", 152, 16)   # int(168 * 0.1) held out
    assert len(load_text(text[:64], val_fraction=0.01).val) == 2            # never fewer than 2 tokens
    with_bos = load_text("ab\x00" * 40)                                     # BOS is the separator: dropped
    assert with_bos.itos == ("\x00", "a", "b") and with_bos.decode(with_bos.train.tolist()) == "ab" * 36
    with pytest.raises(ValueError, match="^data: the text has 63 characters; at least 64 are needed to train$"):
        load_text("x" * 63)


def test_the_shortest_split_a_batch_accepts_is_seq_plus_two_tokens():
    """A validation split of 18 tokens is enough for windows of 16: every row is 16 consecutive tokens of the
    split and its next-token targets; one token fewer is refused with the count it needs."""
    tokens = torch.arange(18)
    x, y = get_batch(tokens, 3, 16, torch.Generator().manual_seed(0))
    assert x.shape == (3, 16) and torch.equal(y, x + 1) and torch.equal(x, x[:, :1] + torch.arange(16))
    with pytest.raises(ValueError, match="seq: 16 needs more than 17 tokens, the split has 17"):
        get_batch(tokens[:17], 3, 16, torch.Generator())


def test_a_byte_sample_cut_inside_a_character_still_decodes():
    """A byte-level model samples any bytes: a sample that stops inside a multi-byte character (or is not
    UTF-8 at all) is still shown, the broken bytes as U+FFFD, the rest as it is."""
    d = load_stdlib(max_bytes=4096)
    ids = [b + 1 for b in "café".encode()]       # token i > 0 is byte i - 1
    assert d.decode(ids) == "café"
    assert d.decode(ids[:-1]) == "caf\ufffd"       # the last character's second byte never came
    assert d.decode([0xff + 1, ord("a") + 1, 0]) == "\ufffda"   # BOS (0) is dropped at the byte level


def test_a_tiny_val_fraction_still_holds_out_exactly_one_name():
    """val_fraction * names below 1 rounds down to 0; one name is held out all the same, and only one: val is
    BOS, the name, BOS, and train keeps every other name."""
    full, tiny = load_names(), load_names(val_fraction=1e-6)
    assert (tiny.val == 0).sum() == 2 and tiny.val[0] == tiny.val[-1] == 0
    names = lambda ids: int((ids == 0).sum()) - 1   # noqa: E731
    assert names(tiny.train) == names(full.train) + names(full.val) - 1
