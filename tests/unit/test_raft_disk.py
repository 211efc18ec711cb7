"""The disk-backed RaftLog and QuorumStateStore (``spool.cluster.raft.disk``).

What a node finds after a restart: appends, truncations, snapshots, a torn
tail (kill -9 mid-write), a vote. Checked against the in-memory store where
the contract (``spool.cluster.raft.store``) pins behaviour.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from spool.cluster.raft.disk import METADATA_LOG_CONFIG, DiskRaftLog, FileQuorumStateStore
from spool.cluster.raft.memory import MemoryRaftLog
from spool.cluster.raft.messages import OffsetAndEpoch, SnapshotId
from spool.cluster.raft.quorum_state_file import QuorumStateError
from spool.cluster.raft.snapshots import build_snapshot, list_snapshots, snapshot_values
from spool.cluster.raft.store import ElectionState, LeaderChange
from spool.protocol.errors import KafkaError
from spool.protocol.metadata_records import decode_control_record
from spool.records.batch import iter_batches
from spool.records.record import iter_records
from spool.util.clock import FakeClock


def _vals(n: int, tag: str = "v") -> list[bytes]:
    return [f"{tag}{i}".encode() for i in range(n)]


def _open(tmp_path) -> DiskRaftLog:
    return DiskRaftLog(tmp_path, clock=FakeClock(1_000))


def test_appends_survive_reopen_with_epochs_and_leader_change(tmp_path):
    rl = _open(tmp_path)
    assert (rl.log_start_offset, rl.end_offset, rl.last_fetched_epoch) == (0, 0, 0)
    assert rl.append_control_as_leader(LeaderChange(1, (1, 2, 3), (1, 2)), 1) == 0
    assert rl.append_as_leader(_vals(3), 1) == 3
    assert rl.append_control_as_leader(LeaderChange(2, (1, 2, 3), (2, 3)), 4) == 4
    assert rl.append_as_leader(_vals(2, "w"), 4) == 6
    rl.close()

    rl = _open(tmp_path)
    assert (rl.end_offset, rl.last_fetched_epoch) == (7, 4)
    entries = list(rl.entries(0, 7))
    assert [(e.offset, e.epoch, e.value) for e in entries] == [
        (0, 1, None), (1, 1, b"v0"), (2, 1, b"v1"), (3, 1, b"v2"),
        (4, 4, None), (5, 4, b"w0"), (6, 4, b"w1")]
    assert entries[4].control == LeaderChange(2, (1, 2, 3), (2, 3))
    assert [rl.epoch_at(o) for o in range(7)] == [1, 1, 1, 1, 4, 4, 4]
    assert rl.end_offset_for_epoch(1) == OffsetAndEpoch(4, 1)
    assert rl.end_offset_for_epoch(3) == OffsetAndEpoch(4, 1)
    assert rl.end_offset_for_epoch(4) == OffsetAndEpoch(7, 4)
    assert rl.end_offset_for_epoch(9) == OffsetAndEpoch(7, 4)
    assert rl.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)
    rl.close()


def test_batches_are_kafkas_layout(tmp_path):
    """One batch per leader append, partitionLeaderEpoch = the raft epoch; LeaderChange in
    a control batch (control bit, not transactional, no producer)."""
    rl = _open(tmp_path)
    rl.append_control_as_leader(LeaderChange(1, (1,), (1,)), 2)
    rl.append_as_leader(_vals(3), 2)
    data = rl.read(0, 1 << 20)
    batches = list(iter_batches(data))
    assert len(batches) == 2
    (p0, h0), (p1, h1) = batches
    assert (h0.is_control, h0.is_transactional, h0.producer_id, h0.partition_leader_epoch) == (
        True, False, -1, 2)
    rec = next(iter_records(data, p0))
    msg = decode_control_record(rec.key, rec.value)
    assert (msg.leader_id, [v.voter_id for v in msg.voters]) == (1, [1])
    assert (h1.base_offset, h1.last_offset, h1.partition_leader_epoch, h1.is_control) == (
        1, 3, 2, False)
    assert [r.key for r in iter_records(data, p1)] == [None, None, None]
    rl.close()


def test_follower_append_read_round_trip(tmp_path):
    leader = DiskRaftLog(tmp_path / "a", clock=FakeClock(1))
    follower = DiskRaftLog(tmp_path / "b", clock=FakeClock(1))
    leader.append_as_leader(_vals(2), 1)
    leader.append_as_leader(_vals(3, "x"), 2)
    assert follower.read(0, 100) is None
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert (follower.end_offset, follower.last_fetched_epoch) == (5, 2)
    # a repeated fetch answer (the leader re-sent it) is skipped, not appended twice
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.end_offset == 5
    assert [e.value for e in follower.entries(0, 5)] == [b"v0", b"v1", b"x0", b"x1", b"x2"]
    leader.append_as_leader(_vals(1, "y"), 3)
    leader.append_as_leader(_vals(1, "z"), 3)
    with pytest.raises(ValueError):  # a gap: records past the log end
        follower.append_as_follower(leader.read(6, 1 << 20))
    assert follower.end_offset == 5
    leader.close()
    follower.close()


def test_corrupt_follower_batch_is_refused_whole(tmp_path):
    leader = DiskRaftLog(tmp_path / "a", clock=FakeClock(1))
    follower = DiskRaftLog(tmp_path / "b", clock=FakeClock(1))
    leader.append_as_leader(_vals(2), 1)
    leader.append_as_leader(_vals(2, "z"), 1)
    data = bytearray(leader.read(0, 1 << 20))
    data[-1] ^= 0xFF  # the second batch's last byte
    with pytest.raises(KafkaError):
        follower.append_as_follower(data)
    assert follower.end_offset == 0
    leader.close()
    follower.close()


def test_truncation_survives_reopen(tmp_path):
    rl = _open(tmp_path)
    rl.append_as_leader(_vals(3), 1)
    rl.append_as_leader(_vals(3, "b"), 2)
    rl.truncate_to(3)
    assert (rl.end_offset, rl.last_fetched_epoch) == (3, 1)
    assert rl.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
    rl.append_as_leader(_vals(1, "c"), 3)
    rl.close()
    rl = _open(tmp_path)
    assert [(e.epoch, e.value) for e in rl.entries(0, 10)] == [
        (1, b"v0"), (1, b"v1"), (1, b"v2"), (3, b"c0")]
    with pytest.raises(ValueError):
        rl.append_as_leader([b"late"], 2)  # epochs never decrease along the log
    rl.close()


def test_torn_tail_is_cut_at_reopen(tmp_path):
    rl = _open(tmp_path)
    rl.append_as_leader(_vals(2), 1)
    rl.append_as_leader(_vals(2, "t"), 1)
    seg = rl.plog.active_segment.log_path
    rl.close()
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:  # a write torn half-way through the last batch
        f.truncate(size - 7)
    rl = _open(tmp_path)
    assert rl.end_offset == 2
    assert [e.value for e in rl.entries(0, 9)] == [b"v0", b"v1"]
    assert rl.append_as_leader([b"after"], 2) == 2
    rl.close()


_CRASHER = textwrap.dedent("""
    import sys
    from spool.cluster.raft.disk import DiskRaftLog
    rl = DiskRaftLog(sys.argv[1])
    i = rl.end_offset
    while True:
        last = rl.append_as_leader([b"x" * 200 + str(i).encode()], 1)
        print(last, flush=True)
        i += 1
""")


def test_kill9_mid_appends_keeps_every_acknowledged_offset(tmp_path):
    """A child appends as fast as it can and prints each offset once the append returned
    (fsynced); kill -9 it: every printed offset is there after reopening, in order."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    for _round in range(3):
        child = subprocess.Popen([sys.executable, "-c", _CRASHER, str(tmp_path)],
                                 stdout=subprocess.PIPE, env=env, text=True)
        acked = [int(child.stdout.readline()) for _ in range(30)]
        child.send_signal(signal.SIGKILL)
        child.wait()
        rl = _open(tmp_path)
        assert rl.end_offset > acked[-1]
        values = [e.value for e in rl.entries(0, rl.end_offset)]
        assert values == [b"x" * 200 + str(i).encode() for i in range(rl.end_offset)]
        rl.close()


def test_snapshot_delete_before_and_reopen(tmp_path):
    rl = _open(tmp_path)
    for e in range(1, 4):
        rl.append_as_leader(_vals(4, f"e{e}-"), e)
    sid = SnapshotId(8, 2)
    data = build_snapshot([b"img1", b"img2"], sid, timestamp=5)
    rl.store_snapshot(sid, data)
    assert rl.latest_snapshot_id == sid
    assert rl.log_start_offset == 0  # storing changes no log
    chunk, size = rl.read_snapshot(sid, 0, 1 << 20)
    assert (chunk, size) == (data, len(data))
    assert rl.read_snapshot(sid, 10, 5) == (data[10:15], len(data))
    assert rl.read_snapshot(SnapshotId(4, 1), 0, 10) is None
    rl.delete_before(8)
    assert (rl.log_start_offset, rl.end_offset) == (8, 12)
    assert rl.epoch_at(7) == 2  # the snapshot's epoch, just below the log start
    with pytest.raises(IndexError):
        rl.read(7, 100)
    with pytest.raises(ValueError):
        rl.delete_before(10)  # past the latest snapshot
    rl.close()

    rl = _open(tmp_path)
    assert (rl.log_start_offset, rl.end_offset, rl.latest_snapshot_id) == (8, 12, sid)
    assert [e.value for e in rl.entries(8, 12)] == _vals(4, "e3-")
    assert rl.end_offset_for_epoch(1) == OffsetAndEpoch(-1, -1)
    assert rl.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    assert snapshot_values(rl.read_snapshot(sid, 0, 1 << 20)[0]) == [b"img1", b"img2"]
    rl.close()


def test_segments_below_the_snapshot_are_deleted(tmp_path):
    config = dataclasses.replace(METADATA_LOG_CONFIG, internal_segment_bytes=400)
    rl = DiskRaftLog(tmp_path, clock=FakeClock(1), config=config)
    for i in range(20):
        rl.append_as_leader([b"y" * 100 + bytes([i])], 1)
    logs_before = sorted(p.name for p in rl.dir.glob("*.log"))
    assert len(logs_before) > 5
    sid = SnapshotId(15, 1)
    rl.store_snapshot(sid, build_snapshot([b"s"], sid, timestamp=1))
    rl.delete_before(15)
    logs_after = sorted(p.name for p in rl.dir.glob("*.log"))
    assert int(logs_after[0].split(".")[0]) <= 15 < int(logs_after[1].split(".")[0]) \
        if len(logs_after) > 1 else True
    assert len(logs_after) < len(logs_before)
    assert rl.log_start_offset == 15
    assert [e.value[-1] for e in rl.entries(15, 20)] == [15, 16, 17, 18, 19]
    rl.close()


def test_install_snapshot_restarts_the_log(tmp_path):
    rl = _open(tmp_path)
    rl.append_as_leader(_vals(3), 1)
    older = SnapshotId(2, 1)
    rl.store_snapshot(older, build_snapshot([b"a"], older, timestamp=1))
    sid = SnapshotId(50, 7)
    rl.install_snapshot(sid, build_snapshot([b"big"], sid, timestamp=1))
    assert (rl.log_start_offset, rl.end_offset, rl.last_fetched_epoch) == (50, 50, 7)
    assert rl.read(50, 100) is None
    assert list_snapshots(rl.dir) == [sid]  # older snapshots are gone
    rl.append_as_follower(_leader_batches(tmp_path / "leader", 50, 7))
    rl.close()
    rl = _open(tmp_path)
    assert (rl.log_start_offset, rl.end_offset, rl.last_fetched_epoch) == (50, 52, 7)
    rl.close()


def _leader_batches(directory, start: int, epoch: int) -> bytes:
    """Batches at offsets [start, start + 2) written by a leader whose log starts there."""
    leader = _open(directory)
    sid = SnapshotId(start, epoch)
    leader.install_snapshot(sid, build_snapshot([], sid, timestamp=1))
    leader.append_as_leader([b"p", b"q"], epoch)
    data = leader.read(start, 1 << 20)
    leader.close()
    return data


def test_snapshot_past_the_log_end_restarts_the_log_at_open(tmp_path):
    """A follower stored the leader's snapshot and died before truncating its log."""
    rl = _open(tmp_path)
    rl.append_as_leader(_vals(3), 1)
    sid = SnapshotId(40, 3)
    rl.store_snapshot(sid, build_snapshot([b"x"], sid, timestamp=1))
    rl.close()
    rl = _open(tmp_path)
    assert (rl.log_start_offset, rl.end_offset, rl.last_fetched_epoch) == (40, 40, 3)
    rl.close()


def test_torn_snapshot_is_never_listed(tmp_path):
    rl = _open(tmp_path)
    rl.append_as_leader(_vals(3), 1)
    rl.close()
    d = tmp_path / "__cluster_metadata-0"
    part = d / "00000000000000000002-0000000001-123.checkpoint.part"
    part.write_bytes(b"half a snapshot")
    rl = _open(tmp_path)
    assert rl.latest_snapshot_id is None
    assert not part.exists()
    rl.close()
    with pytest.raises(KafkaError):
        snapshot_values(build_snapshot([b"a", b"b"], SnapshotId(2, 1), timestamp=1)[:-3])


def test_behaves_as_the_memory_log(tmp_path):
    """The same calls on both stores give the same offsets, epochs and entries."""
    disk, mem = _open(tmp_path), MemoryRaftLog()
    for rl in (disk, mem):
        rl.append_control_as_leader(LeaderChange(1, (1, 2), (1,)), 1)
        rl.append_as_leader(_vals(3), 1)
        rl.append_as_leader(_vals(1), 3)
        rl.append_as_leader(_vals(1), 3)
        rl.truncate_to(5)
        rl.append_as_leader(_vals(2, "n"), 4)
    for epoch in range(6):
        assert disk.end_offset_for_epoch(epoch) == mem.end_offset_for_epoch(epoch), epoch
    assert list(disk.entries(0, 99)) == list(mem.entries(0, 99))
    assert [disk.epoch_at(o) for o in range(7)] == [mem.epoch_at(o) for o in range(7)]
    disk.close()


def test_quorum_state_file(tmp_path):
    store = FileQuorumStateStore(tmp_path)
    assert store.read() is None
    store.write(ElectionState(epoch=5, voted_id=2, leader_id=-1))
    assert FileQuorumStateStore(tmp_path).read() == ElectionState(5, 2, -1)
    data = json.loads(store.path.read_text())
    assert data == {"clusterId": "", "leaderId": -1, "leaderEpoch": 5, "votedId": 2,
                    "appliedOffset": 0, "currentVoters": None, "data_version": 0}
    store.write(ElectionState(epoch=6, voted_id=-1, leader_id=3))
    assert FileQuorumStateStore(tmp_path).read() == ElectionState(6, -1, 3)
    store.path.write_text("{not json")
    with pytest.raises(QuorumStateError):
        FileQuorumStateStore(tmp_path).read()


def test_quorum_state_reads_kafkas_v1_file(tmp_path):
    store = FileQuorumStateStore(tmp_path)
    store.path.write_text('{"leaderId":1,"leaderEpoch":9,"votedId":1,'
                          '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert store.read() == ElectionState(epoch=9, voted_id=1, leader_id=1)
