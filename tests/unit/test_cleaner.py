"""The log cleaner on real logs in temp dirs (fake clock): latest value per key, offsets
kept, tombstones and their delete horizon, dirty ratio and lags, grouping, transactions,
empty batches for producer state, codecs, and the produce-side null-key rule."""

from __future__ import annotations

import os
import time

import pytest

from spool.records import (
    BatchBuilder,
    BatchHeader,
    build_control_batch,
    iter_batches,
    iter_records,
)
from spool.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from spool.storage.checkpoint import read_checkpoint
from spool.storage.cleaner import empty_batch
from spool.storage.cleaner_manager import CLEANER_CHECKPOINT, LogCleaner, log_to_clean
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock

T0 = 1_700_000_000_000
DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "internal.segment.bytes": "1000",
           "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}


def batch(items, *, ts=T0, codec=NONE, pid=-1, epoch=-1, seq=-1, txn=False) -> bytes:
    """One batch of (key, value) pairs (str or None)."""
    b = BatchBuilder(0, compression=codec, producer_id=pid, producer_epoch=epoch,
                     base_sequence=seq, is_transactional=txn)
    for k, v in items:
        b.append(None if k is None else k.encode(), None if v is None else v.encode(), timestamp=ts)
    return b.build()


def table(plog) -> list[tuple[int, str, str | None]]:
    """Every record from the log start: (offset, key, value)."""
    out = []
    for raw in plog.iter_batches():
        h = BatchHeader.parse(raw)
        if h.is_control:
            continue
        for r in iter_records(raw):
            out.append((r.offset, r.key.decode() if r.key else None,
                        None if r.value is None else r.value.decode()))
    return out


def latest(records) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for _, k, v in records:
        out[k] = v
    return out


@pytest.fixture
def env(tmp_path):
    clock = FakeClock(T0)
    mgr = LogManager([str(tmp_path / "d")], {"log.cleaner.backoff.ms": "10"}, clock)
    cleaner = LogCleaner(mgr)
    yield mgr, cleaner, clock
    mgr.shutdown()


def make_log(mgr, overrides=None, topic="tbl"):
    return mgr.create_partition(topic, 0, {**COMPACT, **(overrides or {})})


def fill(plog, n, keys, *, per_batch=5, tomb_every=0, codec=NONE, ts=T0):
    """n updates over ``keys`` keys, in batches; every tomb_every-th is a tombstone."""
    items = []
    for i in range(n):
        tomb = tomb_every and i % tomb_every == tomb_every - 1
        items.append((f"k{i % keys}", None if tomb else f"v{i}"))
        if len(items) == per_batch:
            plog.append(batch(items, codec=codec, ts=ts))
            items = []
    if items:
        plog.append(batch(items, codec=codec, ts=ts))


def test_keeps_latest_value_per_key_and_offsets(env):
    mgr, cleaner, _ = env
    plog = make_log(mgr)
    fill(plog, 400, 20)
    before = table(plog)
    want = latest(before)
    assert cleaner.clean_once()
    after = table(plog)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    # everything below the active segment is one record per key
    active_base = plog.active_segment.base_offset
    cleaned = [r for r in after if r[0] < active_base]
    assert len({k for _, k, _ in cleaned}) == len(cleaned)
    assert latest(after) == want
    assert set(after) <= set(before)  # offsets, keys and values unchanged
    assert plog.log_end_offset == 400
    assert plog.size_in_bytes < sum(len(batch([("k0", "v0")] * 5)) for _ in range(80)) / 3
    cp = read_checkpoint(mgr.log_dirs[0] / CLEANER_CHECKPOINT)
    assert cp[("tbl", 0)] == active_base
    assert not cleaner.clean_once()  # nothing dirty left


def test_reads_the_same_after_reopening(env, tmp_path):
    mgr, cleaner, clock = env
    plog = make_log(mgr)
    fill(plog, 300, 17, codec=LZ4)
    cleaner.clean_once()
    after = table(plog)
    mgr.shutdown()
    again = LogManager([str(tmp_path / "d")], {}, clock)
    try:
        assert table(again.get("tbl", 0)) == after
    finally:
        again.shutdown()
    names = os.listdir(tmp_path / "d" / "tbl-0")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_rebuilt_batches_keep_their_codec(env, codec):
    mgr, cleaner, _ = env
    plog = make_log(mgr)
    fill(plog, 200, 7, codec=codec)
    want = latest(table(plog))
    cleaner.clean_once()
    assert latest(table(plog)) == want
    for raw in plog.iter_batches():
        h = BatchHeader.parse(raw)
        assert h.compression == (codec if h.records_count else NONE)


def test_tombstones_survive_delete_retention_then_go(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr, {"delete.retention.ms": str(DAY)})
    fill(plog, 300, 10, tomb_every=7)
    want = latest(table(plog))
    dead = {k for k, v in want.items() if v is None}
    assert dead
    cleaner.clean_once()
    after = table(plog)
    assert latest(after) == want  # tombstones still there
    horizons = {BatchHeader.parse(raw).base_timestamp for raw in plog.iter_batches()
                if BatchHeader.parse(raw).has_delete_horizon}
    assert horizons == {T0 + DAY}
    clock.advance(DAY - 1)
    assert not cleaner.clean_once()
    clock.advance(1)
    assert cleaner.clean_once()  # the horizon passed: a cleaning just for the tombstones
    active_base = plog.active_segment.base_offset
    final = table(plog)
    cleaned = latest([r for r in final if r[0] < active_base])
    assert None not in cleaned.values()
    live = {k: v for k, v in want.items() if v is not None}
    assert {k: v for k, v in latest(final).items() if v is not None} == live


def test_null_keys_are_dropped_by_the_cleaner(env):
    mgr, cleaner, _ = env
    plog = make_log(mgr)
    for i in range(40):
        plog.append(batch([(None if i % 4 == 0 else f"k{i % 3}", f"v{i}")] * 3))
    cleaner.clean_once()
    assert all(k is not None for o, k, _ in table(plog) if o < plog.active_segment.base_offset)


def test_dirty_ratio_and_min_compaction_lag(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr, {"min.cleanable.dirty.ratio": "0.99"})
    fill(plog, 300, 10)
    ltc = log_to_clean(plog.tp, plog, None, clock.now_ms())
    assert ltc.first_dirty == 0 and ltc.first_uncleanable == plog.active_segment.base_offset
    assert ltc.ratio == 1.0 and ltc.cleanable_bytes > 0
    cleaner.clean_once()
    fill(plog, 80, 10)
    ltc = log_to_clean(plog.tp, plog, cleaner.checkpoints.get(plog), clock.now_ms())
    assert 0 < ltc.ratio < 0.99
    assert cleaner.grab_filthiest(clock.now_ms()) is None
    plog2 = make_log(mgr, {"min.compaction.lag.ms": "60000"}, topic="lag")
    fill(plog2, 300, 10, ts=T0)
    ltc = log_to_clean(plog2.tp, plog2, None, clock.now_ms())
    assert ltc.first_uncleanable == 0  # every segment is too young
    clock.advance(60_001)
    ltc = log_to_clean(plog2.tp, plog2, None, clock.now_ms())
    assert ltc.first_uncleanable == plog2.active_segment.base_offset


def test_max_compaction_lag_forces_a_cleaning(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr, {"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"})
    fill(plog, 300, 10)
    cleaner.clean_once()
    fill(plog, 50, 10)
    assert cleaner.grab_filthiest(clock.now_ms()) is None
    clock.advance(2000)
    ltc = cleaner.grab_filthiest(clock.now_ms())
    assert ltc is not None and ltc.needs_compaction_now


def test_groups_respect_segment_bytes(env):
    mgr, cleaner, _ = env
    plog = make_log(mgr, {"internal.segment.bytes": "3000"})
    fill(plog, 3000, 1500, per_batch=10)  # little to remove: groups must stay <= 3000 bytes
    want = latest(table(plog))
    cleaner.clean_once()
    assert latest(table(plog)) == want
    assert all(s.size <= 3000 for s in plog.segments)
    small = make_log(mgr, {"internal.segment.bytes": "3000"}, topic="small")
    fill(small, 3000, 5, per_batch=10)  # almost everything goes: segments merge
    n_before = len(small.segments)
    cleaner.clean(log_to_clean(small.tp, small, None, 0), 0)
    assert len(small.segments) == n_before  # groups are sized before cleaning (Kafka)
    cleaner.clean(log_to_clean(small.tp, small, None, 0), 0)  # the small ones now merge
    assert len(small.segments) == 2


def test_transactions_aborted_records_and_markers_go(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr, {"delete.retention.ms": "1000"})
    plog.append(batch([("a", "committed")], pid=7, epoch=0, seq=0, txn=True))
    plog.append(batch([("b", "aborted")], pid=8, epoch=0, seq=0, txn=True))
    plog.append(build_control_batch(7, 0, True, 0, 0, T0))
    plog.append(build_control_batch(8, 0, False, 0, 0, T0))
    plog.append(batch([("a", "plain")] * 1))
    fill(plog, 200, 5)  # push those into non-active segments

    def clean_and_look():
        cleaner.clean(log_to_clean(plog.tp, plog, None, clock.now_ms()), clock.now_ms())
        clock.advance(2000)
        hs = [BatchHeader.parse(r) for r in plog.iter_batches()]
        return [(h.producer_id, h.records_count, h.has_delete_horizon) for h in hs
                if h.producer_id >= 0]

    # while the producers are active their last batches stay (emptied), so do the markers
    assert clean_and_look() == [(7, 0, False), (8, 0, False), (7, 1, False), (8, 1, False)]
    assert ("b", "aborted") not in [(k, v) for _, k, v in table(plog)]
    clock.advance(2 * DAY)  # producer.id.expiration.ms passes: Kafka's order of removal
    assert clean_and_look() == [(7, 1, False), (8, 1, False)]  # data gone, markers kept once
    assert clean_and_look() == [(7, 1, True), (8, 1, True)]  # no data left: delete horizon
    assert clean_and_look() == []  # past the horizon: gone


def test_last_batch_of_a_producer_stays_as_an_empty_batch(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr)
    plog.append(batch([("x", "1"), ("y", "1")], pid=42, epoch=3, seq=0))
    fill(plog, 200, 5)
    fill(plog, 200, 5)
    for k in ("x", "y"):
        plog.append(batch([(k, "2")]))
    fill(plog, 200, 5)
    cleaner.clean(log_to_clean(plog.tp, plog, None, clock.now_ms()), clock.now_ms())
    kept = [BatchHeader.parse(r) for r in plog.iter_batches()
            if BatchHeader.parse(r).producer_id == 42]
    assert len(kept) == 1
    h = kept[0]
    assert (h.records_count, h.base_offset, h.last_offset_delta, h.producer_epoch,
            h.base_sequence) == (0, 0, 1, 3, 0)
    assert list(iter_records(empty_batch(h))) == []


def test_log_append_time_batches_keep_their_time(env):
    mgr, cleaner, clock = env
    plog = make_log(mgr, {"message.timestamp.type": "LogAppendTime"})
    for i in range(100):
        plog.append(batch([(f"k{i % 3}", "a"), (f"k{(i + 1) % 3}", "b")]),
                    log_append_time_ms=T0 + i)
    cleaner.clean_once()
    for raw in plog.iter_batches():
        h = BatchHeader.parse(raw)
        assert h.is_log_append_time
        assert all(r.timestamp == h.max_timestamp for r in iter_records(raw))


def test_thread_cleans_in_the_background(env):
    mgr, _, _ = env
    plog = make_log(mgr)
    fill(plog, 300, 5)
    cl = mgr.start_cleaner()
    assert cl is not None
    deadline = time.monotonic() + 20
    while cl.checkpoints.get(plog) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    mgr.stop_cleaner()
    assert cl.checkpoints.get(plog) == plog.active_segment.base_offset
    assert latest(table(plog)) == {f"k{i}": f"v{295 + i}" for i in range(5)}


def test_a_fetch_never_returns_only_an_emptied_batch(env):
    """librdkafka takes a fetch answer without records for a too-small fetch size (and
    gives up after a few): a segment that ends with an emptied batch serves the next."""
    mgr, cleaner, clock = env
    plog = make_log(mgr)
    for _ in range(3):
        fill(plog, 100, 3)
    cleaner.clean(log_to_clean(plog.tp, plog, None, clock.now_ms()), clock.now_ms())
    for seg in plog.segments[:-1]:
        last = list(seg.batches())[-1][1]
        raw = plog.read_bytes(last.base_offset)
        assert any(BatchHeader.parse(raw, p).records_count for p, _ in iter_batches(raw))


def test_max_compaction_lag_rolls_the_active_segment(env):
    mgr, _, _ = env
    plog = make_log(mgr, {"internal.segment.bytes": "1000000", "max.compaction.lag.ms": "1000"})
    plog.append(batch([("a", "1")], ts=T0))
    plog.append(batch([("a", "2")], ts=T0 + 500))
    assert len(plog.segments) == 1
    plog.append(batch([("a", "3")], ts=T0 + 1001))
    assert len(plog.segments) == 2  # the record time since the first batch passed the lag
    delete = mgr.create_partition("del", 0, {"internal.segment.bytes": "1000000",
                                             "max.compaction.lag.ms": "1000"})
    delete.append(batch([("a", "1")], ts=T0))
    delete.append(batch([("a", "3")], ts=T0 + 1001))
    assert len(delete.segments) == 1  # not compacted: segment.ms alone


def test_a_full_offset_map_cleans_in_several_passes(tmp_path):
    clock = FakeClock(T0)
    # capacity = 240 // 24 * 0.9 = 9 keys: far fewer than the log's 40
    mgr = LogManager([str(tmp_path / "d")], {"log.cleaner.dedupe.buffer.size": "240"}, clock)
    try:
        cleaner = LogCleaner(mgr)
        plog = make_log(mgr)
        fill(plog, 400, 40, per_batch=4)
        want = latest(table(plog))
        ends = []
        while cleaner.clean_once():
            ends.append(cleaner.checkpoints.get(plog))
            assert latest(table(plog)) == want
        assert len(ends) > 2 and ends == sorted(ends)
        assert ends[-1] == plog.active_segment.base_offset
        cleaner.clean(log_to_clean(plog.tp, plog, None, T0), T0)  # a fresh look from the start
        active_base = plog.active_segment.base_offset
        keys = [k for o, k, _ in table(plog) if o < active_base]
        assert len(keys) == len(set(keys))
    finally:
        mgr.shutdown()
