"""Partition limits: no request can create more partitions than the broker can hold,
creating partitions never stalls other clients, and a kill -9 at any point of a
creation leaves a broker that starts again (issue 12)."""

from __future__ import annotations

import json
import resource
import select
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from spool.protocol._generated import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetCommitRequest,
)
from spool.protocol._generated.create_partitions_request import CreatePartitionsTopic
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient


def admin_of(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_error(admin: AdminClient, topic: str, partitions: int) -> KafkaException | None:
    """Create ``topic``; None when created, else the client's exception."""
    try:
        admin.create_topics([NewTopic(topic, partitions)])[topic].result(60)
    except KafkaException as e:
        return e
    return None


def raw_create_topics(bootstrap: str, topics: dict[str, int]) -> dict[str, tuple[int, str]]:
    """CreateTopics over the raw client (librdkafka refuses counts over 100,000 itself)."""
    c = RawClient(bootstrap, timeout=60)
    try:
        resp = c.request(19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name=n, num_partitions=k, replication_factor=1, assignments=[],
                           configs=[]) for n, k in topics.items()],
            timeout_ms=60000, validate_only=False))
        return {t.name: (t.error_code, t.error_message) for t in resp.topics}
    finally:
        c.close()


def raw_create_partitions(bootstrap: str, topic: str, count: int) -> tuple[int, str]:
    c = RawClient(bootstrap, timeout=60)
    try:
        resp = c.request(37, 3, CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=topic, count=count, assignments=None)],
            timeout_ms=60000, validate_only=False))
        return resp.results[0].error_code, resp.results[0].error_message
    finally:
        c.close()


def metadata(bootstrap: str, *topics: str, create: bool = False):
    c = RawClient(bootstrap, timeout=30)
    try:
        req = MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=create)
        return {t.name: t for t in c.request(3, 9, req).topics}
    finally:
        c.close()


def api_versions_answered(bootstrap: str) -> bool:
    c = RawClient(bootstrap, timeout=30)
    try:
        return c.request(18, 3, ApiVersionsRequest(client_software_name="probe",
                                                   client_software_version="1")).error_code == 0
    finally:
        c.close()


def produce_one(bootstrap: str, topic: str, partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30000})
    errors = []
    p.produce(topic, value=b"v", partition=partition,
              on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None]


def test_create_topics_of_a_million_partitions_is_refused(fresh_broker):
    broker = fresh_broker.start()

    code, message = raw_create_topics(broker.bootstrap, {"million": 1_000_000})["million"]
    assert code == Errors.POLICY_VIOLATION
    assert "excessively large" in message
    # as Kafka's controller: the request's records count together, 2 x 6,000 is too many
    assert {n: r[0] for n, r in raw_create_topics(
        broker.bootstrap, {"half-a": 6000, "half-b": 6000}).items()} == {
        "half-a": Errors.POLICY_VIOLATION, "half-b": Errors.POLICY_VIOLATION}

    assert create_error(admin_of(broker), "small", 1) is None
    code, message = raw_create_partitions(broker.bootstrap, "small", 1_000_000)
    assert code == Errors.POLICY_VIOLATION

    topics = metadata(broker.bootstrap, "million", "half-a", "half-b", "small")
    assert {n: t.error_code for n, t in topics.items()} == {
        "million": Errors.UNKNOWN_TOPIC_OR_PARTITION, "half-a": Errors.UNKNOWN_TOPIC_OR_PARTITION,
        "half-b": Errors.UNKNOWN_TOPIC_OR_PARTITION, "small": 0}
    assert len(topics["small"].partitions) == 1
    assert api_versions_answered(broker.bootstrap)

    broker.kill()
    broker.start()
    topics = metadata(broker.bootstrap, "million", "small")
    assert topics["million"].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert len(topics["small"].partitions) == 1
    produce_one(broker.bootstrap, "small", 0)


def test_a_client_creating_topics_until_refused(fresh_broker):
    fresh_broker.overrides["max.broker.partitions"] = "350"
    broker = fresh_broker.start()
    admin = admin_of(broker)

    # 150 of the 350 stay free for __consumer_offsets, __transaction_state and
    # __share_group_state (50 each)
    created, refusal = [], None
    for i in range(30):
        refusal = create_error(admin, f"filler-{i}", 20)
        if refusal is not None:
            break
        created.append(f"filler-{i}")
    assert len(created) == 10
    assert refusal is not None and refusal.args[0].code() == Errors.POLICY_VIOLATION
    assert "max.broker.partitions=350" in refusal.args[0].str()

    # auto-creation and CreatePartitions obey the same limit
    assert metadata(broker.bootstrap, "auto-one", create=True)["auto-one"].error_code == (
        Errors.POLICY_VIOLATION)
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions("filler-0", 21)])["filler-0"].result(30)
    assert info.value.args[0].code() == Errors.POLICY_VIOLATION

    # the broker still serves everyone, and the room kept lets the coordinators start
    assert api_versions_answered(broker.bootstrap)
    produce_one(broker.bootstrap, "filler-9", 19)
    c = RawClient(broker.bootstrap, timeout=60)
    for key_type, key in ((0, "a-group"), (1, "a-txn")):
        for _ in range(100):
            r = c.request(10, 3, FindCoordinatorRequest(key=key, key_type=key_type))
            if r.error_code != Errors.COORDINATOR_NOT_AVAILABLE:
                break
        assert r.error_code == 0
    c.close()

    broker.kill()
    broker.start()
    topics = metadata(broker.bootstrap, *created, "auto-one")
    assert [len(topics[t].partitions) for t in created] == [20] * 10
    assert topics["auto-one"].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert create_error(admin_of(broker), "one-more", 1).args[0].code() == Errors.POLICY_VIOLATION
    produce_one(broker.bootstrap, "filler-0", 0)


def test_other_clients_are_served_while_partitions_are_created_then_kill_9(fresh_broker):
    broker = fresh_broker.start()
    creator = RawClient(broker.bootstrap, timeout=120)
    creator.send(19, 7, CreateTopicsRequest(
        topics=[CreatableTopic(name="wide", num_partitions=2000, replication_factor=1,
                               assignments=[], configs=[])],
        timeout_ms=120000, validate_only=False))

    def creation_answered() -> bool:
        return bool(select.select([creator.sock], [], [], 0)[0])

    # wait until the creation has begun (the topic is in the metadata), then probe
    probe = RawClient(broker.bootstrap, timeout=30)
    for _ in range(10_000):
        topics = probe.request(3, 9, MetadataRequest(
            topics=[MetadataRequestTopic(name="wide")], allow_auto_topic_creation=False)).topics
        if topics[0].error_code == 0:
            break
    assert topics[0].error_code == 0
    answered = 0
    while answered < 5 and not creation_answered():
        assert probe.request(18, 3, ApiVersionsRequest(
            client_software_name="probe", client_software_version="1")).error_code == 0
        answered += 1
    assert answered == 5, "the broker answered nobody while it created the partitions"
    probe.close()

    broker.kill()  # most likely in the middle of the creation
    creator.close()
    broker.start(timeout=120)
    topics = metadata(broker.bootstrap, "wide")
    parts = topics["wide"].partitions
    assert len(parts) == 2000
    assert [p.error_code for p in parts] == [0] * 2000
    produce_one(broker.bootstrap, "wide", 1999)


PARTITION_RECORD = (  # json.dumps(record, sort_keys=True) of the old code, formatted faster
    '{"isr": [0], "leader": 0, "leader_epoch": 0, "partition": %d, "replicas": [0], '
    '"topic_id": "%s", "type": "PartitionRecord", "v": 0}')


def test_auto_creation_under_a_low_descriptor_limit_is_refused_before_it_runs_out(fresh_broker):
    # ulimit -n 1024: the broker once died of EMFILE at the ~200th auto-created topic
    fresh_broker.preexec_fn = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    broker = fresh_broker.start()
    c = RawClient(broker.bootstrap, timeout=60)
    refused = None
    for i in range(1000):
        t = c.request(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name=f"auto-{i}")],
                                            allow_auto_topic_creation=True)).topics[0]
        if t.error_code != 0:
            refused = (i, t.error_code)
            break
    c.close()
    assert refused is not None and refused[1] == Errors.POLICY_VIOLATION
    assert refused[0] >= 200  # more than before, and then a clean refusal
    assert api_versions_answered(broker.bootstrap)  # new connections are still accepted
    produce_one(broker.bootstrap, f"auto-{refused[0] - 1}", 0)
    c = RawClient(broker.bootstrap, timeout=60)
    for _ in range(100):  # the room kept for __consumer_offsets
        r = c.request(10, 3, FindCoordinatorRequest(key="g", key_type=0))
        if r.error_code != Errors.COORDINATOR_NOT_AVAILABLE:
            break
    assert r.error_code == 0
    c.close()

    broker.kill()
    broker.start()
    topics = metadata(broker.bootstrap, "auto-0", f"auto-{refused[0] - 1}", f"auto-{refused[0]}")
    assert [t.error_code for t in topics.values()] == [0, 0, Errors.UNKNOWN_TOPIC_OR_PARTITION]


def assert_others_served_while_created(probe: RawClient, waiting: RawClient, topic: str) -> None:
    """Once ``topic`` shows in the metadata (its creation has begun), ``probe`` is answered
    five times before ``waiting``, whose request made the broker create it, is answered."""
    for _ in range(10_000):  # the creation has begun once the topic is in the metadata
        topics = probe.request(3, 9, MetadataRequest(
            topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)).topics
        if topics[0].error_code == 0:
            break
    assert topics[0].error_code == 0
    answered = 0
    while answered < 5 and not select.select([waiting.sock], [], [], 0)[0]:
        assert probe.request(18, 3, ApiVersionsRequest(
            client_software_name="probe", client_software_version="1")).error_code == 0
        answered += 1
    assert answered == 5, f"the broker answered nobody while it created {topic}"


def test_find_coordinator_creates_its_topic_off_the_event_loop(fresh_broker):
    fresh_broker.overrides["offsets.topic.num.partitions"] = "1500"
    broker = fresh_broker.start()
    finder = RawClient(broker.bootstrap, timeout=120)
    finder.send(10, 3, FindCoordinatorRequest(key="a-group", key_type=0))
    probe = RawClient(broker.bootstrap, timeout=30)
    assert_others_served_while_created(probe, finder, "__consumer_offsets")
    assert finder.recv(10, 3)[1].error_code in (0, Errors.COORDINATOR_NOT_AVAILABLE)
    probe.close()
    finder.close()


def offset_commit() -> tuple[int, int, object]:
    """(api key, version, request): a standalone commit (generation -1) of committed-0."""
    return 8, 8, OffsetCommitRequest(
        group_id="a-group", generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=[OffsetCommitRequestTopic(name="committed", partitions=[
            OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                         committed_metadata="")])])


def init_transactional_producer() -> tuple[int, int, object]:
    return 22, 4, InitProducerIdRequest(transactional_id="a-txn", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1)


def error_of(api_key: int, resp) -> int:
    if api_key == 8:
        return resp.topics[0].partitions[0].error_code
    return resp.error_code


RETRIABLE = (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
             Errors.NOT_COORDINATOR)


@pytest.mark.parametrize("topic,key,first", [
    ("__consumer_offsets", "offsets.topic.num.partitions", offset_commit),
    ("__transaction_state", "transaction.state.log.num.partitions", init_transactional_producer),
])
def test_a_first_coordinator_request_creates_its_topic_off_the_event_loop(
        fresh_broker, topic, key, first):
    # a client may skip FindCoordinator: its OffsetCommit / InitProducerId must not make the
    # broker create thousands of partitions on the event loop, stalling every other client
    fresh_broker.overrides[key] = "2000"
    broker = fresh_broker.start()
    assert raw_create_topics(broker.bootstrap, {"committed": 1})["committed"][0] == 0
    api_key, version, request = first()
    client = RawClient(broker.bootstrap, timeout=120)
    client.send(api_key, version, request)
    probe = RawClient(broker.bootstrap, timeout=30)
    assert_others_served_while_created(probe, client, topic)
    probe.close()

    code = error_of(api_key, client.recv(api_key, version)[1])
    for _ in range(1000):  # as a client: retry while the coordinator is not ready
        if code not in RETRIABLE:
            break
        code = error_of(api_key, client.request(api_key, version, request))
    assert code == 0
    client.close()
    topics = metadata(broker.bootstrap, topic)
    assert [p.error_code for p in topics[topic].partitions] == [0] * 2000


def write_legacy_metadata(data_dir, topics: dict[str, int]) -> None:
    """A metadata log as Spool before the limits wrote it: one batch per topic, however
    many partitions (1,000,000 made a batch of ~190 MB)."""
    from spool.storage.manager import LogManager

    logs = LogManager([data_dir], load=False)
    mlog = logs.open_metadata_log()
    for name, n in topics.items():
        tid = str(uuid.uuid4())
        b = BatchBuilder(0)
        topic = {"type": "TopicRecord", "name": name, "topic_id": tid, "v": 0}
        b.append(b"TopicRecord", json.dumps(topic, sort_keys=True).encode(), timestamp=1)
        for p in range(n):
            b.append(b"PartitionRecord", (PARTITION_RECORD % (p, tid)).encode(), timestamp=1)
        mlog.append(bytearray(b.build()))
    mlog.flush()
    logs.shutdown()


def test_a_metadata_log_with_a_huge_batch_from_before_the_limits_still_starts(fresh_broker):
    # 400,000 partitions: one batch of ~70 MB, beyond the 64 MiB a fetched batch may inflate to
    write_legacy_metadata(fresh_broker.data_dir, {"kept": 1, "huge": 400_000})
    fresh_broker.overrides["max.broker.partitions"] = "200"
    broker = fresh_broker.start(timeout=180)
    assert "topic huge lists 400000 partitions" in broker.log_tail(20000)

    produce_one(broker.bootstrap, "kept", 0)
    admin = admin_of(broker)
    assert create_error(admin, "new", 1).args[0].code() == Errors.POLICY_VIOLATION
    admin.delete_topics(["huge"])["huge"].result(60)  # the way out the log names
    assert create_error(admin, "new", 1) is None

    broker.kill()
    broker.start(timeout=180)
    topics = metadata(broker.bootstrap, "kept", "huge", "new")
    assert {n: len(t.partitions) for n, t in topics.items()} == {"kept": 1, "huge": 0, "new": 1}
    assert topics["huge"].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
