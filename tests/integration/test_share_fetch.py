"""ShareFetch (78) and ShareAcknowledge (79) against a real broker, from a raw client.

Sessions and epochs, acquisition (records and AcquiredRecords), acknowledgement
(ACCEPT, RELEASE -> delivery count 2), lock expiry, records released when a session's
connection goes, long polling woken by an append, and the per-request and per-partition
errors, as Kafka's KafkaApis / SharePartitionManager answer them. One broker for the
module; each test has its own topic and group.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from spool.protocol._generated import (
    AlterShareGroupOffsetsRequest,
    MetadataRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from spool.protocol._generated import alter_share_group_offsets_request as alterreq
from spool.protocol._generated import share_acknowledge_request as ackreq
from spool.protocol._generated import share_fetch_request as freq
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.errors import Errors
from spool.records.batch import iter_batches
from spool.records.record import iter_records
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient
from tests.helpers.share import until_assigned

LOCK_MS = 1000
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("share-fetch")
    with BrokerProcess(d / "data", {
        "group.share.min.record.lock.duration.ms": str(LOCK_MS),
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "num.partitions": "1",
    }) as b:
        yield b


def make_topic(bootstrap: str, n: int, group: str) -> tuple[str, uuid.UUID]:
    """A new topic whose share-partition for ``group`` starts at 0 (share.auto.offset.reset
    is latest: the group's first fetch comes before the ``n`` records)."""
    name = f"sf-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    with RawClient(bootstrap) as rc:
        md = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                               allow_auto_topic_creation=False))
        tid = md.topics[0].topic_id
        assert part(fetch(rc, group, "starter", 0, tid, max_wait_ms=0)).acquired_records == []
    if n:
        produce(bootstrap, name, [f"v{i}".encode() for i in range(n)])
    return name, tid


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """The values in one batch: the producer knows the topic before the first record (one
    produced before the metadata waits in librdkafka's unassigned queue and can start a
    second batch) and lingers long enough for a loaded machine."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    p.list_topics(topic, timeout=10)
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(15) == 0


def fetch(rc: RawClient, group: str, member: str, epoch: int, tid: uuid.UUID | None = None,
          *, acks=(), max_wait_ms: int = 100, forget: uuid.UUID | None = None,
          version: int = 1, renew: bool = False, max_records: int = 500, mode: int = 0):
    topics = []
    if tid is not None:
        topics = [freq.FetchTopic(topic_id=tid, partitions=[freq.FetchPartition(
            partition_index=0, acknowledgement_batches=[
                freq.AcknowledgementBatch(f, la, [t]) for f, la, t in acks])])]
    return rc.request(78, version, ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
        min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
        share_acquire_mode=mode, topics=topics, is_renew_ack=renew, forgotten_topics_data=[freq.ForgottenTopic(topic_id=forget, partitions=[0])]
        if forget else []))


def acknowledge(rc: RawClient, group: str, member: str, epoch: int, tid: uuid.UUID, acks,
                version: int = 1):
    return rc.request(79, version, ShareAcknowledgeRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, topics=[
            ackreq.AcknowledgeTopic(topic_id=tid, partitions=[ackreq.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    ackreq.AcknowledgementBatch(f, la, [t]) for f, la, t in acks])])]))


def part(resp):
    """The one partition of a one-partition answer."""
    assert resp.error_code == 0, resp
    [t] = resp.responses
    [p] = t.partitions
    return p


def values(p) -> dict[int, bytes]:
    """offset -> value of the records in the answer that this member acquired."""
    owned = {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
    data = bytes(p.records or b"")
    return {r.offset: r.value for pos, _ in iter_batches(data)
            for r in iter_records(data, pos) if r.offset in owned}


def counts(p) -> dict[int, int]:
    return {o: a.delivery_count for a in p.acquired_records
            for o in range(a.first_offset, a.last_offset + 1)}


def test_one_member_acquires_all_and_accepts(broker):
    _, tid = make_topic(broker.bootstrap, 10, "g-all")
    with RawClient(broker.bootstrap) as rc:
        resp = fetch(rc, "g-all", "m1", 0, tid)
        assert resp.acquisition_lock_timeout_ms == LOCK_MS
        p = part(resp)
        assert p.error_code == 0
        assert values(p) == {i: f"v{i}".encode() for i in range(10)}
        assert set(counts(p).values()) == {1}
        # accept all, piggy-backed on the next fetch: nothing is left to acquire
        resp = fetch(rc, "g-all", "m1", 1, tid, acks=[(0, 9, ACCEPT)])
        p = part(resp)
        assert p.acknowledge_error_code == 0
        assert p.acquired_records == []
        # accepted records are never delivered again, not even after the lock duration
        resp = fetch(rc, "g-all", "m1", 2, max_wait_ms=LOCK_MS + 500)
        assert resp.error_code == 0 and resp.responses == []


def test_members_split_records_and_release_redelivers(broker):
    name, tid = make_topic(broker.bootstrap, 6, "g-split")
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        pa = part(fetch(a, "g-split", "ma", 0, tid))
        assert sorted(values(pa)) == list(range(6))
        pb = part(fetch(b, "g-split", "mb", 0, tid))  # everything is held by ma
        assert pb.error_code == 0 and pb.acquired_records == []
        # ma cannot acknowledge for mb and vice versa (here piggy-backed on a ShareFetch)
        pb = part(fetch(b, "g-split", "mb", 1, tid, acks=[(0, 2, ACCEPT)], max_wait_ms=0))
        assert (pb.error_code, pb.acknowledge_error_code) == (0, Errors.INVALID_RECORD_STATE)
        r = acknowledge(a, "g-split", "ma", 1, tid, [(0, 2, ACCEPT), (3, 5, RELEASE)],
                        version=2)
        assert part(r).error_code == 0 and r.acquisition_lock_timeout_ms == LOCK_MS
        pb = part(fetch(b, "g-split", "mb", 2, max_wait_ms=5000, version=2))
        assert values(pb) == {3: b"v3", 4: b"v4", 5: b"v5"}
        assert counts(pb) == {3: 2, 4: 2, 5: 2}
        # a new record goes to whoever asks first; a v2 renew-only request fetches nothing
        produce(broker.bootstrap, name, [b"v6"])
        resp = fetch(a, "g-split", "ma", 2, version=2, renew=True)
        assert resp.error_code == 0 and resp.responses == []
        pa = part(fetch(a, "g-split", "ma", 3, max_wait_ms=5000))
        assert values(pa) == {6: b"v6"}


def test_long_poll_answers_on_append(broker):
    name, tid = make_topic(broker.bootstrap, 0, "g-poll")
    with RawClient(broker.bootstrap) as rc:
        p = part(fetch(rc, "g-poll", "m", 0, tid))
        assert p.acquired_records == []
        cid = rc.send(78, 1, ShareFetchRequest(
            group_id="g-poll", member_id="m", share_session_epoch=1, max_wait_ms=20000,
            min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500))
        produce(broker.bootstrap, name, [b"late"])
        got, resp = rc.recv(78, 1)
        assert got == cid
        assert values(part(resp)) == {0: b"late"}


def test_lock_expiry_redelivers_with_count_two(broker):
    _, tid = make_topic(broker.bootstrap, 3, "g-lock")
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        pa = part(fetch(a, "g-lock", "ma", 0, tid))
        assert sorted(values(pa)) == [0, 1, 2]
        # mb waits; ma's lock expires after LOCK_MS and the records come to mb
        pb = part(fetch(b, "g-lock", "mb", 0, tid, max_wait_ms=15000))
        assert counts(pb) == {0: 2, 1: 2, 2: 2}
        # ma's acknowledgement comes too late
        r = acknowledge(a, "g-lock", "ma", 1, tid, [(0, 2, ACCEPT)])
        assert part(r).error_code == Errors.INVALID_RECORD_STATE


def test_closed_connection_releases_the_members_records(broker):
    _, tid = make_topic(broker.bootstrap, 4, "g-close")
    a = RawClient(broker.bootstrap)
    pa = part(fetch(a, "g-close", "ma", 0, tid))
    assert sorted(values(pa)) == [0, 1, 2, 3]
    a.close()
    with RawClient(broker.bootstrap) as b:
        pb = part(fetch(b, "g-close", "mb", 0, tid, max_wait_ms=LOCK_MS // 2))
        assert counts(pb) == {0: 2, 1: 2, 2: 2, 3: 2}


def test_final_epoch_releases_and_closes_the_session(broker):
    _, tid = make_topic(broker.bootstrap, 4, "g-final")
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        part(fetch(a, "g-final", "ma", 0, tid))
        r = acknowledge(a, "g-final", "ma", -1, tid, [(0, 1, ACCEPT)])
        assert part(r).error_code == 0
        pb = part(fetch(b, "g-final", "mb", 0, tid, max_wait_ms=LOCK_MS // 2))
        assert counts(pb) == {2: 2, 3: 2}
        # the session is gone
        assert fetch(a, "g-final", "ma", 1).error_code == Errors.SHARE_SESSION_NOT_FOUND
        assert acknowledge(a, "g-final", "ma", -1, tid, [(0, 0, ACCEPT)]).error_code == \
            Errors.SHARE_SESSION_NOT_FOUND


def test_session_epoch_errors(broker):
    _, tid = make_topic(broker.bootstrap, 1, "g-ep")
    with RawClient(broker.bootstrap) as rc:
        # no session yet
        assert fetch(rc, "g-ep", "m", 1, tid).error_code == Errors.SHARE_SESSION_NOT_FOUND
        assert acknowledge(rc, "g-ep", "m", 1, tid, [(0, 0, ACCEPT)]).error_code == \
            Errors.SHARE_SESSION_NOT_FOUND
        # acknowledgements cannot open a session
        assert fetch(rc, "g-ep", "m", 0, tid, acks=[(0, 0, ACCEPT)]).error_code == \
            Errors.INVALID_REQUEST
        assert acknowledge(rc, "g-ep", "m", 0, tid, [(0, 0, ACCEPT)]).error_code == \
            Errors.INVALID_SHARE_SESSION_EPOCH
        part(fetch(rc, "g-ep", "m", 0, tid))
        assert fetch(rc, "g-ep", "m", 5).error_code == Errors.INVALID_SHARE_SESSION_EPOCH
        assert fetch(rc, "g-ep", "m", 1).error_code == 0
        # a replayed epoch is refused; the next one is served
        assert acknowledge(rc, "g-ep", "m", 1, tid, [(0, 0, ACCEPT)]).error_code == \
            Errors.INVALID_SHARE_SESSION_EPOCH
        p = part(acknowledge(rc, "g-ep", "m", 2, tid, [(0, 0, ACCEPT)]))
        assert p.error_code == 0
        # a new initial request replaces the session
        assert fetch(rc, "g-ep", "m", 0, tid).error_code == 0
        assert fetch(rc, "g-ep", "m", 1).error_code == 0


def test_partition_errors(broker):
    _, tid = make_topic(broker.bootstrap, 2, "g-err")
    unknown = uuid.uuid4()
    with RawClient(broker.bootstrap) as rc:
        resp = rc.request(78, 1, ShareFetchRequest(
            group_id="g-err", member_id="m", share_session_epoch=0, max_wait_ms=0,
            min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=[
                freq.FetchTopic(topic_id=unknown, partitions=[freq.FetchPartition(0)]),
                freq.FetchTopic(topic_id=tid, partitions=[freq.FetchPartition(7)])]))
        assert resp.error_code == 0
        got = {(t.topic_id, p.partition_index): p.error_code
               for t in resp.responses for p in t.partitions}
        assert got == {(unknown, 0): Errors.UNKNOWN_TOPIC_ID,
                       (tid, 7): Errors.UNKNOWN_TOPIC_OR_PARTITION}
        # malformed acknowledgements: per partition INVALID_REQUEST
        part(fetch(rc, "g-err", "m", 0, tid))
        r = acknowledge(rc, "g-err", "m", 1, tid, [(1, 0, ACCEPT)])
        assert part(r).error_code == Errors.INVALID_REQUEST
        r = acknowledge(rc, "g-err", "m", 2, tid, [(0, 1, 9)])
        assert part(r).error_code == Errors.INVALID_REQUEST
        # missing member id: the whole request
        assert fetch(rc, "g-err3", "", 0, tid).error_code == Errors.INVALID_REQUEST
        # a share-partition this group never fetched here holds nothing to acknowledge
        assert fetch(rc, "g-err4", "m", 0).error_code == 0
        r = acknowledge(rc, "g-err4", "m", 1, tid, [(0, 0, ACCEPT)])
        assert part(r).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_forgotten_partition_is_no_longer_fetched(broker):
    name, tid = make_topic(broker.bootstrap, 0, "g-forget")
    with RawClient(broker.bootstrap) as rc:
        part(fetch(rc, "g-forget", "m", 0, tid))
        resp = fetch(rc, "g-forget", "m", 1, forget=tid)
        assert resp.error_code == 0 and resp.responses == []
        produce(broker.bootstrap, name, [b"x"])
        resp = fetch(rc, "g-forget", "m", 2, max_wait_ms=300)
        assert resp.error_code == 0 and resp.responses == []


def test_read_committed_acquires_committed_records_only(broker):
    name, tid = make_topic(broker.bootstrap, 0, "g-rc")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "g-rc", incremental_configs=[ConfigEntry(
        "share.isolation.level", "read_committed",
        incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{tid}"})
    p.init_transactions(15)
    for commit, batch in ((False, [b"a0", b"a1"]), (True, [b"c0", b"c1"])):
        p.begin_transaction()
        for v in batch:
            p.produce(name, v, partition=0)
        assert p.flush(15) == 0  # (an abort drops what is not sent yet)
        (p.commit_transaction if commit else p.abort_transaction)(15)
    p.begin_transaction()  # still open: offset 6 is above the last stable offset
    p.produce(name, b"open", partition=0)
    assert p.flush(15) == 0
    # offsets: 0-1 aborted, 2 abort marker, 3-4 committed, 5 commit marker, 6 open
    with RawClient(broker.bootstrap) as rc:
        pr = part(fetch(rc, "g-rc", "m", 0, tid, max_wait_ms=2000))
        assert values(pr) == {3: b"c0", 4: b"c1"}
        assert [(a.first_offset, a.last_offset) for a in pr.acquired_records] == [(3, 4)]
    p.abort_transaction(15)


def join(rc: RawClient, group: str, member: str, topic: str) -> int:
    """ShareGroupHeartbeat until the member is assigned (its share-partition state is
    initialized); its member epoch."""
    return until_assigned(rc, group, member, 0, [topic], timeout=15).member_epoch


def test_members_of_a_share_group_only(broker):
    """A group coordinated here: only its members fetch; another kind of group's id is
    GROUP_ID_NOT_FOUND. (A group this broker does not know is not checked: in a cluster
    its coordinator may be elsewhere.)"""
    name, tid = make_topic(broker.bootstrap, 1, "g-members")
    with RawClient(broker.bootstrap) as rc:
        join(rc, "g-members", "m1", name)
        assert fetch(rc, "g-members", "m1", 0, tid).error_code == 0
        assert fetch(rc, "g-members", "stranger", 0, tid).error_code == Errors.UNKNOWN_MEMBER_ID
        assert acknowledge(rc, "g-members", "stranger", 1, tid, [(0, 0, ACCEPT)]).error_code \
            == Errors.UNKNOWN_MEMBER_ID
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-classic",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([name])
        while not c.assignment():
            c.poll(0.2)
    finally:
        c.close()
    with RawClient(broker.bootstrap) as rc:
        assert fetch(rc, "g-classic", "m1", 0, tid).error_code == Errors.GROUP_ID_NOT_FOUND


def test_offsets_reset_of_an_empty_group_is_served(broker):
    """The group's last session ending drops its share-partitions here: an offsets reset
    made while the group is empty is what the next member gets (Kafka's onGroupEmpty)."""
    name = f"sf-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    res = ConfigResource(ResourceType.GROUP, "g-reset", incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    produce(broker.bootstrap, name, [f"v{i}".encode() for i in range(10)])
    with RawClient(broker.bootstrap) as rc:
        md = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                               allow_auto_topic_creation=False))
        tid = md.topics[0].topic_id

        join(rc, "g-reset", "m1", name)
        p = part(fetch(rc, "g-reset", "m1", 0, tid))
        assert counts(p) == {o: 1 for o in range(10)}
        r = acknowledge(rc, "g-reset", "m1", -1, tid, [(0, 4, ACCEPT)])  # and closes
        assert part(r).error_code == 0
        r = rc.request(76, 1, ShareGroupHeartbeatRequest(
            group_id="g-reset", member_id="m1", member_epoch=-1))
        assert r.error_code == 0
        alter = rc.request(91, 0, AlterShareGroupOffsetsRequest(group_id="g-reset", topics=[
            alterreq.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
                alterreq.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                start_offset=8)])]))
        assert [p.error_code for t in alter.responses for p in t.partitions] == [0], alter
        join(rc, "g-reset", "m2", name)
        p = part(fetch(rc, "g-reset", "m2", 0, tid))
        assert counts(p) == {8: 1, 9: 1}


def test_record_limit_mode_cuts_batches(broker):
    """v2 share_acquire_mode 1 (record_limit): never more than max_records, even inside one
    batch; mode 0 takes whole batches (the 10 records are one batch)."""
    _, tid = make_topic(broker.bootstrap, 10, "g-limit")
    with RawClient(broker.bootstrap) as rc:
        p = part(fetch(rc, "g-limit", "m", 0, tid, version=2, max_records=3, mode=1))
        assert counts(p) == {0: 1, 1: 1, 2: 1}
        # each fetch accepts what the one before acquired: a lock (1 s) expiring on a loaded
        # machine would otherwise hand those records out again first
        p = part(fetch(rc, "g-limit", "m", 1, tid, version=2, max_records=4, mode=1,
                       acks=[(0, 2, ACCEPT)]))
        assert counts(p) == {3: 1, 4: 1, 5: 1, 6: 1}
        p = part(fetch(rc, "g-limit", "m", 2, tid, version=2, max_records=1, mode=0,
                       acks=[(3, 6, ACCEPT)]))
        assert counts(p) == {7: 1, 8: 1, 9: 1}


def test_records_deleted_below_the_start_are_no_longer_delivered(broker):
    name, tid = make_topic(broker.bootstrap, 6, "g-trunc")
    with RawClient(broker.bootstrap) as rc:
        p = part(fetch(rc, "g-trunc", "m", 0, tid))
        assert sorted(values(p)) == list(range(6))
        assert part(acknowledge(rc, "g-trunc", "m", 1, tid, [(0, 5, RELEASE)])).error_code == 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        [f] = admin.delete_records([TopicPartition(name, 0, 4)]).values()
        assert f.result(15).low_watermark == 4  # the new log start offset
        # the released records below the new log start are gone; the rest come again
        p = part(fetch(rc, "g-trunc", "m", 2, max_wait_ms=5000))
        assert values(p) == {4: b"v4", 5: b"v5"} and counts(p) == {4: 2, 5: 2}


def test_the_groups_max_record_locks_bounds_the_records_in_flight(broker):
    name, tid = make_topic(broker.bootstrap, 0, "g-locks")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "g-locks", incremental_configs=[ConfigEntry(
        "share.partition.max.record.locks", "100", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 1})
    for i in range(150):  # one record per batch: the limit falls on a batch boundary
        p.produce(name, f"v{i}".encode(), partition=0)
    assert p.flush(15) == 0
    with RawClient(broker.bootstrap) as rc:
        acquired = part(fetch(rc, "g-locks", "m", 0, tid, max_wait_ms=2000))
        assert sorted(values(acquired)) == list(range(100))
