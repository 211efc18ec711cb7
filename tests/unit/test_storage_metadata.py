"""The metadata log: replay into the image, atomic changes, and Storage reconciliation."""

from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import ConfigSource
from spool.storage.engine import Storage
from spool.storage.log import PartitionLog
from spool.storage.manager import METADATA_LOG_CONFIG
from spool.storage.metadata import MAX_RECORDS_PER_USER_OP, MetadataStore, PartitionLimit
from spool.util.clock import FakeClock


def meta_log(tmp_path):
    return PartitionLog(tmp_path / "__cluster_metadata-0", METADATA_LOG_CONFIG, clock=FakeClock())


def test_replay_rebuilds_the_image(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    tid = store.create_topic("orders", 3, {"retention.ms": "1000"})
    store.create_topic("tmp", 1)
    store.create_partitions("orders", 5)
    store.alter_topic_config("orders", {"retention.ms": None, "cleanup.policy": "compact"})
    store.alter_broker_config({"log.retention.hours": "2"})
    store.delete_topic("tmp")
    assert store.log.recovery_point == store.log.log_end_offset  # always fsynced
    before = store.image
    store.log.close()

    again = MetadataStore(meta_log(tmp_path))
    assert again.image == before
    t = again.topic("orders")
    assert (t.topic_id, t.partitions, t.configs) == (tid, 5, {"cleanup.policy": "compact"})
    assert again.topic("tmp") is None and again.topic_name(tid) == "orders"
    assert again.broker_config() == {"log.retention.hours": "2"}
    again.log.close()


def test_changes_are_validated(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    store.create_topic("a", 1)
    cases = [
        (lambda: store.create_topic("a", 1), Errors.TOPIC_ALREADY_EXISTS),
        (lambda: store.create_topic("b", 0), Errors.INVALID_PARTITIONS),
        (lambda: store.create_topic("bad/name", 1), Errors.INVALID_TOPIC),
        (lambda: store.create_topic("__cluster_metadata", 1), Errors.INVALID_TOPIC),
        (lambda: store.create_topic("x" * 250, 1), Errors.INVALID_TOPIC),
        (lambda: store.create_topic("c", 1, {"retention.ms": "x"}), Errors.INVALID_CONFIG),
        (lambda: store.create_partitions("a", 1), Errors.INVALID_PARTITIONS),
        (lambda: store.create_partitions("zz", 3), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: store.delete_topic("zz"), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: store.alter_topic_config("a", {"nope": "1"}), Errors.INVALID_CONFIG),
    ]
    leo = store.log.log_end_offset
    for call, code in cases:
        with pytest.raises(KafkaError) as e:
            call()
        assert e.value.code == code
    assert store.log.log_end_offset == leo  # nothing written for a rejected change
    store.log.close()


def test_a_torn_change_never_happened(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    store.create_topic("a", 1)
    store.create_topic("b", 4)
    path = store.log.active_segment.log_path
    store.log.close()
    os.truncate(path, path.stat().st_size - 10)  # tear the last change (one batch)
    again = MetadataStore(meta_log(tmp_path))
    assert set(again.topics()) == {"a"}
    again.log.close()


def test_storage_keeps_partitions_and_metadata_in_step(tmp_path):
    dirs = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    clock = FakeClock()
    s = Storage(dirs, {"log.retention.hours": "24"}, clock)
    s.create_topic("orders", 2, {"retention.ms": "1000"})
    s.create_topic("gone", 1)
    s.create_partitions("orders", 3)
    assert s.get("orders", 2).config.retention_ms == 1000
    s.alter_topic_config("orders", {"retention.ms": "2000"})
    assert s.get("orders", 0).config.retention_ms == 2000
    s.alter_broker_config({"log.retention.hours": "1"})
    entries = {e.name: e for e in s.describe_topic_config("gone")}
    assert entries["retention.ms"].value == str(3_600_000)
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    s.alter_broker_config({"log.retention.minutes": "2"}, broker="0")
    entries = {e.name: e for e in s.describe_topic_config("gone")}
    assert entries["retention.ms"].value == str(120_000)
    assert [x[2] for x in entries["retention.ms"].synonyms] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
    ]
    assert s.get("gone", 0).config.retention_ms == 120_000
    s.delete_topic("gone")
    assert s.get("gone", 0) is None
    s.shutdown()

    # simulate a crash between the metadata write and the directory work
    d0 = tmp_path / "d0"
    os.mkdir(d0 / "stray-0")  # not in the metadata: not ours to read or remove
    (d0 / "stray-0" / "keep.txt").write_text("mine")
    orders1 = next(p for p in (tmp_path / "d0", tmp_path / "d1") if (p / "orders-1").exists())
    os.rename(orders1 / "orders-1", orders1 / "orders-1.x-delete")
    again = Storage(dirs, {}, clock)
    assert again.reconciled == [("orders", 1)]
    assert (d0 / "stray-0" / "keep.txt").read_text() == "mine"
    assert again.logs.partitions() == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert again.get("orders", 1).config.retention_ms == 2000
    again.shutdown()


def test_a_change_is_bounded_as_kafka_bounds_a_user_operation(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    store.create_topic("wide", MAX_RECORDS_PER_USER_OP - 1)  # + its TopicRecord: exactly 10,000
    end = store.log.log_end_offset
    for change in (lambda: store.create_topic("huge", 1_000_000),
                   lambda: store.create_topic("over", MAX_RECORDS_PER_USER_OP),
                   lambda: store.create_partitions("wide", 2 * MAX_RECORDS_PER_USER_OP)):
        with pytest.raises(KafkaError) as info:
            change()
        assert info.value.code == Errors.POLICY_VIOLATION
        assert "excessively large" in info.value.message
    assert store.log.log_end_offset == end  # nothing written
    assert store.topic("huge") is None and store.topic("wide").partitions == 9_999
    store.log.close()


def test_the_partition_limit_keeps_room_for_internal_topics(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    limit = PartitionLimit(100, {"__consumer_offsets": 50}, "max.broker.partitions=100")
    store.create_topic("a", 40, limit=limit)
    with pytest.raises(KafkaError) as info:
        store.create_topic("b", 11, limit=limit)
    assert info.value.code == Errors.POLICY_VIOLATION
    assert info.value.message == (
        "adding 11 partitions to topic 'b' would exceed the broker's limit of "
        "max.broker.partitions=100: it holds 40 and keeps 50 for internal topics; "
        "at most 10 more can be created")
    with pytest.raises(KafkaError):
        store.create_partitions("a", 51, limit=limit)
    store.create_topic("__consumer_offsets", 50, limit=PartitionLimit(100))
    store.create_partitions("a", 50, limit=limit)
    assert store.total_partitions() == 100
    with pytest.raises(KafkaError):
        store.create_topic("c", 1, limit=limit)
    store.delete_topic("a")
    assert store.total_partitions() == 50
    store.log.close()


def test_concurrent_creations_never_overshoot_the_limit(tmp_path):
    store = MetadataStore(meta_log(tmp_path))
    limit = PartitionLimit(30)

    def create(i: int) -> bool:
        try:
            store.create_topic(f"t{i}", 4, limit=limit)
            return True
        except KafkaError:
            return False

    with ThreadPoolExecutor(8) as pool:
        created = sum(pool.map(create, range(20)))
    assert created == 7 and store.total_partitions() == 28
    store.log.close()


def test_a_folder_in_the_way_of_a_new_partition_is_moved_aside_not_adopted(tmp_path):
    d0 = tmp_path / "d0"
    s = Storage([str(d0)], {}, FakeClock())
    s.shutdown()
    (d0 / "backup-0").mkdir()  # someone's folder, named like partition 0 of "backup"
    (d0 / "backup-0" / "00000000000000000000.log").write_bytes(b"not a log")
    again = Storage([str(d0)], {}, FakeClock())
    assert again.logs.partitions() == []  # not in the metadata: not opened
    again.create_topic("backup", 1)
    assert again.get("backup", 0).log_end_offset == 0
    stray = [p for p in d0.iterdir() if p.name.startswith("backup-0.")]
    assert len(stray) == 1 and stray[0].name.endswith("-stray")
    assert (stray[0] / "00000000000000000000.log").read_bytes() == b"not a log"
    again.shutdown()
    third = Storage([str(d0)], {}, FakeClock())  # the -stray folder stays, unread
    assert third.logs.partitions() == [("backup", 0)] and stray[0].exists()
    third.shutdown()


def test_a_topic_whose_logs_cannot_be_created_is_removed_again(tmp_path, monkeypatch):
    # EMFILE in the middle of a creation (the broker's limits keep it from happening;
    # the storage layer must still leave a consistent state if it does)
    s = Storage([str(tmp_path / "d")], {}, FakeClock())
    opened = []
    real_open = s.logs._open_log

    def open_log(path, config):
        if len(opened) == 3:
            raise OSError(errno.EMFILE, "Too many open files")
        opened.append(path)
        return real_open(path, config)

    monkeypatch.setattr(s.logs, "_open_log", open_log)
    with pytest.raises(KafkaError) as info:
        s.create_topic("wide", 10)
    assert info.value.code == Errors.KAFKA_STORAGE_ERROR
    assert "the topic was not created" in info.value.message
    assert s.metadata.topic("wide") is None and s.logs.partitions() == []
    monkeypatch.undo()
    s.create_topic("wide", 2)  # the name is free again
    s.shutdown()

    again = Storage([str(tmp_path / "d")], {}, FakeClock())
    assert again.metadata.topic("wide").partitions == 2
    assert again.logs.partitions() == [("wide", 0), ("wide", 1)]
    again.shutdown()
