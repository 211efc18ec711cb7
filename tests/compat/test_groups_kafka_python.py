"""kafka-python consumer groups against a real broker: range, roundrobin, sticky.

Two members (each polling in its own thread) split the partitions, every
record is consumed once, commits round-trip, and the group settles: no
rebalance once both members have their partitions (a coordinator that
answers a Stable member's rejoin or heartbeat wrongly makes kafka-python
loop through rebalances forever).
"""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.base import MemberState
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.timeout(90)

# kafka-python 3.0.12 bug (found by logging both members at DEBUG): a leader
# that rejoins because its assignment snapshot no longer matches its metadata
# snapshot (its first assignment ran before it had fetched the new topic's
# metadata) runs JoinGroup+SyncGroup as a background future. When poll()'s
# timer expires first, join_group_async returns and leaves the future in
# flight; the future's own _perform_assignment then updates the assignment
# snapshot, so need_rejoin() is False on the next poll and the finished
# future is never read: the member stays REBALANCING with heartbeats disabled
# and nothing outstanding, holding a SyncGroup answer (error 0, its
# partitions) it never applies, and the broker rightly expires it after
# session.timeout.ms. Polling for 1 s (longer than the rejoin's JoinGroup
# round) made it vanish in our runs (0 of 30, against 16 of 70 with 200 ms);
# should it still happen, the test is an expected failure only when that exact
# client state is there (Member.unapplied_join), which a broker that fails to
# answer, answers with an error, or expires a live member never produces.
CLIENT_BUG = ("kafka-python 3.0.12 left a successful SyncGroup answer unapplied "
              "(join future done, member REBALANCING, need_rejoin() False)")
PARTITIONS = 4
N = 400


class Counting(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[set[int]] = []

    def on_partitions_revoked(self, revoked) -> None:
        pass

    def on_partitions_assigned(self, assigned) -> None:
        self.assigned.append({tp.partition for tp in assigned})


class Member(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, assignor) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
            partition_assignment_strategy=[assignor], request_timeout_ms=30000,
        )
        self.listener = Counting()
        self.consumer.subscribe([topic], listener=self.listener)
        self.values: list[bytes] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for records in self.consumer.poll(1000).values():
                self.values += [r.value for r in records]
            try:
                self.consumer.commit()
            except KafkaError:  # CommitFailed/RebalanceInProgress mid-rebalance: commit next round
                pass
        self.consumer.close()

    def unapplied_join(self) -> bool:
        """True when this member is stuck in kafka-python 3.0.12's join bug (see CLIENT_BUG)."""
        co = self.consumer._coordinator
        join = co._join_task  # a kafka.future.Future of the JoinGroup+SyncGroup round trip
        return (co.state is MemberState.REBALANCING and join is not None and join.succeeded()
                and isinstance(join.value, bytes) and not co.need_rejoin())

    def stop(self) -> None:
        self.stopping.set()
        self.join(20)


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("assignor", [RangePartitionAssignor, RoundRobinPartitionAssignor,
                                      StickyPartitionAssignor], ids=lambda a: a.name)
def test_two_member_group_splits_partitions_and_settles(broker, topic_name, assignor):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    for i in range(N):
        p.send(topic_name, key=str(i).encode(), value=b"v%d" % i)
    p.flush(30)
    p.close()
    group = f"g-{topic_name}"
    a = Member(broker.bootstrap, topic_name, group, assignor)
    b = Member(broker.bootstrap, topic_name, group, assignor)
    a.start()
    b.start()
    try:
        def settled() -> bool:
            owned = [m.consumer.assignment() for m in (a, b)]
            return all(len(o) == PARTITIONS // 2 for o in owned) and not (owned[0] & owned[1])

        try:
            wait_for(settled, 60, "two members with two partitions each")
        except AssertionError:
            if any(m.unapplied_join() for m in (a, b)):  # evidence of CLIENT_BUG, nothing less
                pytest.xfail(CLIENT_BUG)
            raise
        rounds = (len(a.listener.assigned), len(b.listener.assigned))
        wait_for(lambda: len(set(a.values) | set(b.values)) == N, 30, "every record")
        time.sleep(3)  # six heartbeat intervals: a rebalance loop would show here
        assert (len(a.listener.assigned), len(b.listener.assigned)) == rounds
        assert settled()
    finally:
        a.stop()
        b.stop()
    admin.close()
    check = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
    try:
        parts = [TopicPartition(topic_name, q) for q in range(PARTITIONS)]
        assert sum(check.committed(tp) for tp in parts) == N
    finally:
        check.close()


def test_commit_with_metadata_and_committed(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    admin.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                      enable_auto_commit=False)
    try:
        tp = TopicPartition(topic_name, 1)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(42, "kp-meta", -1)})
        got = c.committed(tp, metadata=True)
        assert (got.offset, got.metadata) == (42, "kp-meta")
        assert c.committed(TopicPartition(topic_name, 0)) is None
    finally:
        c.close()
