"""ACL hosts for IPv6 clients, on a real broker listening on 127.0.0.1 and [::1].

Kafka matches an ACL's host against the client's address as Java prints it
(``InetAddress.getHostAddress``: ``0:0:0:0:0:0:0:1`` for ``::1``), so an ACL written in
that form lets a client at ``::1`` in, and one written ``::1`` matches nobody (as in
Kafka). ``allow.everyone.if.no.acl.found`` is true so the ANONYMOUS PLAINTEXT client may
create topics and ACLs; a topic with an ACL is then closed to every other host.
"""

from __future__ import annotations

import uuid

import pytest

from spool.protocol._generated import CreateAclsRequest, CreateTopicsRequest, MetadataRequest
from spool.protocol._generated.create_acls_request import AclCreation
from spool.protocol._generated.create_topics_request import CreatableTopic
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol.acl import AclOperation, ResourceType
from spool.protocol.errors import Errors
from spool.security.acls import AclPermissionType, PatternType
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.ports import ipv6_loopback
from tests.helpers.raw_client import request_once

pytestmark = pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("acl6") / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,V6://[::1]:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}, log_level="INFO")
    b.start()
    yield b
    b.stop()


def _v6(broker) -> str:
    return f"::1:{broker.listener_ports['V6']}"


def _topic_readable_from(broker, acl_host: str) -> dict[str, int]:
    """A topic whose one ACL lets ANONYMOUS read from ``acl_host``: its Metadata error
    code seen from 127.0.0.1 and from ::1."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    created = request_once(broker.bootstrap, 19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000))
    assert created.topics[0].error_code == Errors.NONE
    acl = request_once(broker.bootstrap, 30, 3, CreateAclsRequest(creations=[AclCreation(
        resource_type=ResourceType.TOPIC, resource_name=topic,
        resource_pattern_type=PatternType.LITERAL, principal="User:ANONYMOUS", host=acl_host,
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)]))
    assert acl.results[0].error_code == Errors.NONE
    seen = {}
    for name, bootstrap in (("127.0.0.1", broker.bootstrap), ("::1", _v6(broker))):
        md = request_once(bootstrap, 3, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
        seen[name] = md.topics[0].error_code
    return seen


def test_an_acl_in_javas_form_matches_a_client_at_ipv6_loopback(broker):
    assert _topic_readable_from(broker, "0:0:0:0:0:0:0:1") == {
        "127.0.0.1": Errors.TOPIC_AUTHORIZATION_FAILED, "::1": Errors.NONE}


def test_an_acl_in_the_compressed_form_matches_nobody_as_in_kafka(broker):
    assert _topic_readable_from(broker, "::1") == {
        "127.0.0.1": Errors.TOPIC_AUTHORIZATION_FAILED,
        "::1": Errors.TOPIC_AUTHORIZATION_FAILED}


def test_an_ipv4_acl_still_matches_its_client(broker):
    assert _topic_readable_from(broker, "127.0.0.1") == {
        "127.0.0.1": Errors.NONE, "::1": Errors.TOPIC_AUTHORIZATION_FAILED}
