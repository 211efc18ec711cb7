"""BrokerMetadataPublisher: each committed image becomes the handlers' view and this broker's
local logs (created for its replicas, deleted with their topic), on a real LogManager."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from spool.broker.metadata_publisher import BrokerMetadataPublisher
from spool.cluster.loader import MetadataLoader
from spool.cluster.raft.store import LogEntry
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.partition_record import PartitionRecord
from spool.protocol._generated.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from spool.protocol._generated.remove_topic_record import RemoveTopicRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol._generated.unfence_broker_record import UnfenceBrokerRecord
from spool.protocol.metadata_records import encode_record
from spool.records.builder import BatchBuilder
from spool.storage.manager import LogManager
from spool.storage.partition_metadata import read_topic_id, write_topic_id

TID = uuid.UUID(int=5)


class Log:
    """Records as a metadata log would commit them, one offset each."""

    def __init__(self, loader):
        self.loader = loader
        self.next = 0

    def commit(self, *records):
        entries = [LogEntry(self.next + i, 1, encode_record(r)) for i, r in enumerate(records)]
        self.next += len(records)
        self.loader.handle_commit(entries)
        return self.next - 1


def registered(node):
    return [RegisterBrokerRecord(
        broker_id=node, incarnation_id=uuid.UUID(int=node), broker_epoch=node,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + node,
                                   security_protocol=0)], fenced=True),
        UnfenceBrokerRecord(id=node, epoch=node)]


def run(coro):
    return asyncio.run(coro)


def test_images_drive_the_view_and_the_local_logs(tmp_path):
    async def main():
        logs = LogManager([tmp_path])

        async def run_blocking(fn, *args):
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        broker = SimpleNamespace(node_id=1, view=None, storage=SimpleNamespace(logs=logs),
                                 run_blocking=run_blocking, controller_channel=None,
                                 leadership_changed=lambda *a: None,
                                 controller_reachable=lambda node: True)
        loader = MetadataLoader("c")
        pub = BrokerMetadataPublisher(broker, "PLAINTEXT")
        loader.add_publisher(pub)
        log = Log(loader)
        log.commit(*registered(1), *registered(2))
        loader.handle_leader_change(2, 3)
        offset = log.commit(
            TopicRecord(name="orders", topic_id=TID),
            PartitionRecord(partition_id=0, topic_id=TID, replicas=[1, 2], isr=[1, 2], leader=1),
            PartitionRecord(partition_id=1, topic_id=TID, replicas=[2, 1], isr=[2, 1], leader=2),
            PartitionRecord(partition_id=2, topic_id=TID, replicas=[2], isr=[2], leader=2),
            ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms",
                         value="1234"))
        view = broker.view  # published at once, before any file work
        assert [b.node_id for b in view.brokers()] == [1, 2]
        assert view.controller_id() == 2
        assert view.partition("orders", 1).leader == 2
        await pub.wait_applied(offset)
        # a replica here, led or followed, has a log; partition 2 is not on this broker
        assert logs.get("orders", 0) is not None and logs.get("orders", 1) is not None
        assert logs.get("orders", 2) is None
        assert logs.get("orders", 0).config.retention_ms == 1234
        offset = log.commit(ConfigRecord(resource_type=2, resource_name="orders",
                                         name="retention.ms", value="99"))
        await pub.wait_applied(offset)
        assert logs.get("orders", 0).config.retention_ms == 99
        offset = log.commit(RemoveTopicRecord(topic_id=TID))
        await pub.wait_applied(offset)
        assert broker.view.topic("orders") is None
        assert logs.partitions() == []
        assert not (tmp_path / "orders-0").exists()  # renamed -delete, removed later
        await pub.stop()
        logs.shutdown()

    run(main())


def test_a_restarted_broker_opens_its_logs_instead_of_creating_them(tmp_path):
    async def main():
        async def run_blocking(fn, *args):
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        records = [
            *registered(1),
            TopicRecord(name="kept", topic_id=TID),
            PartitionRecord(partition_id=0, topic_id=TID, replicas=[1], isr=[1], leader=1)]
        for life in range(2):
            logs = LogManager([tmp_path], load=False)
            broker = SimpleNamespace(node_id=1, view=None, storage=SimpleNamespace(logs=logs),
                                     run_blocking=run_blocking, controller_channel=None,
                                 leadership_changed=lambda *a: None,
                                 controller_reachable=lambda node: True)
            loader = MetadataLoader("c")
            pub = BrokerMetadataPublisher(broker, "PLAINTEXT")
            loader.add_publisher(pub)
            offset = Log(loader).commit(*records)
            await pub.wait_applied(offset)
            plog = logs.get("kept", 0)
            if life == 0:
                plog.append(bytearray(batch(b"v")))
            else:  # the second life found the first one's record
                assert plog.log_end_offset == 1
                assert not list(tmp_path.glob("*-stray"))
            await pub.stop()
            logs.shutdown()

    run(main())


def batch(value: bytes) -> bytes:
    b = BatchBuilder(0)
    b.append(None, value, timestamp=1)
    return b.build()


def test_a_folder_of_a_topic_deleted_and_created_again_is_not_adopted(tmp_path):
    """Broker 1 was down while 'kept' was deleted and created again (a new topic id): its old
    folder is moved aside, not served as the new topic."""
    async def main():
        async def run_blocking(fn, *args):
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        for life, tid in enumerate((TID, uuid.UUID(int=6))):
            logs = LogManager([tmp_path], load=False)
            broker = SimpleNamespace(node_id=1, view=None, storage=SimpleNamespace(logs=logs),
                                     run_blocking=run_blocking, controller_channel=None,
                                 leadership_changed=lambda *a: None,
                                 controller_reachable=lambda node: True)
            loader = MetadataLoader("c")
            pub = BrokerMetadataPublisher(broker, "PLAINTEXT")
            loader.add_publisher(pub)
            offset = Log(loader).commit(*registered(1), TopicRecord(name="kept", topic_id=tid),
                                        PartitionRecord(partition_id=0, topic_id=tid,
                                                        replicas=[1], isr=[1], leader=1))
            await pub.wait_applied(offset)
            assert read_topic_id(tmp_path / "kept-0") == tid
            if life == 0:
                logs.get("kept", 0).append(bytearray(batch(b"old")))
            else:
                assert logs.get("kept", 0).log_end_offset == 0
                assert len(list(tmp_path.glob("kept-0.*-stray"))) == 1  # kept, not deleted
            await pub.stop()
            logs.shutdown()

    run(main())


def test_partition_metadata_is_kafkas_format(tmp_path):
    tid = uuid.UUID("f5536da7-766c-4136-95d9-ca84f722dcbb")
    write_topic_id(tmp_path, tid)
    assert (tmp_path / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: 9VNtp3ZsQTaV2cqE9yLcuw\n")
    assert read_topic_id(tmp_path) == tid
