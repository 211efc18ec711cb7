"""The idempotent producer: retried Produce requests write nothing twice, even when the
broker answered and the answer was lost, and across a broker kill -9."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.protocol._generated import InitProducerIdRequest, ProduceRequest
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.protocol.errors import Errors
from spool.records.builder import BatchBuilder
from tests.helpers.consume import consume_values
from tests.helpers.cut_proxy import CutProxy, free_port
from tests.helpers.raw_client import RawClient


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    return consume_values({"bootstrap.servers": bootstrap, "group.id": "idem",
                           "enable.auto.commit": False}, topic, 1, expected, 20)


@pytest.mark.timeout(120)
def test_lost_produce_responses_are_retried_without_duplicates(fresh_broker, topic_name):
    proxy = CutProxy(free_port(), cut_after={3, 7, 12})
    fresh_broker.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    fresh_broker.start()
    proxy.target = ("127.0.0.1", fresh_broker.port)
    try:
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
        p = Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", "enable.idempotence": True,
                      "linger.ms": 0, "retry.backoff.ms": 50, "reconnect.backoff.ms": 50,
                      "message.timeout.ms": 60_000})
        acked: list[int] = []
        errors: list = []

        def on_delivery(err, msg):
            (errors.append(err) if err else acked.append(msg.offset()))

        for i in range(40):
            p.produce(topic_name, value=b"v%d" % i, on_delivery=on_delivery)
            if i % 3 == 0:
                p.flush(30)
        assert p.flush(30) == 0
        assert proxy.cuts == 3, "the proxy did not lose any Produce response"
        assert not errors
        assert sorted(acked) == list(range(40))
        values = read_all(fresh_broker.bootstrap, topic_name, 40)
        assert values == [b"v%d" % i for i in range(40)]
    finally:
        proxy.close()


def _produce(client: RawClient, topic: str, pid: int, epoch: int, seq: int, n: int = 2):
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(None, b"s%d" % (seq + i), timestamp=int(time.time() * 1000))
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=b.build())])])
    part = client.request(0, 9, req).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


@pytest.mark.timeout(120)
def test_sequence_state_survives_kill_9(fresh_broker, topic_name):
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    c = RawClient(fresh_broker.bootstrap)
    init = c.request(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                                  producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0 and init.producer_epoch == 0
    pid = init.producer_id
    assert _produce(c, topic_name, pid, 0, 0) == (0, 0)
    assert _produce(c, topic_name, pid, 0, 2) == (0, 2)
    assert _produce(c, topic_name, pid, 0, 0) == (0, 0)  # a duplicate: the original offset
    assert _produce(c, topic_name, pid, 0, 9)[0] == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(c, topic_name, pid + 1000, 0, 4)[0] == Errors.UNKNOWN_PRODUCER_ID
    c.close()
    fresh_broker.kill()
    fresh_broker.restart()
    c = RawClient(fresh_broker.bootstrap)
    assert _produce(c, topic_name, pid, 0, 2) == (0, 2)  # still known after the crash
    assert _produce(c, topic_name, pid, 0, 4) == (0, 4)
    # producer ids are never given twice, even across a crash
    again = c.request(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                                   producer_id=-1, producer_epoch=-1))
    assert again.producer_id > pid
    c.close()
    assert len(read_all(fresh_broker.bootstrap, topic_name, 6)) == 6
