"""Client quotas on a 3-node cluster: a quota altered through one broker (forwarded to the
controller, committed to the metadata log) is enforced by every broker, each on the
requests it leads."""

from __future__ import annotations

import time

from spool.protocol._generated import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    ProduceRequest,
)
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from spool.protocol._generated.produce_request import PartitionProduceData, TopicProduceData
from spool.records.builder import BatchBuilder
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient, request_once


def produce_throttle(bootstrap: str, topic: str) -> tuple[int, int]:
    """(error, throttle_time_ms) of 100 kB produced by client ``hog``."""
    batch = BatchBuilder()
    batch.append(b"k", b"x" * 100_000, timestamp=1_700_000_000_000)
    c = RawClient(bootstrap)
    try:
        c.send(0, 9, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=topic, partition_data=[
                PartitionProduceData(index=0, records=batch.build())])]), client_id="hog")
        _, resp = c.recv(0, 9)
    finally:
        c.close()
    return resp.responses[0].partition_responses[0].error_code, resp.throttle_time_ms


def test_a_quota_set_through_one_broker_is_enforced_by_every_broker(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, proxied=False)
    cluster.start()
    cluster.wait_formed()
    first = cluster.nodes[1].bootstrap
    # one single-replica topic led by each broker
    resp = request_once(first, 19, 7, CreateTopicsRequest(topics=[
        CreatableTopic(name=f"hog-{n}", num_partitions=-1, replication_factor=-1,
                       assignments=[CreatableReplicaAssignment(partition_index=0,
                                                               broker_ids=[n])])
        for n in cluster.nodes]))
    assert [t.error_code for t in resp.topics] == [0, 0, 0]
    resp = request_once(first, 49, 1, AlterClientQuotasRequest(entries=[acq.EntryData(
        entity=[acq.EntityData(entity_type="client-id", entity_name="hog")],
        ops=[acq.OpData(key="producer_byte_rate", value=1000.0, remove=False)])]))
    assert [e.error_code for e in resp.entries] == [0]
    for n, node in cluster.nodes.items():
        deadline = time.monotonic() + 30
        while True:  # until the broker has the topic's leadership and the quota
            error, throttle = produce_throttle(node.bootstrap, f"hog-{n}")
            if error == 0 and throttle > 0:
                break
            assert time.monotonic() < deadline, f"broker {n}: error {error}, no throttle"
            time.sleep(0.2)
