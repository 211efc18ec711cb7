"""The share coordinator on a real broker, through its wire APIs (83-87) and FindCoordinator
key type 2: state written through WriteShareGroupState is read back merged, fenced by
its epochs, survives kill -9 and a restart (replayed from ``__share_group_state``), and
a ShareSnapshot replaces the ShareUpdates every
``share.coordinator.snapshot.update.records.per.snapshot`` writes, and the records below the
oldest snapshot still needed are deleted (``share.coordinator.state.topic.prune.interval.ms``)
without losing any state."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from spool.protocol._generated import (
    DeleteShareGroupStateRequest,
    FindCoordinatorRequest,
    InitializeShareGroupStateRequest,
    ListOffsetsRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from spool.protocol._generated import delete_share_group_state_request as dreq
from spool.protocol._generated import initialize_share_group_state_request as ireq
from spool.protocol._generated import list_offsets_request as loreq
from spool.protocol._generated import read_share_group_state_request as rreq
from spool.protocol._generated import read_share_group_state_summary_request as sreq
from spool.protocol._generated import write_share_group_state_request as wreq
from spool.protocol.errors import Errors
from spool.share.coordinator import coordinator_key, partition_for
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient
from tests.integration.test_topic_ids import create, topic_id

PARTITIONS = 3
OVERRIDES = {"share.coordinator.state.topic.num.partitions": str(PARTITIONS),
             "share.coordinator.snapshot.update.records.per.snapshot": "2",
             "share.coordinator.state.topic.prune.interval.ms": "200"}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", OVERRIDES)
    b.start()
    yield b
    b.stop()


def initialize(rc, group, tid, p, state_epoch, start):
    r = rc.request(83, 0, InitializeShareGroupStateRequest(group_id=group, topics=[
        ireq.InitializeStateData(topic_id=tid, partitions=[ireq.PartitionData(
            partition=p, state_epoch=state_epoch, start_offset=start)])]))
    return r.results[0].partitions[0].error_code


def write(rc, group, tid, p, state_epoch, leader_epoch, start, batches, version=1):
    r = rc.request(85, version, WriteShareGroupStateRequest(group_id=group, topics=[
        wreq.WriteStateData(topic_id=tid, partitions=[wreq.PartitionData(
            partition=p, state_epoch=state_epoch, leader_epoch=leader_epoch,
            start_offset=start, state_batches=[wreq.StateBatch(
                first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                for f, last, s, c in batches])])]))
    return r.results[0].partitions[0].error_code


def read(rc, group, tid, p, leader_epoch):
    r = rc.request(84, 0, ReadShareGroupStateRequest(group_id=group, topics=[
        rreq.ReadStateData(topic_id=tid, partitions=[rreq.PartitionData(
            partition=p, leader_epoch=leader_epoch)])]))
    x = r.results[0].partitions[0]
    return (x.error_code, x.state_epoch, x.start_offset,
            [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in x.state_batches])


def summary(rc, group, tid, p):
    r = rc.request(87, 1, ReadShareGroupStateSummaryRequest(group_id=group, topics=[
        sreq.ReadStateSummaryData(topic_id=tid, partitions=[sreq.PartitionData(
            partition=p, leader_epoch=-1)])]))
    x = r.results[0].partitions[0]
    return x.error_code, x.state_epoch, x.leader_epoch, x.start_offset


def delete(rc, group, tid, p):
    r = rc.request(86, 0, DeleteShareGroupStateRequest(group_id=group, topics=[
        dreq.DeleteStateData(topic_id=tid, partitions=[dreq.PartitionData(partition=p)])]))
    return r.results[0].partitions[0].error_code


def test_state_is_merged_fenced_and_survives_kill_9(share_broker, topic_name):
    create(share_broker.bootstrap, topic_name, 2)
    tid = topic_id(share_broker.bootstrap, topic_name)
    g = "sg-" + topic_name
    with RawClient(share_broker.bootstrap) as rc:
        assert read(rc, g, tid, 0, 0)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert initialize(rc, g, tid, 0, 1, 0) == 0
        assert read(rc, g, tid, 0, 1) == (0, 1, 0, [])
        assert write(rc, g, tid, 0, 1, 1, 0, [(0, 9, 0, 1)]) == 0  # 10 records delivered once
        assert write(rc, g, tid, 0, 1, 1, -1, [(2, 4, 2, 1)]) == 0  # 2-4 acknowledged
        assert write(rc, g, tid, 0, 1, 1, 3, [(5, 6, 0, 2)], version=0) == 0  # start 3
        assert write(rc, g, tid, 0, 1, 1, -1, [(7, 7, 4, 2)]) == 0
        want = (0, 1, 3, [(3, 4, 2, 1), (5, 6, 0, 2), (7, 7, 4, 2), (8, 9, 0, 1)])
        assert read(rc, g, tid, 0, 1) == want
        # fencing: a stale leader epoch and a stale state epoch are refused, nothing changes
        assert read(rc, g, tid, 0, 2) == want  # the new leader takes over at epoch 2
        assert write(rc, g, tid, 0, 1, 1, -1, [(8, 9, 2, 1)]) == Errors.FENCED_LEADER_EPOCH
        assert read(rc, g, tid, 0, 1)[0] == Errors.FENCED_LEADER_EPOCH
        assert write(rc, g, tid, 0, 0, 2, -1, [(8, 9, 2, 1)]) == Errors.FENCED_STATE_EPOCH
        assert initialize(rc, g, tid, 0, 0, 0) == Errors.FENCED_STATE_EPOCH
        assert summary(rc, g, tid, 0) == (0, 1, 2, 3)
        # another partition of the topic, then one that does not exist
        assert write(rc, g, tid, 1, 0, 0, 5, [(5, 5, 2, 1)]) == 0
        assert write(rc, g, tid, 2, 0, 0, 0, []) == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert write(rc, g, uuid.uuid4(), 0, 0, 0, 0, []) == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert write(rc, "", tid, 0, 0, 0, 0, []) == Errors.INVALID_GROUP_ID
    share_broker.kill()
    share_broker.restart()
    with RawClient(share_broker.bootstrap) as rc:
        assert read(rc, g, tid, 0, 2) == want
        assert read(rc, g, tid, 1, 0) == (0, 0, 5, [(5, 5, 2, 1)])
        assert write(rc, g, tid, 0, 1, 1, -1, []) == Errors.FENCED_LEADER_EPOCH  # after restart
        # an offsets reset: a new state epoch starts over
        assert initialize(rc, g, tid, 0, 2, 8) == 0
        assert read(rc, g, tid, 0, 2) == (0, 2, 8, [])
        assert delete(rc, g, tid, 0) == 0
        assert read(rc, g, tid, 0, 2)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    share_broker.kill()
    share_broker.restart()
    with RawClient(share_broker.bootstrap) as rc:
        assert read(rc, g, tid, 0, 2)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert read(rc, g, tid, 1, 0) == (0, 0, 5, [(5, 5, 2, 1)])


def test_find_coordinator_share_key(share_broker, topic_name):
    key = f"g:{uuid.uuid4()}:0"
    with RawClient(share_broker.bootstrap) as rc:
        old = rc.request(10, 5, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))
        assert old.coordinators[0].error_code == Errors.INVALID_REQUEST
        got = rc.request(10, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key, ""]))
        assert [(c.key, c.error_code, c.node_id, c.port) for c in got.coordinators] == [
            (key, 0, 0, share_broker.port), ("", Errors.INVALID_REQUEST, -1, -1)]


def earliest(rc, partition: int) -> int:
    r = rc.request(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        loreq.ListOffsetsTopic(name="__share_group_state", partitions=[
            loreq.ListOffsetsPartition(partition_index=partition, timestamp=-2)])]))
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def test_records_below_the_oldest_needed_snapshot_are_pruned(fresh_broker, topic_name):
    # a broker of its own: another test's key in the same partition would hold the start
    fresh_broker.overrides.update(OVERRIDES)
    share_broker = fresh_broker.start()
    create(share_broker.bootstrap, topic_name, 1)
    tid = topic_id(share_broker.bootstrap, topic_name)
    g = "prune-" + topic_name
    p = partition_for(coordinator_key((g, tid, 0)), PARTITIONS)
    # a second key of the same partition, written once (a snapshot) between g's records
    g2 = next(f"prune2-{i}-{topic_name}" for i in itertools.count()
              if partition_for(coordinator_key((f"prune2-{i}-{topic_name}", tid, 0)),
                               PARTITIONS) == p)
    with RawClient(share_broker.bootstrap) as rc:
        for i in range(12):  # a snapshot, then 2 updates and a snapshot, four times
            assert write(rc, g, tid, 0, 0, 0, -1, [(i, i, 2, 1)]) == 0
            if i == 8:
                assert write(rc, g2, tid, 0, 0, 0, -1, [(0, 0, 2, 1)]) == 0  # offset 9
        deadline = time.monotonic() + 30
        while earliest(rc, p) < 9 and time.monotonic() < deadline:
            time.sleep(0.1)
        # g's last snapshot is at 10, g2's only one at 9: records 0-8 are superseded
        assert earliest(rc, p) == 9
        assert read(rc, g, tid, 0, 0) == (0, 0, -1, [(0, 11, 2, 1)])
    share_broker.kill()
    share_broker.restart()
    with RawClient(share_broker.bootstrap) as rc:
        assert read(rc, g, tid, 0, 0) == (0, 0, -1, [(0, 11, 2, 1)])
        assert read(rc, g2, tid, 0, 0) == (0, 0, -1, [(0, 0, 2, 1)])

