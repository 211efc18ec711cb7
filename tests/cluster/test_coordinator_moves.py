"""A coordinator that loses its ``__consumer_offsets`` / ``__transaction_state`` partition unloads it (issue 14:
coordinators move with their partitions). Real processes: a controller-only node and three
brokers. The coordinator of a group is stopped (SIGSTOP) until the controller fences it and
another broker leads the partition; an offset committed there is the group's; once the old
coordinator runs again and follows the new leader, it answers the group's OffsetFetch with
NOT_COORDINATOR. When it leads again (it is the preferred replica: the automatic leader
balancing moves the partition back) it loads the partition anew and answers the offset
committed meanwhile, never the one it had in memory. The same for a transactional id whose
coordinator is that broker too: InitProducerId there bumps the epoch the other coordinator
gave (2), not the one it held (1)."""

from __future__ import annotations

import os
import signal
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from spool.protocol._generated import InitProducerIdRequest, OffsetFetchRequest
from spool.protocol._generated.offset_fetch_request import OffsetFetchRequestTopic
from spool.protocol.errors import Errors
from tests.cluster.test_brokers import coordinator
from tests.cluster.test_replication_basic import create
from tests.helpers.raw_client import RawClient

ROLES = ("controller", "broker", "broker", "broker")
RACKS = (None, "a", "b", "c")


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commit as an application does: COORDINATOR_LOAD_IN_PROGRESS (the coordinator is still
    loading its partition, e.g. just after it became leader) is retriable, and librdkafka
    hands it to a synchronous commit."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                return
            except KafkaException as e:
                if (e.args[0].code() != KafkaError.COORDINATOR_LOAD_IN_PROGRESS
                        or time.monotonic() > deadline):
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def offset_fetch(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """(error code, committed offset of ``topic``-0) from OffsetFetch v7 to that broker."""
    c = RawClient(bootstrap)
    try:
        r = c.request(9, 7, OffsetFetchRequest(group_id=group, require_stable=False, topics=[
            OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    finally:
        c.close()
    offset = r.topics[0].partitions[0].committed_offset if r.topics else -1
    return r.error_code, offset


def init_producer_id(bootstrap: str, txn_id: str) -> tuple[int, int, int]:
    """(error code, producer id, epoch) from InitProducerId v4 to that broker."""
    c = RawClient(bootstrap)
    try:
        r = c.request(22, 4, InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1))
    finally:
        c.close()
    return r.error_code, r.producer_id, r.producer_epoch


def test_a_deposed_coordinator_unloads_its_groups_and_transactions(cluster_factory):
    cluster = cluster_factory(roles=ROLES, racks=RACKS, proxied=False, overrides={
        "replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "leader.imbalance.check.interval.seconds": "1"}).start()
    cluster.wait_formed()
    topic = f"c-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, {})
    group = f"g-{uuid.uuid4().hex[:6]}"
    boot = cluster.nodes[2].bootstrap
    old = cluster.wait_until("a group coordinator", lambda: coordinator(boot, group, 0), 60)
    commit(cluster.nodes[old].bootstrap, group, topic, 7)
    assert offset_fetch(cluster.nodes[old].bootstrap, group, topic) == (0, 7)
    txn = next(t for t in (f"tx-{i}" for i in range(200))
               if cluster.wait_until("a txn coordinator", lambda t=t: coordinator(
                   boot, t, 1), 60) == old)
    _, producer_id, epoch = cluster.wait_until("InitProducerId", lambda: (
        lambda r: r if r[0] == 0 else f"InitProducerId: {r}")(
            init_producer_id(cluster.nodes[old].bootstrap, txn)), 60)
    assert epoch == 0
    others = [n for n in (2, 3, 4) if n != old]

    pid = cluster.nodes[old].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        new = cluster.wait_until("another coordinator", lambda: (
            lambda n: n if n in others else f"coordinator {n}")(
                coordinator(cluster.nodes[others[0]].bootstrap, group, 0)), 60)
        commit(cluster.nodes[new].bootstrap, group, topic, 9)
        tnew = cluster.wait_until("another txn coordinator", lambda: (
            lambda n: n if n in others else f"coordinator {n}")(
                coordinator(cluster.nodes[others[0]].bootstrap, txn, 1)), 60)
        assert cluster.wait_until("InitProducerId on the new coordinator", lambda: (
            lambda r: r if r[0] == 0 else f"InitProducerId: {r}")(
                init_producer_id(cluster.nodes[tnew].bootstrap, txn)), 60) == (0, producer_id, 1)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert offset_fetch(cluster.nodes[new].bootstrap, group, topic) == (0, 9)

    # back, the old coordinator learns it follows now; it must not answer from memory
    cluster.wait_until("the old coordinator sends clients to the new one", lambda: (
        True if coordinator(cluster.nodes[old].bootstrap, group, 0) == new else "not yet"), 60)
    assert offset_fetch(cluster.nodes[old].bootstrap, group, topic) == (
        Errors.NOT_COORDINATOR, -1)

    def coordinates_again():
        if coordinator(cluster.nodes[others[0]].bootstrap, group, 0) != old:
            return "not yet"
        got = offset_fetch(cluster.nodes[old].bootstrap, group, topic)
        return got if got[0] == 0 else f"OffsetFetch: {got}"  # loading, or not yet its image

    assert cluster.wait_until("the old coordinator leads again", coordinates_again, 90) == (0, 9)

    def leads_txn_again():
        if coordinator(cluster.nodes[others[0]].bootstrap, txn, 1) != old:
            return "not yet"
        got = init_producer_id(cluster.nodes[old].bootstrap, txn)
        return got if got[0] == 0 else f"InitProducerId: {got}"  # no epoch bump on an error

    assert cluster.wait_until("the old txn coordinator leads again", leads_txn_again, 90) == (
        0, producer_id, 2)
