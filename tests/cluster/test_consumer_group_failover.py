"""A KIP-848 consumer group (confluent-kafka 2.16, ``group.protocol=consumer``) outlives the
coordinator that served it: the leader of its ``__consumer_offsets`` partition is killed -9,
the new leader replays the group's records (the group epoch goes on from where it was, a group
rebuilt by rejoins would start again at 1), and the same members keep their partitions and go
on consuming: nothing consumed twice, nothing lost."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from spool.protocol._generated import ConsumerGroupDescribeRequest
from tests.cluster.test_coordinator_failover import (
    OVERRIDES,
    QUIET,
    RACKS,
    coordinator,
    create,
    fully_replicated,
    produce,
)
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import request_once

CG = {"group.consumer.min.session.timeout.ms": "3000",
      "group.consumer.session.timeout.ms": "20000",
      "group.consumer.min.heartbeat.interval.ms": "500",
      "group.consumer.heartbeat.interval.ms": "500"}


def group_epoch(bootstrap: str, group: str) -> int | str:
    try:
        r = request_once(bootstrap, 69, 0, ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False))
    except (OSError, ConnectionError) as e:
        return f"describe: {e}"
    g = r.groups[0]
    return g.group_epoch if g.error_code == 0 else f"describe: error {g.error_code}"


def drain(consumers, seen: list, until, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, f"timed out with {len(seen)} records"
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error():
                seen.append((m.partition(), m.offset()))


@pytest.mark.timeout(300)
def test_a_consumer_group_survives_its_coordinator_kill(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS,
                              overrides={**OVERRIDES, **CG}, proxied=False).start()
    cluster.wait_formed()
    topic, group = f"in-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, 4)
    cluster.wait_until("the input replicated", lambda: fully_replicated(cluster, topic), 60)
    produce(cluster.bootstrap, topic, 200, 4)
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
            "group.protocol": "consumer", "auto.offset.reset": "earliest", **QUIET}
    members = [Consumer(conf), Consumer(conf)]
    for c in members:
        c.subscribe([topic])
    seen: list = []

    def split() -> bool:
        a, b = ({tp.partition for tp in c.assignment()} for c in members)
        return bool(a) and bool(b) and len(a | b) == 4 and not a & b

    drain(members, seen, lambda: len(seen) == 200 and split(), 90)
    coord = cluster.wait_until("the group's coordinator",
                               lambda: coordinator(cluster.bootstrap, group, 0))
    cluster.wait_until("__consumer_offsets replicated",
                       lambda: fully_replicated(cluster, "__consumer_offsets"), 60)
    # a third member joins and leaves: the group epoch is 4 (2 joins, 1 join, 1 leave)
    third = Consumer(conf)
    third.subscribe([topic])
    drain([third, *members], seen, lambda: bool(third.assignment()) or not split(), 60)
    third.close()
    drain(members, seen, split, 60)
    epoch = group_epoch(cluster.nodes[coord].bootstrap, group)
    assert epoch == 4
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap([coord]), **QUIET})
    before = sorted(m.member_id for m in
                    admin.describe_consumer_groups([group])[group].result(timeout=30).members)
    cluster.nodes[coord].kill()
    try:
        new = cluster.wait_until(
            "a new coordinator",
            lambda: (n if isinstance(n := coordinator(cluster.live_bootstrap([coord]), group, 0),
                                     int) and n != coord else f"coordinator {n}"), 60)
        produce(cluster.live_bootstrap([coord]), topic, 200, 4)
        drain(members, seen, lambda: len(seen) == 400, 120)
        after = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert sorted(m.member_id for m in after.members) == before
        assert group_epoch(cluster.nodes[new].bootstrap, group) == epoch  # replayed
        assert split()
    finally:
        for c in members:
            c.close()
        cluster.nodes[coord].start()
    assert len(set(seen)) == len(seen) == 400, "a record consumed twice"
