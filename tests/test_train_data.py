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
