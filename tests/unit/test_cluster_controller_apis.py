"""ControllerApis: the controller driven by wire request messages, answered with responses."""

from __future__ import annotations

import uuid

from spool.cluster import controller_apis as apis
from spool.protocol._generated import (
    AllocateProducerIdsRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    DeleteTopicsRequest,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UnregisterBrokerRequest,
)
from spool.protocol._generated import broker_registration_request as br
from spool.protocol._generated import delete_topics_request as dt
from spool.protocol.errors import Errors
from tests.helpers.cluster_harness import CLUSTER_ID, Harness


def registration(broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.UUID(int=broker_id),
        listeners=[br.Listener(name="PLAINTEXT", host="localhost", port=9092,
                               security_protocol=0)],
        features=[br.Feature(name="metadata.version", min_supported_version=1,
                             max_supported_version=25)],
        rack="r1")


def test_register_heartbeat_allocate_unregister_over_the_wire_types():
    h = Harness()
    c, commit = h.controller, h.commit
    offset = h.next_offset
    resp = commit(apis.broker_registration(c, registration(1), offset, h.now))
    assert (resp.error_code, resp.broker_epoch) == (0, offset)
    (_, rec), = h.log[offset:]
    assert isinstance(rec, RegisterBrokerRecord) and rec.rack == "r1"
    hb = BrokerHeartbeatRequest(broker_id=1, broker_epoch=offset,
                                current_metadata_offset=h.next_offset - 1, want_fence=False,
                                want_shut_down=False)
    resp = commit(apis.broker_heartbeat(c, hb, h.now))
    assert (resp.error_code, resp.is_caught_up, resp.is_fenced, resp.should_shut_down) == (
        0, True, False, False)
    resp = commit(apis.allocate_producer_ids(
        c, AllocateProducerIdsRequest(broker_id=1, broker_epoch=offset)))
    assert (resp.error_code, resp.producer_id_start, resp.producer_id_len) == (0, 0, 1000)
    resp = commit(apis.unregister_broker(c, UnregisterBrokerRequest(broker_id=1)))
    assert resp.error_code == 0 and 1 not in c.image.brokers


def test_errors_become_error_codes_and_write_nothing():
    h = Harness()
    c = h.controller
    bad = registration(1)
    bad.cluster_id = "another"
    result = apis.broker_registration(c, bad, h.next_offset, h.now)
    assert (result.records, result.reply.error_code) == ([], Errors.INCONSISTENT_CLUSTER_ID)
    hb = BrokerHeartbeatRequest(broker_id=7, broker_epoch=3, current_metadata_offset=0)
    result = apis.broker_heartbeat(c, hb, h.now)
    assert (result.records, result.reply.error_code) == ([], Errors.STALE_BROKER_EPOCH)
    result = apis.unregister_broker(c, UnregisterBrokerRequest(broker_id=7))
    assert result.reply.error_code == Errors.BROKER_ID_NOT_REGISTERED
    assert result.reply.error_message == "Broker ID 7 is not currently registered"
    result = apis.allocate_producer_ids(c, AllocateProducerIdsRequest(broker_id=7,
                                                                      broker_epoch=0))
    assert result.reply.error_code == Errors.STALE_BROKER_EPOCH


def test_delete_topics_by_id_from_v6_and_by_name_before():
    h = Harness()
    c = h.controller
    h.start(1)
    tid = h.create_topic("a", 1, 1).topic_id
    h.create_topic("b", 1, 1)
    v6 = DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=None, topic_id=tid)])
    result = apis.delete_topics(c, v6, 6)
    assert result.records == [RemoveTopicRecord(topic_id=tid)]
    assert [(r.name, r.error_code) for r in result.reply.responses] == [("a", 0)]
    v5 = DeleteTopicsRequest(topic_names=["b", "zz"])
    result = apis.delete_topics(c, v5, 5)
    assert [(r.name, r.error_code) for r in result.reply.responses] == [
        ("b", 0), ("zz", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
