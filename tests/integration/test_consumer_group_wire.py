"""KIP-848 consumer groups on the wire with confluent-kafka 2.16 (``group.protocol=consumer``)
against a real broker: ConsumerGroupHeartbeat, ConsumerGroupDescribe, member-epoch
OffsetCommit/OffsetFetch, ListGroups' type filter, DeleteGroups, and a group that survives a
``kill -9`` of the broker (its records replayed at start). The big real-client suite (members
killed, static members, exactly-once) is tests/integration/test_consumer_protocol*.py.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import OffsetFetchRequest
from spool.protocol._generated.offset_fetch_request import OffsetFetchRequestGroup
from spool.protocol.errors import Errors
from spool.testing import running_broker
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "200",
    "group.consumer.heartbeat.interval.ms": "200",
}


@pytest.fixture(scope="module")
def bootstrap():
    """The module's broker (spool.testing, in this process: no kill here)."""
    with running_broker(OVERRIDES) as b:
        yield b


def topic_with_records(bootstrap: str, partitions: int, count: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(name, str(i).encode(), partition=i % partitions)
    p.flush(30)
    return name


def consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def poll_until(consumers, done, timeout=30.0, seen=None):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error() and seen is not None:
                seen.append((m.partition(), m.offset()))


def parts(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_members_split_the_partitions_and_commit_with_their_epoch(bootstrap):
    topic = topic_with_records(bootstrap, 4, 40)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c1 = consumer(bootstrap, group, topic)
    seen: list = []
    poll_until([c1], lambda: len(seen) == 40, seen=seen)
    assert parts(c1) == {0, 1, 2, 3}
    c2 = consumer(bootstrap, group, topic)
    poll_until([c1, c2], lambda: parts(c1) and parts(c2) and len(parts(c1) | parts(c2)) == 4)
    assert not parts(c1) & parts(c2)
    assert len(seen) == len(set(seen)) == 40  # nothing consumed twice
    # a member's commit carries its member epoch (OffsetCommit v9+) and is read back
    mine = sorted(parts(c2))
    c2.commit(offsets=[TopicPartition(topic, p, 10) for p in mine], asynchronous=False)
    assert [tp.offset for tp in c2.committed([TopicPartition(topic, p) for p in mine])] == \
        [10] * len(mine)
    # OffsetFetch v9+ names the member: one the group does not have is UNKNOWN_MEMBER_ID;
    # no member (epoch -1, as an admin client) reads freely
    with RawClient(bootstrap) as rc:
        def fetch_as(member, epoch):
            return rc.request(9, 9, OffsetFetchRequest(require_stable=False, groups=[
                OffsetFetchRequestGroup(group_id=group, member_id=member, member_epoch=epoch,
                                        topics=None)])).groups[0]
        assert fetch_as("nobody", 3).error_code == Errors.UNKNOWN_MEMBER_ID
        free = fetch_as(None, -1)
        assert free.error_code == 0
        assert sorted((t.name, p.partition_index, p.committed_offset) for t in free.topics
                      for p in t.partitions) == [(topic, p, 10) for p in mine]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result()
    assert (desc.type, desc.state, desc.partition_assignor) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform")
    assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                  for m in desc.members) == sorted([sorted(parts(c1)), sorted(parts(c2))])
    listed = {g.group_id: g for g in admin.list_consumer_groups(
        types={ConsumerGroupType.CONSUMER}).result().valid}
    assert listed[group].type == ConsumerGroupType.CONSUMER
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result().valid
    assert group not in {g.group_id for g in classic}
    # a non-empty group is not deleted; once its members left it is
    assert admin.delete_consumer_groups([group])[group].exception() is not None
    c1.close()
    c2.close()
    assert admin.delete_consumer_groups([group])[group].result() is None
    assert group not in {g.group_id for g in admin.list_consumer_groups().result().valid}


def test_the_group_survives_a_broker_kill(tmp_path):
    with BrokerProcess(tmp_path / "data", OVERRIDES) as b:
        topic = topic_with_records(b.bootstrap, 2, 10)
        group = "survivor"
        c = consumer(b.bootstrap, group, topic)
        seen: list = []
        poll_until([c], lambda: len(seen) == 10, seen=seen)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        before = admin.describe_consumer_groups([group])[group].result().members
        b.kill()
        b.restart()
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(10):
            p.produce(topic, b"after", partition=i % 2)
        p.flush(30)
        poll_until([c], lambda: len(seen) == 20, seen=seen)
        assert parts(c) == {0, 1}
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # a fresh client after the kill
        after = admin.describe_consumer_groups([group])[group].result().members
        # the member was restored from the log, not replaced by a new one
        assert [m.member_id for m in after] == [m.member_id for m in before]
        c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_classic_group_is_upgraded_and_downgraded_online(bootstrap, strategy):
    """group.consumer.migration.policy=bidirectional (Kafka's default): a consumer-protocol
    member joins a classic group, the classic member keeps working inside the consumer group
    (JoinGroup/SyncGroup/Heartbeat), and when the consumer-protocol member leaves the group is
    classic again and the classic member gets everything back."""
    topic = topic_with_records(bootstrap, 4, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    old = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                    "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300, "partition.assignment.strategy": strategy})
    old.subscribe([topic])
    poll_until([old], lambda: len(parts(old)) == 4)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def group_type():
        return {g.group_id: g.type for g in admin.list_consumer_groups().result().valid}[group]

    assert group_type() == ConsumerGroupType.CLASSIC
    new = consumer(bootstrap, group, topic)
    poll_until([old, new], lambda: parts(old) and parts(new)
               and len(parts(old) | parts(new)) == 4 and not parts(old) & parts(new))
    assert group_type() == ConsumerGroupType.CONSUMER
    new.close()
    poll_until([old], lambda: len(parts(old)) == 4)
    assert group_type() == ConsumerGroupType.CLASSIC
    old.close()
