"""Offline training data: nothing is downloaded, every source is already on this machine.

- names:  first names shipped inside the `names` PyPI package, character level, one name per document
          separated by a BOS token (the microgpt setting: the model learns to spell plausible new names).
- stdlib: the Python standard library's own source, byte level (vocab 256 + BOS).
- text:   any user text (an upload or a file path), character level over the characters it contains.
"""
from __future__ import annotations

import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.limits import MAX_DATA_BYTES, InputError, read_text

SOURCES = ("names", "stdlib")
BOS = "\x00"  # the document separator; shown as a line break when decoding


@dataclass(frozen=True)
class Dataset:
    """A token stream split into train and val; `itos[i]` is the text of token i (BOS is token 0)."""
    name: str
    level: str               # "char" or "byte"
    itos: tuple[str, ...]
    train: torch.Tensor      # int64 [N_train]
    val: torch.Tensor        # int64 [N_val]

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def decode(self, ids: list[int]) -> str:
        if self.level == "byte":
            raw = bytes(i - 1 for i in ids if i > 0)   # token i>0 is byte i-1
            return raw.decode("utf-8", errors="replace")
        return "".join("\n" if i == 0 else self.itos[i] for i in ids)


def names_files() -> list[Path]:
    """The first-name lists inside the installed `names` package (found next to its __init__.py)."""
    import names
    root = Path(names.__file__).parent
    files = sorted(root.glob("dist.*.first"))
    if not files:
        raise FileNotFoundError(f"no dist.*.first files in {root}: the `names` package layout changed")
    return files


def _char_dataset(name: str, docs: list[str], val_fraction: float, seed: int) -> Dataset:
    """Documents shuffled with `seed`, split by document (val never sees a train name), BOS-separated."""
    docs = list(docs)
    random.Random(seed).shuffle(docs)
    itos = (BOS,) + tuple(sorted(set("".join(docs)) - {BOS}))
    stoi = {c: i for i, c in enumerate(itos)}
    n_val = max(1, int(len(docs) * val_fraction))

    def encode(ds: list[str]) -> torch.Tensor:
        ids = [0]
        for d in ds:
            ids.extend(stoi[c] for c in d)
            ids.append(0)
        return torch.tensor(ids, dtype=torch.long)

    return Dataset(name, "char", itos, encode(docs[n_val:]), encode(docs[:n_val]))


def load_names(val_fraction: float = 0.1, seed: int = 0) -> Dataset:
    """About 5,000 distinct lower-case first names (the package's male and female lists)."""
    found: set[str] = set()
    for path in names_files():
        for line in path.read_text(encoding="ascii").splitlines():
            if line.strip():
                found.add(line.split()[0].lower())
    return _char_dataset("names", sorted(found), val_fraction, seed)


def load_stdlib(max_bytes: int = 2_000_000, val_fraction: float = 0.1) -> Dataset:
    """The first `max_bytes` of the standard library's top-level .py files (sorted, so always the same bytes)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(root.glob("*.py")):
        data = path.read_bytes()
        chunks.append(data[: max_bytes - total])
        total += len(chunks[-1])
        if total >= max_bytes:
            break
    if not chunks:
        raise FileNotFoundError(f"no .py files in the standard library directory {root}")
    ids = torch.tensor(list(b"".join(chunks)), dtype=torch.long) + 1   # token 0 stays BOS
    n_val = max(2, int(len(ids) * val_fraction))
    itos = (BOS,) + tuple(chr(b) if 32 <= b < 127 else f"\\x{b:02x}" for b in range(256))
    return Dataset("stdlib", "byte", itos, ids[:-n_val], ids[-n_val:])


def load_text(text: str, name: str = "text", val_fraction: float = 0.1) -> Dataset:
    """Character level over the characters the text contains; the last `val_fraction` is held out."""
    text = text.replace(BOS, "")
    if len(text) < 64:
        raise ValueError(f"data: the text has {len(text)} characters; at least 64 are needed to train")
    itos = (BOS,) + tuple(sorted(set(text)))
    stoi = {c: i for i, c in enumerate(itos)}
    ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_val = max(2, int(len(ids) * val_fraction))
    return Dataset(name, "char", itos, ids[:-n_val], ids[-n_val:])


def load_data(source: str, seed: int = 0) -> Dataset:
    """'names', 'stdlib' or a path to a UTF-8 text file."""
    if source == "names":
        return load_names(seed=seed)
    if source == "stdlib":
        return load_stdlib()
    path = Path(source)
    try:
        text = read_text(path, MAX_DATA_BYTES, "data")
    except InputError as e:
        raise ValueError(f"{e}; use names, stdlib or a text file") from None
    return load_text(text, name=path.name)


def get_batch(tokens: torch.Tensor, batch: int, seq: int, gen: torch.Generator,
              rank: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of seq+1 tokens: inputs x [B, T] and next-token targets y [B, T].

    Every rank draws the same global batch from the same generator and keeps its own slice, so N processes
    see exactly the batch one process would (the basis of the DDP equivalence test)."""
    if len(tokens) <= seq + 1:
        raise ValueError(f"seq: {seq} needs more than {seq + 1} tokens, the split has {len(tokens)}")
    starts = torch.randint(len(tokens) - seq - 1, (batch,), generator=gen)
    per = batch // world
    starts = starts[rank * per:(rank + 1) * per]
    x = torch.stack([tokens[s:s + seq] for s in starts.tolist()])
    y = torch.stack([tokens[s + 1:s + seq + 1] for s in starts.tolist()])
    return x, y
