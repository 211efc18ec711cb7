"""The offline replica reader (tests/helpers/replica_logs.py) that judges replication: it reads
records across segments up to an offset, and finds any byte that differs between replicas
below the high watermark, or a replica that ends short of it."""

from __future__ import annotations

from spool.records.builder import BatchBuilder
from tests.helpers.history import ACKED, RecordHistory, check_records, record_value
from tests.helpers.replica_logs import (
    checkpointed_high_watermark,
    diverging,
    log_end_offset,
    read_replica,
)

T = "t"


def batch(base: int, values: list[bytes], epoch: int = 0) -> bytes:
    b = BatchBuilder(base, partition_leader_epoch=epoch)
    for v in values:
        b.append(b"k", v, timestamp=1)
    return b.build()


def write_replica(d, segments: dict[int, list[bytes]]) -> None:
    p = d / f"{T}-0"
    p.mkdir(parents=True)
    for base, batches in segments.items():
        (p / f"{base:020d}.log").write_bytes(b"".join(batches))


def layout(epoch_of_last: int = 0):
    return {0: [batch(0, [b"a", b"b"]), batch(2, [b"c"])],
            3: [batch(3, [b"d", b"e"]), batch(5, [b"f"], epoch=epoch_of_last)]}


def test_identical_replicas_do_not_diverge_and_read_across_segments(tmp_path):
    dirs = {n: tmp_path / f"n{n}" for n in (1, 2, 3)}
    for d in dirs.values():
        write_replica(d, layout())
    assert diverging(dirs, T, 0, 6) == []
    assert log_end_offset(dirs[1], T, 0) == 6
    read = read_replica("replica 1", dirs[1], T, [0], {0: 5})
    assert [(r.offset, r.value) for r in read.records] == [
        (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert read.ends == {(T, 0): 5}


def test_a_batch_that_differs_below_the_high_watermark_is_found(tmp_path):
    dirs = {1: tmp_path / "n1", 2: tmp_path / "n2"}
    write_replica(dirs[1], layout())
    write_replica(dirs[2], layout(epoch_of_last=7))  # same records, another leader epoch
    assert diverging(dirs, T, 0, 5) == []  # the differing batch starts at 5: not below
    bad = diverging(dirs, T, 0, 6)
    assert len(bad) == 1 and "batch #3 differs" in bad[0] and "epoch 7" in bad[0], bad


def test_a_replica_ending_short_of_the_high_watermark_is_found(tmp_path):
    dirs = {1: tmp_path / "n1", 2: tmp_path / "n2"}
    write_replica(dirs[1], layout())
    write_replica(dirs[2], {0: layout()[0]})
    bad = diverging(dirs, T, 0, 6)
    assert bad == [f"{T}-0 on node 2: its log ends at 3, below 6"], bad
    assert diverging(dirs, T, 0, 3) == []


def test_a_damaged_tail_ends_the_read(tmp_path):
    d = tmp_path / "n1"
    write_replica(d, {0: [batch(0, [b"a"]), b"\0" * 64]})
    assert log_end_offset(d, T, 0) == 1


def test_the_reader_feeds_the_record_checker(tmp_path):
    h = RecordHistory()
    attempts = [h.begin(0, T, b"k") for _ in range(3)]
    for i, a in enumerate(attempts):
        h.end(a, ACKED, 0, i)
    d = tmp_path / "n1"
    write_replica(d, {0: [batch(0, [record_value(0, 0), record_value(0, 1)])]})
    rep = check_records(h, read_replica("replica 1", d, T, [0], {0: 3}), {T})
    assert len(rep.lost) == 1 and "w0-2" in rep.lost[0], rep.summary()


def test_the_high_watermark_checkpoint_is_read_in_kafkas_format(tmp_path):
    (tmp_path / "replication-offset-checkpoint").write_text("0\n2\nt 0 41\nother 3 7\n")
    assert checkpointed_high_watermark(tmp_path, T, 0) == 41
    assert checkpointed_high_watermark(tmp_path, T, 1) is None
    assert checkpointed_high_watermark(tmp_path / "nowhere", T, 0) is None
