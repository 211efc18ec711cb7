"""Share-group (KIP-932) tests' tools: real ShareConsumers, what they saw, and the checker.

``ShareLog`` records, thread-safely, what share consumers saw: every
``Delivery`` (a record a poll returned: consumer, offset, the broker's delivery
count, when) and every ``Ack`` outcome the broker reported (consumer, offset,
ACCEPT/RELEASE/REJECT, ``ok`` or the error, when). The outcome is the
client's acknowledgement-commit callback, which confluent-kafka calls for
acknowledgements sent on a poll (piggy-backed on ShareFetch), by
``commit_sync``/``commit_async`` (ShareAcknowledge) and by ``close``: an ``ok``
ack is one the broker confirmed.

``check_exactly_once(log, n, unknown_ok=...)`` returns the violations (an
empty list means the history holds):

* an offset finished (an ``ok`` ACCEPT or REJECT) twice, or one outside
  [0, n);
* an offset of [0, n) never finished (with ``unknown_ok``, an ACCEPT or
  REJECT that failed may have taken effect, as when the broker was killed
  before it answered: such an offset counts as possibly finished);
* a record delivered again after an ACCEPT or REJECT of it was confirmed:
  an accepted or rejected record is never delivered again. (A poll may
  return a record late, after its lock expired in the client's hands and
  another consumer got and accepted it: a delivery with a lower delivery
  count than the one acknowledged is such an older acquisition, not a
  redelivery.)

``check_delivery_counts(log)``: each offset's deliveries, in time order, carry
strictly increasing delivery counts starting at 1 (not across a broker
restart: acquisitions are not persisted).

``ShareWorker`` is one ShareConsumer in a thread (a ShareConsumer is not
thread safe: one per thread) that polls until told to stop, acknowledging
each record as ``decide(msg)`` says (explicit mode, committed with
``commit_sync`` after each poll, or sent on the next poll) or implicitly;
``wait_until(cond, timeout, workers)`` and ``finish(workers)`` drive them.
``produce`` writes records whose value is their index; ``set_group_config``
sets a group config (``share.auto.offset.reset``...) through
IncrementalAlterConfigs; ``wait_members`` waits until ShareGroupDescribe shows
the members with their assignments. From a raw client: ``hb`` sends one
ShareGroupHeartbeat, ``assigned`` reads its assignment, ``until_assigned``
heartbeats until the member is assigned (its share-partitions initialized). ``OVERRIDES`` are the broker settings
share tests run with: short locks, heartbeats and session timeouts, and a
one-replica ``__share_group_state``.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable

from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from spool.protocol._generated import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from tests.helpers.raw_client import request_once

LOCK_MS = 4000
OVERRIDES = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "3",
}
NAMES = {AcknowledgeType.ACCEPT: "ACCEPT", AcknowledgeType.RELEASE: "RELEASE",
         AcknowledgeType.REJECT: "REJECT"}


@dataclasses.dataclass(frozen=True)
class Delivery:
    consumer: str
    offset: int
    delivery_count: int | None
    at: float  # time.monotonic() when the poll returned it


@dataclasses.dataclass(frozen=True)
class Ack:
    consumer: str
    offset: int
    ack_type: str  # ACCEPT, RELEASE, REJECT
    ok: bool
    at: float  # when the broker's answer reached the client's callback
    error: str | None = None
    delivery_count: int | None = None  # of the delivery acknowledged


class ShareLog:
    """What share consumers saw (module docstring); every method is thread safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        self.acks: list[Ack] = []
        self.errors: list[str] = []  # error messages polls returned
        self.accepted: set[int] = set()  # offsets with an ok ACCEPT
        self.finished: set[int] = set()  # offsets with an ok ACCEPT or REJECT
        self.maybe: set[int] = set()  # offsets with a failed ACCEPT or REJECT

    def delivered(self, consumer: str, offset: int, count: int | None) -> None:
        with self.lock:
            self.deliveries.append(Delivery(consumer, offset, count, time.monotonic()))

    def acked(self, consumer: str, offset: int, ack_type: str, error: str | None,
              delivery_count: int | None = None) -> None:
        with self.lock:
            self.acks.append(Ack(consumer, offset, ack_type, error is None, time.monotonic(),
                                 error, delivery_count))
            if ack_type in ("ACCEPT", "REJECT"):
                (self.finished if error is None else self.maybe).add(offset)
            if ack_type == "ACCEPT" and error is None:
                self.accepted.add(offset)

    def covers(self, n: int, *, unknown_ok: bool = False) -> bool:
        with self.lock:
            done = self.finished | self.maybe if unknown_ok else self.finished
            return all(o in done for o in range(n))

    def by_consumer(self) -> dict[str, int]:
        with self.lock:
            return dict(collections.Counter(d.consumer for d in self.deliveries))

    def deliveries_of(self, offset: int) -> list[Delivery]:
        with self.lock:
            return sorted((d for d in self.deliveries if d.offset == offset), key=lambda d: d.at)


def check_exactly_once(log: ShareLog, n: int, *, unknown_ok: bool = False) -> list[str]:
    """Violations of 'every offset of [0, n) accepted or rejected exactly once' (module
    docstring)."""
    out: list[str] = []
    with log.lock:
        acks = list(log.acks)
        deliveries = list(log.deliveries)
    finished: dict[int, list[Ack]] = collections.defaultdict(list)
    for a in acks:
        if a.ok and a.ack_type in ("ACCEPT", "REJECT"):
            finished[a.offset].append(a)
    final = {off: ok[0] for off, ok in finished.items()}
    for off, ok in sorted(finished.items()):
        if len(ok) > 1:
            out.append(f"offset {off} finished {len(ok)} times: "
                       + ", ".join(f"{a.ack_type} by {a.consumer}" for a in ok))
        if not 0 <= off < n:
            out.append(f"offset {off} finished, outside [0, {n})")
    maybe = ({a.offset for a in acks if a.ack_type in ("ACCEPT", "REJECT") and not a.ok}
             if unknown_ok else set())
    missing = [o for o in range(n) if o not in finished and o not in maybe]
    if missing:
        out.append(f"{len(missing)} offsets never accepted or rejected, e.g. {missing[:10]}")
    for d in deliveries:
        f = final.get(d.offset)
        if f is not None and d.at > f.at and not _older(d, f):
            out.append(f"offset {d.offset} delivered to {d.consumer} (delivery count "
                       f"{d.delivery_count}) {d.at - f.at:.3f}s after its {f.ack_type} by "
                       f"{f.consumer} was confirmed")
    return out


def _older(d: Delivery, f: Ack) -> bool:
    return (d.delivery_count is not None and f.delivery_count is not None
            and d.delivery_count < f.delivery_count)


def check_delivery_counts(log: ShareLog) -> list[str]:
    """Violations of 'each offset's delivery counts are 1, 2, ... in time order, increasing'."""
    out: list[str] = []
    with log.lock:
        deliveries = sorted(log.deliveries, key=lambda d: d.at)
    seen: dict[int, list[Delivery]] = collections.defaultdict(list)
    for d in deliveries:
        seen[d.offset].append(d)
    for off, ds in sorted(seen.items()):
        counts = [d.delivery_count for d in ds]
        if counts[0] != 1 or any(b is None or a is None or b <= a
                                 for a, b in zip(counts, counts[1:], strict=False)):
            out.append(f"offset {off}: delivery counts {counts} (to "
                       f"{[d.consumer for d in ds]})")
    return out


def consumer_config(bootstrap: str, group: str, *, explicit: bool, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            "log_level": 3, **extra}


class ShareWorker(threading.Thread):
    """One ShareConsumer polling ``topic`` in its own thread until ``stop`` is set (module
    docstring).

    ``decide(msg)`` gives each record's AcknowledgeType in explicit mode (None:
    implicit mode, every record accepted on the next poll); ``commit``: call
    ``commit_sync`` after each poll that returned records (explicit mode),
    else the acknowledgements ride on the next poll's ShareFetch. A test may
    also drive one from its own thread, without starting it: ``open()``,
    ``step()`` (one poll and its acknowledgements) as often as it likes,
    ``consumer.close()``.
    """

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, log: ShareLog, *,
                 decide: Callable[[object], int] | None = lambda m: AcknowledgeType.ACCEPT,
                 commit: bool = True, config: dict | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.log, self.topic, self.decide, self.commit = log, topic, decide, commit
        self.stop = threading.Event()
        self.conf = consumer_config(bootstrap, group, explicit=decide is not None,
                                    **(config or {}))
        # offset -> (ack type, delivery count) sent, awaiting the broker's answer
        self.pending: dict[int, tuple[str, int | None]] = {}
        self.failure: BaseException | None = None
        self.consumer: ShareConsumer | None = None

    def _on_commit(self, offsets, exc) -> None:
        for tp, offs in offsets.items():
            if tp.topic != self.topic:
                continue
            # the request's error, else this partition's (INVALID_RECORD_STATE...)
            err = str(exc) if exc is not None else None if tp.error is None else str(tp.error)
            for off in offs:
                ack_type, count = self.pending.pop(off, ("ACCEPT", None))
                self.log.acked(self.name, off, ack_type, err, count)

    def open(self) -> ShareConsumer:
        c = self.consumer = ShareConsumer(self.conf)
        c.set_acknowledgement_commit_callback(self._on_commit)
        c.subscribe([self.topic])
        return c

    def run(self) -> None:
        try:
            c = self.open()
            try:
                while not self.stop.is_set():
                    self.step()
                self._commit(c)  # librdkafka's close leaves implicit acceptances unsent
            finally:
                c.close()
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.failure = e

    def step(self) -> None:
        c = self.consumer
        assert c is not None, "open() first"
        try:
            msgs = c.poll(0.3)
        except KafkaException as e:
            self.log.errors.append(f"{self.name} poll: {e}")
            return
        got = False
        for m in msgs:
            if m.error() is not None:
                self.log.errors.append(f"{self.name}: {m.error()}")
                continue
            got = True
            self.log.delivered(self.name, m.offset(), m.delivery_count())
            ack = AcknowledgeType.ACCEPT if self.decide is None else self.decide(m)
            self.pending[m.offset()] = (NAMES[ack], m.delivery_count())
            if self.decide is not None:
                c.acknowledge(m, ack)
        if got and self.commit and self.decide is not None:
            self._commit(c)

    def _commit(self, c: ShareConsumer) -> None:
        try:
            c.commit_sync(30)
        except KafkaException as e:
            self.log.errors.append(f"{self.name} commit_sync: {e}")


def wait_until(cond: Callable[[], bool], timeout: float,
               workers: list[ShareWorker] = ()) -> bool:
    """Until ``cond()`` (True) or ``timeout`` or a worker died (False)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline or not all(w.is_alive() for w in workers):
            return cond()
        time.sleep(0.05)
    return True


def finish(workers: list[ShareWorker]) -> None:
    """Stop and join ``workers``; re-raises the first one's failure."""
    for w in workers:
        w.stop.set()
    for w in workers:
        w.join(60)
    for w in workers:
        if w.failure is not None:
            raise w.failure


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Records ``first`` .. ``first+count-1`` (value = the index in ASCII), in small batches
    (200 records) so that acquisitions can be spread over consumers."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 200,
                  "queue.buffering.max.messages": 1_000_000})
    for i in range(first, first + count):
        while True:
            try:
                p.produce(topic, value=b"%d" % i)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "records not delivered"


def set_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res], request_timeout=30)[res].result(30)


def share_topic(bootstrap: str, topic: str, group: str, records: int) -> None:
    """A new one-partition ``topic`` holding ``records`` records (``produce``), read by
    ``group`` from the earliest offset (share.auto.offset.reset)."""
    create_topic(bootstrap, topic)
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, 0, records)


def describe(bootstrap: str, group: str):
    """ShareGroupDescribe v1 of ``group`` (our codec, raw socket): its DescribedGroup."""
    resp = request_once(bootstrap, 77, 1, ShareGroupDescribeRequest(group_ids=[group]))
    return resp.groups[0]


def wait_members(bootstrap: str, group: str, n: int, timeout: float = 30.0) -> None:
    """Until ShareGroupDescribe shows ``n`` members, each assigned a partition."""
    deadline = time.monotonic() + timeout
    g = None
    while time.monotonic() < deadline:
        g = describe(bootstrap, group)
        assigned = [m for m in g.members
                    if any(tp.partitions for tp in m.assignment.topic_partitions)]
        if g.error_code == 0 and len(g.members) == n and len(assigned) == n:
            return
        time.sleep(0.1)
    raise AssertionError(f"share group {group} never had {n} assigned members: {g}")


def hb(rc, group: str, member: str, epoch: int, topics: list[str] | None = None):
    """One ShareGroupHeartbeat (v1) from a raw client."""
    return rc.request(76, 1, ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics))


def assigned(resp) -> dict:
    """topic id -> sorted partitions of a heartbeat answer's assignment ({} if none)."""
    if resp.assignment is None:
        return {}
    return {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}


def until_assigned(rc, group: str, member: str, epoch: int, topics: list[str] | None = None,
                   timeout: float = 10.0):
    """Heartbeat (``topics`` while the epoch is 0) until the member's share partitions are
    initialized and assigned; the answer that assigned them."""
    deadline = time.monotonic() + timeout
    while True:
        r = hb(rc, group, member, epoch, topics if epoch == 0 else None)
        assert r.error_code == 0, r
        epoch = r.member_epoch
        if r.assignment is not None and r.assignment.topic_partitions:
            return r
        assert time.monotonic() < deadline, "no assignment"
        time.sleep(0.05)
