"""The fetcher's pure parts: cutting a response to whole batches, the fetcher index."""

from __future__ import annotations

from spool.replica.fetcher import fetcher_index, whole_batches
from tests.helpers.storage_batches import make_batch


def test_whole_batches_drops_a_cut_last_batch():
    a, b = make_batch(3, tag=1), make_batch(2, base_offset=3, tag=2)
    data = memoryview(bytes(a + b))
    assert bytes(whole_batches(data)) == bytes(a + b)
    for cut in (1, 20, len(b) - 1):
        assert bytes(whole_batches(data[: len(a) + cut])) == bytes(a)
    assert bytes(whole_batches(data[:30])) == b""
    assert bytes(whole_batches(memoryview(b""))) == b""


def test_fetcher_index_is_stable_and_in_range():
    got = [fetcher_index("orders", p, 3) for p in range(12)]
    assert got == [fetcher_index("orders", p, 3) for p in range(12)]
    assert set(got) == {0, 1, 2}
    assert {fetcher_index("orders", p, 1) for p in range(5)} == {0}
