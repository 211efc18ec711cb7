"""spool.share.batches.combine: Kafka's PersisterStateBatchCombiner semantics, against a
per-offset model (every offset takes the covering batch of highest (count, state))."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from spool.share.batches import ACKNOWLEDGED, ARCHIVED, AVAILABLE, StateBatch, combine


def B(first: int, last: int, state: int, count: int) -> StateBatch:  # noqa: N802
    return StateBatch(first, last, state, count)


def test_newer_acknowledgement_overwrites_the_overlapped_range() -> None:
    so_far = [B(0, 9, AVAILABLE, 1)]
    assert combine(so_far, [B(3, 5, ACKNOWLEDGED, 1)], 0) == (
        B(0, 2, AVAILABLE, 1), B(3, 5, ACKNOWLEDGED, 1), B(6, 9, AVAILABLE, 1))


def test_higher_delivery_count_wins_over_state() -> None:
    assert combine([B(0, 4, ACKNOWLEDGED, 1)], [B(2, 6, AVAILABLE, 2)], -1) == (
        B(0, 1, ACKNOWLEDGED, 1), B(2, 6, AVAILABLE, 2))


def test_batches_below_the_start_offset_are_dropped_or_cut() -> None:
    assert combine([B(0, 4, ACKNOWLEDGED, 1), B(5, 9, AVAILABLE, 1)], [], 7) == (
        B(7, 9, AVAILABLE, 1),)


def test_touching_equal_batches_join() -> None:
    assert combine([B(0, 4, ARCHIVED, 3)], [B(5, 9, ARCHIVED, 3)], 0) == (B(0, 9, ARCHIVED, 3),)


batches = st.lists(st.builds(
    lambda f, n, s, c: B(f, f + n, s, c), st.integers(0, 40), st.integers(0, 10),
    st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]), st.integers(1, 4)), max_size=8)


@given(batches, batches, st.integers(-1, 30))
def test_combine_matches_the_per_offset_model(so_far, new, start) -> None:
    out = combine(so_far, new, start)
    model: dict[int, tuple[int, int]] = {}
    for b in [*so_far, *new]:
        for o in range(max(b.first_offset, start), b.last_offset + 1):
            model[o] = max(model.get(o, (0, -1)), (b.delivery_count, b.delivery_state))
    got = {o: (b.delivery_count, b.delivery_state)
           for b in out for o in range(b.first_offset, b.last_offset + 1)}
    assert got == model
    for a, b in itertools.pairwise(out):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset and a.priority() == b.priority())
