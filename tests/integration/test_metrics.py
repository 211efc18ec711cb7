"""The metrics endpoint (``metrics.listeners``) of a real broker, scraped as Prometheus
would: exact per-topic counts after a produce/consume run with confluent-kafka
(BrokerTopicMetrics), bytes out equal to the bytes fetched, bytes rejected, a deleted
topic's series gone while the all-topics totals keep their counts; RequestMetrics per
request name (requests by version, error codes, one observation per request in every
histogram, a long poll's wait as remote time, a throttled produce's throttle time),
connections per listener (opened, then closed)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from spool.protocol._generated import AlterClientQuotasRequest, FetchRequest, ProduceRequest
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.fetch_request import FetchPartition, FetchTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import RawClient
from tests.helpers.storage_batches import make_batch

pytestmark = pytest.mark.timeout(120)

BTM = "kafka_server_brokertopicmetrics_"


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("metrics") / "data",
                      {"metrics.listeners": "http://127.0.0.1:0",
                       "auto.create.topics.enable": "false"})
    with b:
        b.metrics_url = f"{b.http_urls['metrics']}/metrics"
        yield b


def scrape(b) -> dict[tuple[str, frozenset], float]:
    """Every sample of ``GET /metrics``: (name, labels) -> value."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain;")
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def topic_value(samples, name: str, topic: str | None) -> float | None:
    return samples.get((BTM + name + "_total",
                        frozenset({("topic", topic)} if topic else ())))


def create(b, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def log_bytes(b, topic: str) -> int:
    return sum(f.stat().st_size for f in Path(b.data_dir, f"{topic}-0").glob("*.log"))


def test_counts_of_a_produce_consume_run(metered) -> None:
    create(metered, "orders")
    start = scrape(metered)
    producer = Producer({"bootstrap.servers": metered.bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce("orders", value=f"order-{i}".encode())
    assert producer.flush(30) == 0
    after_produce = scrape(metered)
    assert topic_value(after_produce, "messagesin", "orders") == 1000
    appended = log_bytes(metered, "orders")  # the batches as they were appended
    assert topic_value(after_produce, "bytesin", "orders") == appended
    assert topic_value(after_produce, "bytesout", "orders") == 0
    assert topic_value(after_produce, "failedproducerequests", "orders") == 0

    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": "g-orders",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    got = 0
    while got < 1000:
        got += len(consumer.consume(1000, timeout=1))
    consumer.close()
    assert got == 1000
    after_consume = scrape(metered)
    # every batch was sent once to the one consumer
    assert topic_value(after_consume, "bytesout", "orders") == appended
    assert topic_value(after_consume, "messagesin", "orders") == 1000
    assert topic_value(after_consume, "totalfetchrequests", "orders") > 0
    for name in ("messagesin", "bytesin", "bytesout", "totalproducerequests",
                 "totalfetchrequests"):  # the all-topics series counts what the topics do
        assert (topic_value(after_consume, name, None) - (topic_value(start, name, None) or 0)
                == topic_value(after_consume, name, "orders")), name


def produce(client: RawClient, topic: str, batch: bytes):
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[
            PartitionProduceData(index=0, records=batch)])])
    return client.request(0, 9, req).responses[0].partition_responses[0]


def fetch(client: RawClient, topic: str, offset: int, max_bytes: int):
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           FetchTopic(topic=topic, partitions=[FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=offset,
                               log_start_offset=-1, partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")
    return client.request(1, 11, req).responses[0].partitions[0]


def test_bytes_out_grows_by_what_was_fetched(metered) -> None:
    create(metered, "raw")
    batches = [make_batch(100, value_size=50, tag=i) for i in range(10)]
    with RawClient(metered.bootstrap) as client:
        for batch in batches:
            assert produce(client, "raw", batch).error_code == 0
        before = scrape(metered)
        assert topic_value(before, "messagesin", "raw") == 1000
        assert topic_value(before, "bytesin", "raw") == sum(map(len, batches))
        assert topic_value(before, "totalproducerequests", "raw") == 10
        # one batch a fetch (KIP-74: the first batch always goes, whatever the limit)
        first = fetch(client, "raw", 0, 1)
        second = fetch(client, "raw", 100, 1)
    fetched = len(first.records) + len(second.records)
    assert fetched == len(batches[0]) + len(batches[1])
    after = scrape(metered)
    assert (topic_value(after, "bytesout", "raw") - topic_value(before, "bytesout", "raw")
            == fetched)
    assert (topic_value(after, "totalfetchrequests", "raw")
            - topic_value(before, "totalfetchrequests", "raw")) == 2


def test_a_batch_over_max_message_bytes_is_rejected_bytes(metered) -> None:
    create(metered, "small", **{"max.message.bytes": "1000"})
    big = make_batch(1, value_size=2000)
    with RawClient(metered.bootstrap) as client:
        assert produce(client, "small", big).error_code == Errors.MESSAGE_TOO_LARGE
        assert produce(client, "small", make_batch(3)).error_code == 0
    samples = scrape(metered)
    assert topic_value(samples, "bytesrejected", "small") == len(big)
    assert topic_value(samples, "messagesin", "small") == 3
    # too large is expected, not a broker failure (Kafka's FailedProduceRequests)
    assert topic_value(samples, "failedproducerequests", "small") == 0
    assert topic_value(samples, "totalproducerequests", "small") == 2


def test_a_deleted_topics_series_goes_and_the_totals_stay(metered) -> None:
    create(metered, "doomed")
    with RawClient(metered.bootstrap) as client:
        assert produce(client, "doomed", make_batch(7)).error_code == 0
    before = scrape(metered)
    assert topic_value(before, "messagesin", "doomed") == 7
    admin = AdminClient({"bootstrap.servers": metered.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(30)
    after = scrape(metered)
    assert topic_value(after, "messagesin", "doomed") is None
    assert topic_value(after, "messagesin", None) == topic_value(before, "messagesin", None)


def test_other_paths_are_not_found(metered) -> None:
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(metered.metrics_url.replace("/metrics", "/nope"), timeout=10)
    assert e.value.code == 404


RM = "kafka_network_requestmetrics_"
HISTOGRAMS = ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems",
              "throttletimems", "responsequeuetimems", "responsesendtimems", "requestbytes")


def sample(samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def grew(before, after, name: str, **labels: str) -> float:
    return sample(after, name, **labels) - sample(before, name, **labels)


def test_request_metrics_per_api(metered) -> None:
    create(metered, "timed")
    before = scrape(metered)
    with RawClient(metered.bootstrap) as client:
        for i in range(5):
            assert produce(client, "timed", make_batch(10, tag=i)).error_code == 0
        assert produce(client, "no-such-topic", make_batch(1)).error_code == \
            Errors.UNKNOWN_TOPIC_OR_PARTITION
        for offset in (0, 10, 20):
            assert fetch(client, "timed", offset, 1 << 20).error_code == 0
        # a long poll at the end of the log: it waits max_wait_ms in purgatory
        req = FetchRequest(replica_id=-1, max_wait_ms=300, min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchTopic(topic="timed", partitions=[FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=50,
                                   log_start_offset=-1, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
        polled = client.request(1, 11, req).responses[0].partitions[0]
        assert polled.error_code == 0 and not polled.records
    after = scrape(metered)
    assert grew(before, after, RM + "requests_total", request="Produce", version="9") == 6
    assert grew(before, after, RM + "errors_total", request="Produce", error="NONE") == 5
    assert grew(before, after, RM + "errors_total", request="Produce",
                error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    # a consumer's Fetch counts as Fetch and as FetchConsumer (Kafka's names)
    for name in ("Fetch", "FetchConsumer"):
        assert grew(before, after, RM + "requests_total", request=name, version="11") == 4
    assert grew(before, after, RM + "requests_total", request="FetchFollower",
                version="11") == 0
    assert grew(before, after, RM + "errors_total", request="Fetch", error="NONE") == 8
    for name, n in (("Produce", 6), ("Fetch", 4), ("FetchConsumer", 4)):
        for h in HISTOGRAMS:  # one observation per request in each
            assert grew(before, after, RM + h + "_count", request=name) == n, (name, h)
    # the long poll's 300 ms is remote time: above the 250 ms bucket, the others below it
    assert grew(before, after, RM + "remotetimems_count", request="FetchConsumer") == 4
    assert grew(before, after, RM + "remotetimems_bucket", request="FetchConsumer",
                le="250.0") == 3
    # (the wait's deadline is on the loop's millisecond clock, read when the poll began, so
    # it can end a few ms short of 300 ms: seen 298.99)
    assert grew(before, after, RM + "remotetimems_sum", request="FetchConsumer") >= 290
    # a request's phases add up to its total time (the long poll's wait is remote, not local)
    for name in ("Produce", "FetchConsumer"):
        phases = sum(grew(before, after, RM + h + "_sum", request=name) for h in (
            "requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems",
            "responsesendtimems"))
        assert phases == pytest.approx(grew(before, after, RM + "totaltimems_sum",
                                            request=name), abs=20), name
        # (within 20 ms: a fetch's purgatory wait is read off the event loop's cached clock)
        # each phase measured: from the frame read to the handler's start is never nothing
        assert grew(before, after, RM + "requestqueuetimems_sum", request=name) > 0, name
    assert sample(after, "kafka_network_requestchannel_requestqueuesize") == 0


def until(metered, ok, what: str):
    """Scrape until ``ok(samples)`` (the broker notices a close on its own time)."""
    deadline = time.monotonic() + 10
    while True:
        samples = scrape(metered)
        if ok(samples):
            return samples
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_connections_per_listener(metered) -> None:
    name = "kafka_server_socket_server_metrics_connection_"
    # the clients of tests before are gone once the broker has seen them close
    before = until(metered, lambda s: sample(s, name + "count", listener="PLAINTEXT") == 0,
                   "connections of earlier tests closed")
    client = RawClient(metered.bootstrap)
    try:
        fetch(client, "raw", 0, 1)  # served: the broker has accepted it
        during = scrape(metered)
        assert grew(before, during, name + "creation_total", listener="PLAINTEXT") == 1
        assert grew(before, during, name + "count", listener="PLAINTEXT") == 1
        assert grew(before, during, name + "close_total", listener="PLAINTEXT") == 0
    finally:
        client.close()
    after = until(metered, lambda s: sample(s, name + "count", listener="PLAINTEXT") == 0,
                  "the connection closed")
    assert grew(before, after, name + "close_total", listener="PLAINTEXT") == 1
    assert grew(before, after, name + "creation_total", listener="PLAINTEXT") == 1
    assert sample(after, "process_resident_memory_bytes") > 0


def test_a_throttled_produce_is_its_throttle_time(metered) -> None:
    """ThrottleTimeMs observes the throttle_time_ms the response carried (client quotas)."""
    create(metered, "throttled")
    with RawClient(metered.bootstrap) as client:
        quota = AlterClientQuotasRequest(entries=[acq.EntryData(
            entity=[acq.EntityData(entity_type="client-id", entity_name="hog")],
            ops=[acq.OpData(key="producer_byte_rate", value=1000.0, remove=False)])],
            validate_only=False)
        assert [e.error_code for e in client.request(49, 1, quota).entries] == [0]
    before = scrape(metered)
    hog = RawClient(metered.bootstrap)
    try:  # 50 kB at 1 kB/s: throttled (the broker mutes this connection afterwards)
        hog.send(0, 9, ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000,
                                      topic_data=[TopicProduceData(name="throttled",
                                      partition_data=[PartitionProduceData(
                                          index=0, records=make_batch(
                                              1, value_size=50_000))])]), client_id="hog")
        _, resp = hog.recv(0, 9)
    finally:
        hog.close()
    assert resp.responses[0].partition_responses[0].error_code == 0
    throttle_ms = resp.throttle_time_ms
    assert throttle_ms > 0
    after = scrape(metered)
    assert grew(before, after, RM + "throttletimems_count", request="Produce") == 1
    assert grew(before, after, RM + "throttletimems_sum", request="Produce") == throttle_ms
