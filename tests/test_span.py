"""The span's closed forms (engine/layers/span.py) against a count from the definition, position by position:
key j is visible to query i iff j <= i and, in a window w, i - j < w, or, in chunks of C, j // C == i // C.
The FLOPs count query-key pairs, the decode cost counts the keys one query reads, the KV cache the keys kept."""
import pytest
import torch

from engine.layers.span import Chunk, keys_held, keys_seen, query_key_pairs, visible

SPANS = [None, 1, 2, 3, 5, 16, Chunk(1), Chunk(3), Chunk(4), Chunk(16)]


def sees(i: int, j: int, span) -> bool:
    if j > i:
        return False
    if isinstance(span, Chunk):
        return j // span.size == i // span.size
    return span is None or i - j < span


@pytest.mark.parametrize("span", SPANS, ids=str)
def test_pairs_keys_and_mask_follow_the_definition(span):
    for seq in range(1, 21):
        by_hand = [sum(sees(i, j, span) for j in range(seq)) for i in range(seq)]
        assert query_key_pairs(seq, span, causal=True) == sum(by_hand), seq
        assert type(query_key_pairs(seq, span, causal=True)) is int   # a count, printed without ".0"
        assert [keys_seen(i, span) for i in range(seq)] == by_hand
        pos = torch.arange(seq)
        assert visible(pos, pos, span).tolist() == [[sees(i, j, span) for j in range(seq)] for i in range(seq)]
        kept = seq if span is None else min(seq, span.size if isinstance(span, Chunk) else span)
        assert keys_held(seq, span) == kept
    assert query_key_pairs(7, span, causal=False) == 49   # not causal: the full square, whatever the span


def test_a_chunks_last_partial_block():
    """T = 10 in chunks of 4: blocks of 4, 4 and 2 queries see 10 + 10 + 3 = 23 pairs."""
    assert query_key_pairs(10, Chunk(4), causal=True) == 23
