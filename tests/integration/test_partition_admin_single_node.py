"""ElectLeaders and partition reassignments against a single node, as confluent-kafka's
``elect_leaders`` and kafka-python's ``alter/list_partition_reassignments`` show them: the
one broker leads every partition (nothing to elect), a replica list can only name it, and
nothing is ever being reassigned."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka import errors as kerrors

from spool.protocol.errors import Errors

pytestmark = pytest.mark.timeout(120)


def test_elections_and_reassignments_on_one_broker(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2)])[topic_name].result(10)
    result = admin.elect_leaders(ElectionType.PREFERRED, [
        TopicPartition(topic_name, 0), TopicPartition(topic_name, 5)]).result(15)
    assert {tp.partition: err.code() for tp, err in result.items()} == {
        0: Errors.ELECTION_NOT_NEEDED, 5: Errors.UNKNOWN_TOPIC_OR_PARTITION}
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        tp0, tp1 = KTopicPartition(topic_name, 0), KTopicPartition(topic_name, 1)
        node = kp.describe_cluster()["brokers"][0]["broker_id"]
        assert kp.alter_partition_reassignments({tp0: [node], tp1: [node, 7]}) == {
            tp0: None, tp1: kerrors.InvalidReplicationAssignmentError}
        assert kp.alter_partition_reassignments({tp0: None}) == {
            tp0: kerrors.NoReassignmentInProgressError}
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()
