"""A throttled connection is muted, not only told (KIP-219): on a real broker, a client over
its producer_byte_rate gets ``throttle_time_ms`` in its Produce response and the broker then
reads nothing more from that connection until the throttle time has passed, whatever the
client does; other connections are served meanwhile. A client that ignores throttle times
(this raw one) is thus held at its quota by the broker itself.

Found by mutation: with ``Connection.throttle`` left without effect (no mute) every existing
test passed, test_quotas' included: librdkafka waits out the throttle time it is told, so
only a client that does not wait shows the mute.
"""

from __future__ import annotations

import select
import time

import pytest

from spool.protocol._generated import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    MetadataRequest,
    ProduceRequest,
)
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.raw_client import RawClient, request_once
from tests.helpers.secure_broker import SecureBroker

TOPIC = "muted"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # 3 samples of 1 s: 100 kB at 12.5 kB/s measures 50 kB/s over 2 s, a 6 s throttle
    b = SecureBroker(tmp_path_factory.mktemp("mute") / "data", listeners=("PLAINTEXT",),
                     overrides={"quota.window.num": "3"})
    b.start()
    resp = request_once(b.bootstrap("PLAINTEXT"), 19, 5, CreateTopicsRequest(
        topics=[CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
        timeout_ms=10_000))
    assert [t.error_code for t in resp.topics] == [0]
    req = AlterClientQuotasRequest(entries=[acq.EntryData(
        entity=[acq.EntityData(entity_type="client-id", entity_name="flooder")],
        ops=[acq.OpData(key="producer_byte_rate", value=12_500.0, remove=False)])],
        validate_only=False)
    assert [e.error_code for e in request_once(b.bootstrap("PLAINTEXT"), 49, 1, req)
            .entries] == [0]
    yield b
    b.stop()


def produce(c: RawClient, nbytes: int) -> int:
    batch = BatchBuilder()
    batch.append(b"k", b"x" * nbytes, timestamp=1_700_000_000_000)
    return c.send(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=TOPIC, partition_data=[
            PartitionProduceData(index=0, records=batch.build())])]), client_id="flooder")


def test_a_throttled_connection_reads_no_request_until_its_throttle_time_has_passed(broker):
    flooder = RawClient(broker.bootstrap("PLAINTEXT"), timeout=60)
    other = RawClient(broker.bootstrap("PLAINTEXT"), timeout=60)
    try:
        # a Produce over the quota and, pipelined behind it, a Metadata request
        produce_id = produce(flooder, 100_000)
        metadata_id = flooder.send(3, 12, MetadataRequest(topics=[]), client_id="flooder")
        got, resp = flooder.recv(0, 9)
        answered_at = time.monotonic()
        assert got == produce_id
        assert [p.error_code for t in resp.responses for p in t.partition_responses] == [0]
        throttle_s = resp.throttle_time_ms / 1000
        assert throttle_s >= 3  # the mute below is checked well inside it
        # another connection is served at once...
        assert other.request(3, 12, MetadataRequest(topics=[])).brokers
        # ...while the flooder's Metadata, read or not, is not answered during the throttle
        quiet_until = answered_at + throttle_s / 2
        assert time.monotonic() < quiet_until, "the other connection took half the throttle"
        readable, _, _ = select.select([flooder.sock], [], [], quiet_until - time.monotonic())
        assert not readable, "a muted connection was answered during its throttle time"
        # once the throttle time has passed the connection is served again
        got, meta = flooder.recv(3, 12)
        assert got == metadata_id and meta.brokers
    finally:
        flooder.close()
        other.close()
