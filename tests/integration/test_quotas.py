"""Client quotas on a real broker process (confluent-kafka clients; quotas set with
AlterClientQuotas): byte rates held, throttle times seen, defaults and Kafka's precedence.

The broker runs with ``quota.window.num=3``: with Kafka's default 11 one-second samples a
client flooding at full speed is held at its quota on average, but its 20-second averages
swing between 0.75x and 1.3x (the burst allowed at start, ``num - 1`` windows' worth, is
kept in one sample, expires at once and is sent again every ~11 s: Kafka's Rate does the
same). Three samples hold every 20-second average within a few percent.

Each test sets quotas for its own client ids and users and removes them after, so that
the order of the tests does not matter.
"""

from __future__ import annotations

import bisect
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spool.protocol._generated import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
    ProduceRequest,
)
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.delete_topics_request import DeleteTopicState
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient, request_once
from tests.helpers.secure_broker import SecureBroker

QUOTA = 1_000_000  # bytes a second
WARM_S = 4.0  # the burst the first windows allow, then the rate settles
MEASURE_S = 20.0
VALUE = b"v" * 1000
BULK_BYTES = 40_000_000
THROTTLING_QUOTA_EXCEEDED = Errors.THROTTLING_QUOTA_EXCEEDED


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = SecureBroker(tmp_path_factory.mktemp("quotas") / "data",
                     listeners=("PLAINTEXT", "SASL_PLAINTEXT"),
                     plain_users={"alice": "alice-secret", "bob": "bob-secret"},
                     overrides={"quota.window.num": "3"})
    b.start()
    yield b
    b.stop()


def alter_quotas(broker, entity: dict[str, str | None], values: dict[str, float | None]):
    """AlterClientQuotas on the PLAINTEXT listener; a value None removes the key."""
    req = AlterClientQuotasRequest(entries=[acq.EntryData(
        entity=[acq.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[acq.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
             for k, v in values.items()])], validate_only=False)
    resp = request_once(broker.bootstrap("PLAINTEXT"), 49, 1, req)
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]


class Timeline:
    """(monotonic time, cumulative bytes) of a client's deliveries, and its throttle events."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.totals: list[int] = []
        self.throttles: list[float] = []  # seconds, from librdkafka's throttle_cb
        self.total = 0

    def add(self, n: int) -> None:
        self.total += n
        self.times.append(time.monotonic())
        self.totals.append(self.total)

    def bytes_by(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        return self.totals[i] if i >= 0 else 0

    def rate(self, start: float, seconds: float) -> float:
        return (self.bytes_by(start + seconds) - self.bytes_by(start)) / seconds


def produce(conf: dict, topic: str, line: Timeline, *, seconds: float | None = None,
            total: int | None = None, batch_size: int = 65536) -> None:
    """Produce VALUE as fast as the client lets us, for ``seconds`` or ``total`` bytes.

    Batches of 64 KiB (the Java producer's default is 16 KiB): with librdkafka's 1 MB, each
    request is a whole second of a 1 MB/s quota and 20-second averages move by 10%."""

    def delivered(err, msg):
        if err is None:
            line.add(len(msg.value()))

    p = Producer({**conf, "linger.ms": 5, "queue.buffering.max.kbytes": 2048,
                  "batch.size": batch_size,
                  "throttle_cb": lambda ev: line.throttles.append(ev.throttle_time)})
    start, sent = time.monotonic(), 0
    while (seconds is None or time.monotonic() - start < seconds) and (
            total is None or sent < total):
        try:
            p.produce(topic, VALUE, on_delivery=delivered)
            sent += len(VALUE)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    assert p.flush(30) == 0


def consume(conf: dict, topic: str, line: Timeline, seconds: float) -> None:
    # fetches of one 64 KiB batch: a throttled fetch is answered empty (Kafka's rule), so
    # the larger one fetch is against quota * window, the more of the quota goes unused
    # (measured: 1 MB fetches 0.73-0.78 MB/s, 256 KiB 0.83-0.87, 64 KiB 0.92-0.93)
    c = Consumer({**conf, "group.id": "quota-reader", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 65536,
                  "throttle_cb": lambda ev: line.throttles.append(ev.throttle_time)})
    c.assign([TopicPartition(topic, 0, 0)])
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            for m in c.consume(1000, timeout=0.2):
                if m.error() is None:
                    line.add(len(m.value()))
    finally:
        c.close()


@pytest.fixture(scope="module")
def byte_rates(broker):
    """One run: a producer limited to 1 MB/s beside an unlimited one, then a consumer
    limited to 1 MB/s reading what the unlimited one wrote."""
    plain = broker.confluent(None, listener="PLAINTEXT")
    alter_quotas(broker, {"client-id": "limited-producer"}, {"producer_byte_rate": QUOTA})
    alter_quotas(broker, {"client-id": "limited-consumer"}, {"consumer_byte_rate": QUOTA})
    lines = {k: Timeline() for k in ("limited", "unlimited", "consumer")}
    run_s = WARM_S + MEASURE_S + 1
    limited = threading.Thread(target=produce, args=(
        {**plain, "client.id": "limited-producer"}, "limited", lines["limited"]),
        kwargs={"seconds": run_s})
    limited.start()
    t0 = time.monotonic()
    produce({**plain, "client.id": "unlimited-producer"}, "bulk", lines["unlimited"],
            total=BULK_BYTES)
    unlimited_s = time.monotonic() - t0
    consume({**plain, "client.id": "limited-consumer"}, "bulk", lines["consumer"], run_s)
    limited.join()
    alter_quotas(broker, {"client-id": "limited-producer"}, {"producer_byte_rate": None})
    alter_quotas(broker, {"client-id": "limited-consumer"}, {"consumer_byte_rate": None})
    return lines, unlimited_s


@pytest.mark.parametrize("client", ["limited", "consumer"])  # the producer, the consumer
def test_a_client_limited_to_1_mb_s_is_held_there_and_sees_throttle_times(byte_rates, client):
    lines, _ = byte_rates
    line = lines[client]
    rate = line.rate(line.times[0] + WARM_S, MEASURE_S)
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate:.0f} B/s over {MEASURE_S} s"
    assert any(t > 0 for t in line.throttles)


def test_an_unlimited_producer_beside_it_is_not_slowed(byte_rates):
    lines, seconds = byte_rates
    line = lines["unlimited"]
    assert line.total == BULK_BYTES
    assert not any(t > 0 for t in line.throttles)
    assert BULK_BYTES / seconds > 2 * QUOTA, f"{BULK_BYTES / seconds:.0f} B/s"



def raw_request(broker, api_key: int, version: int, request, client_id: str):
    """One request from ``client_id`` on a fresh PLAINTEXT connection: its response."""
    c = RawClient(broker.bootstrap("PLAINTEXT"))
    try:
        cid = c.send(api_key, version, request, client_id=client_id)
        got, resp = c.recv(api_key, version)
        assert got == cid
        return resp
    finally:
        c.close()


def throttled(conf: dict, client_id: str, topic: str, nbytes: int = 300_000) -> bool:
    """Whether producing ``nbytes`` (as fast as the client can) gets a throttle time."""
    seen: list[float] = []
    p = Producer({**conf, "client.id": client_id, "linger.ms": 5, "batch.size": 65536,
                  "throttle_cb": lambda ev: seen.append(ev.throttle_time)})
    for _ in range(nbytes // len(VALUE)):
        p.produce(topic, VALUE)
        p.poll(0)
    deadline = time.monotonic() + 30
    while p.flush(0.1) > 0 and not any(t > 0 for t in seen):
        assert time.monotonic() < deadline, "neither delivered nor throttled"
    p.purge()
    p.flush(5)
    return any(t > 0 for t in seen)


def test_defaults_and_precedence_as_kafka_documents(broker):
    slow, fast = 50_000, 1e12
    quotas = [({"user": None}, slow),  # 6: /config/users/<default>
              ({"user": "bob"}, fast),  # 3: /config/users/bob
              ({"user": "alice", "client-id": "vip"}, fast),  # 1
              ({"user": None, "client-id": "slow"}, slow),  # 4
              ({"client-id": "anon-vip"}, fast)]  # 7
    for entity, rate in quotas:
        alter_quotas(broker, entity, {"producer_byte_rate": rate})
    try:
        alice = broker.confluent("alice", listener="SASL_PLAINTEXT")
        bob = broker.confluent("bob", listener="SASL_PLAINTEXT")
        anonymous = broker.confluent(None, listener="PLAINTEXT")
        # the user default applies to every user without a quota of its own...
        assert throttled(alice, "alice-app", "prec")
        # ...a user's own quota beats it, and beats a <default>-user + client-id one
        assert not throttled(bob, "bob-app", "prec")
        assert not throttled(bob, "slow", "prec")
        # user + client-id beats the user level
        assert not throttled(alice, "vip", "prec")
        # on PLAINTEXT the user is ANONYMOUS: the user default beats a client-id quota
        assert throttled(anonymous, "anon-vip", "prec")
    finally:
        for entity, _ in quotas:
            alter_quotas(broker, entity, {"producer_byte_rate": None})


def test_request_percentage_throttles_the_client_at_most_one_window(broker):
    alter_quotas(broker, {"client-id": "busy"}, {"request_percentage": 0.0001})
    try:
        got = raw_request(broker, 3, 12, MetadataRequest(topics=[]), "busy").throttle_time_ms
        assert 0 < got <= 1000  # quota.window.size.seconds: ClientRequestQuotaManager's cap
        assert raw_request(broker, 3, 12, MetadataRequest(topics=[]),
                           "idle").throttle_time_ms == 0
    finally:
        alter_quotas(broker, {"client-id": "busy"}, {"request_percentage": None})


def create_topics(broker, version: int, client_id: str, topics: dict[str, int]):
    req = CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=p,
                                                     replication_factor=1)
                                      for n, p in topics.items()])
    resp = raw_request(broker, 19, version, req, client_id)
    return resp.throttle_time_ms, {t.name: t.error_code for t in resp.topics}


def topic_exists(broker, name: str) -> bool:
    req = MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                          allow_auto_topic_creation=False)
    return raw_request(broker, 3, 12, req, "check").topics[0].error_code == 0


def test_controller_mutation_rate_strict_for_new_versions(broker):
    # 2 partitions a second, a burst of 2 * 11 (controller.quota.window.num) = 22
    alter_quotas(broker, {"client-id": "mutator"}, {"controller_mutation_rate": 2})
    try:
        throttle, errors = create_topics(broker, 7, "mutator", {"m-big": 30, "m-next": 1})
        # the full bucket lets the first topic overdraw it; the next one is refused
        assert errors == {"m-big": 0, "m-next": THROTTLING_QUOTA_EXCEEDED}
        assert throttle > 0
        assert topic_exists(broker, "m-big") and not topic_exists(broker, "m-next")
        resp = raw_request(broker, 20, 6, DeleteTopicsRequest(
            topics=[DeleteTopicState(name="m-big")]), "mutator")
        assert [(r.name, r.error_code) for r in resp.responses] == [
            ("m-big", THROTTLING_QUOTA_EXCEEDED)]
        assert topic_exists(broker, "m-big")
    finally:
        alter_quotas(broker, {"client-id": "mutator"}, {"controller_mutation_rate": None})


def test_controller_mutation_rate_permissive_for_old_versions(broker):
    alter_quotas(broker, {"client-id": "old-mutator"}, {"controller_mutation_rate": 2})
    try:
        throttle, errors = create_topics(broker, 5, "old-mutator", {"o-big": 30, "o-next": 1})
        assert errors == {"o-big": 0, "o-next": 0}
        assert throttle > 0
        assert topic_exists(broker, "o-next")
    finally:
        alter_quotas(broker, {"client-id": "old-mutator"}, {"controller_mutation_rate": None})


def broker_end_open(broker_port: int, client_port: int) -> bool:
    """Whether the broker still has its end of the connection from ``client_port``."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        local, remote = line.split()[1:3]
        if (int(local.split(":")[1], 16), int(remote.split(":")[1], 16)) == (
                broker_port, client_port):
            return True
    return False


def test_a_muted_connection_whose_client_hangs_up_is_closed(broker):
    # 100 kB at 1 kB/s: a throttle of more than a minute (byte-rate throttles have no cap)
    alter_quotas(broker, {"client-id": "hog"}, {"producer_byte_rate": 1000})
    try:
        batch = BatchBuilder()
        batch.append(b"k", b"x" * 100_000, timestamp=1_700_000_000_000)
        c = RawClient(broker.bootstrap("PLAINTEXT"))
        ends = (c.sock.getpeername()[1], c.sock.getsockname()[1])
        c.send(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name="hog", partition_data=[
                PartitionProduceData(index=0, records=batch.build())])]), client_id="hog")
        _, resp = c.recv(0, 9)
        assert resp.throttle_time_ms > 60_000
        assert broker_end_open(*ends)
        c.close()
        deadline = time.monotonic() + 15
        while broker_end_open(*ends):  # the broker closes its end too, not in a minute
            assert time.monotonic() < deadline, "the muted connection outlived its client"
            time.sleep(0.05)
    finally:
        alter_quotas(broker, {"client-id": "hog"}, {"producer_byte_rate": None})
