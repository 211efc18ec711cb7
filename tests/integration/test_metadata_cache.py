"""Metadata answers reuse each topic's entry until the topic changes
(spool.broker.handlers.metadata, spool.broker.metadata_view): every change is seen
in the next answers, and what one request asks for (authorized operations) never
leaks into another's answer."""

from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from spool.protocol._generated import MetadataRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.acl import OMITTED
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

METADATA = 3


def _metadata(client: RawClient, names: list[str] | None, *, version: int = 12,
              operations: bool = False):
    topics = None if names is None else [MetadataRequestTopic(name=n) for n in names]
    return client.request(METADATA, version, MetadataRequest(
        topics=topics, allow_auto_topic_creation=False,
        include_topic_authorized_operations=operations))


def _entry(client: RawClient, name: str, *, all_topics: bool):
    resp = _metadata(client, None if all_topics else [name])
    found = [t for t in resp.topics if t.name == name]
    return found[0] if found else None


def _settled(client: RawClient, name: str, partitions: int, *, all_topics: bool):
    """The topic's entry once it lists ``partitions`` partitions, each with its leader
    (a single node creates the logs after the metadata record); fails after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        t = _entry(client, name, all_topics=all_topics)
        if (t is not None and t.error_code == 0 and len(t.partitions) == partitions
                and all(p.error_code == 0 for p in t.partitions)):
            return t
        assert time.monotonic() < deadline, f"{name}: {t}"
        time.sleep(0.05)


def test_every_change_of_a_topic_is_in_the_next_answers(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    client = RawClient(broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 2)])[topic_name].result(10)
        first = {all_topics: _settled(client, topic_name, 2, all_topics=all_topics)
                 for all_topics in (True, False)}
        assert first[True].topic_id == first[False].topic_id != uuid.UUID(int=0)
        assert [p.partition_index for p in first[True].partitions] == [0, 1]

        admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(10)
        for all_topics in (True, False):
            t = _settled(client, topic_name, 5, all_topics=all_topics)
            assert t.topic_id == first[True].topic_id
            assert [p.partition_index for p in t.partitions] == [0, 1, 2, 3, 4]

        admin.delete_topics([topic_name])[topic_name].result(10)
        assert _entry(client, topic_name, all_topics=True) is None
        gone = _entry(client, topic_name, all_topics=False)
        assert gone.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION

        deadline = time.monotonic() + 10
        while True:  # the deletion finishes in the background before the name is free
            fs = admin.create_topics([NewTopic(topic_name, 3)])
            try:
                fs[topic_name].result(10)
                break
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        for all_topics in (True, False):
            t = _settled(client, topic_name, 3, all_topics=all_topics)
            assert t.topic_id not in (first[True].topic_id, uuid.UUID(int=0))
    finally:
        client.close()


def test_authorized_operations_asked_once_are_not_in_later_answers(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(10)
    client = RawClient(broker.bootstrap)
    try:
        _settled(client, topic_name, 1, all_topics=False)
        plain = _metadata(client, [topic_name]).topics[0]
        assert plain.topic_authorized_operations == OMITTED
        asked = _metadata(client, [topic_name], operations=True).topics[0]
        assert asked.topic_authorized_operations not in (OMITTED, 0)
        for names in ([topic_name], None):
            again = [t for t in _metadata(client, names).topics if t.name == topic_name]
            assert again[0].topic_authorized_operations == OMITTED
    finally:
        client.close()
