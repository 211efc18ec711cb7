"""MetadataLoader: committed entries -> images -> publishers, as a broker follows the log."""

from __future__ import annotations

import uuid

import pytest

from spool.cluster.image import MetadataReplayError
from spool.cluster.loader import LeaderAndEpoch, MetadataLoader
from spool.cluster.raft.messages import SnapshotId
from spool.cluster.raft.store import LogEntry
from spool.cluster.snapshot import snapshot_records
from spool.protocol._generated.partition_record import PartitionRecord
from spool.protocol._generated.remove_topic_record import RemoveTopicRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol.metadata_records import encode_record

TID = uuid.UUID(int=7)


class Recorder:
    def __init__(self):
        self.calls = []

    def on_metadata_update(self, old, new, leader):
        self.calls.append((old, new, leader))


def entry(offset, record):
    return LogEntry(offset, 1, None if record is None else encode_record(record))


def topic_entries(start=0):
    return [
        entry(start, TopicRecord(name="orders", topic_id=TID)),
        entry(start + 1, PartitionRecord(partition_id=0, topic_id=TID, replicas=[1, 2],
                                         isr=[1, 2], leader=1, leader_epoch=0)),
    ]


def test_commits_build_images_and_reach_publishers_in_order():
    loader = MetadataLoader("c1")
    rec = Recorder()
    loader.add_publisher(rec)
    assert rec.calls[0][1].offset == -1  # the current (empty) image at once
    loader.handle_commit([entry(0, None)] + topic_entries(1))  # a control entry first
    old, new, leader = rec.calls[-1]
    assert old.topic("orders") is None
    assert new.topic("orders").partitions[0].replicas == (1, 2)
    assert new.offset == 2 == loader.offset
    assert leader == LeaderAndEpoch(-1, 0)


def test_entries_handed_over_twice_apply_once():
    loader = MetadataLoader()
    loader.handle_commit(topic_entries())
    loader.handle_commit(topic_entries())  # would be "topic id exists" if replayed
    assert loader.offset == 1
    assert len(loader.image.topic("orders").partitions) == 1


def test_leader_change_publishes_the_same_image_with_the_new_leader():
    loader = MetadataLoader()
    rec = Recorder()
    loader.add_publisher(rec)
    loader.handle_leader_change(3, 5)
    loader.handle_leader_change(3, 5)  # nothing new: nothing published
    assert len(rec.calls) == 2
    old, new, leader = rec.calls[-1]
    assert old is new and leader == LeaderAndEpoch(3, 5)


def test_snapshot_replaces_the_image():
    source = MetadataLoader()
    source.handle_commit(topic_entries())
    loader = MetadataLoader()
    loader.handle_commit([entry(0, TopicRecord(name="gone", topic_id=uuid.UUID(int=9)))])
    loader.handle_snapshot(SnapshotId(2, 1),
                           [encode_record(r) for r in snapshot_records(source.image)])
    assert loader.image.topic("gone") is None
    assert loader.image.topic("orders") is not None
    assert loader.offset == 1


def test_a_corrupt_log_raises_and_keeps_the_image():
    loader = MetadataLoader()
    loader.handle_commit(topic_entries())
    before = loader.image
    with pytest.raises(MetadataReplayError):
        loader.handle_commit([entry(2, RemoveTopicRecord(topic_id=uuid.UUID(int=1)))])
    assert loader.image is before


def test_a_failing_publisher_does_not_stop_the_others():
    loader = MetadataLoader()

    class Broken:
        def on_metadata_update(self, old, new, leader):
            raise RuntimeError("boom")

    rec = Recorder()
    loader.add_publisher(Broken())
    loader.add_publisher(rec)
    loader.handle_commit(topic_entries())
    assert rec.calls[-1][1].offset == 1
