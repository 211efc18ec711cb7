"""What the newest group and coordinator versions (Kafka 4.2) add, on the wire.

The raw-socket client sends each version as a Kafka 4.2 client would and checks what it
carries: JoinGroup v9's skip_assignment for a rejoining static leader, DescribeGroups v6's
GROUP_ID_NOT_FOUND, FindCoordinator v6's share key type, the authorized operations of
Metadata v8-v10 / DescribeGroups when asked (without an authorizer: all of them).
"""

from __future__ import annotations

import time

import pytest

from spool.protocol._generated import (
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    MetadataRequest,
    SyncGroupRequest,
)
from spool.protocol._generated.join_group_request import JoinGroupRequestProtocol
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.sync_group_request import SyncGroupRequestAssignment
from spool.protocol.errors import Errors
from tests.helpers.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)

TOPIC_OPS = 3576  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
GROUP_OPS = 3400  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_OPS = 8096  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS
#                     IDEMPOTENT_WRITE
OMITTED = -(2**31)


def _group() -> str:
    return f"gv-{time.monotonic_ns()}"


def _join(rc: RawClient, group: str, version: int, member_id: str = "", instance=None,
          metadata: bytes = b"meta", reason=None):
    return rc.request(11, version, JoinGroupRequest(
        group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer", reason=reason,
        protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)]))


def _stable_static_group(rc: RawClient, group: str) -> str:
    """A Stable group of one static member (instance "i1"), leader; its member id."""
    joined = _join(rc, group, 9, instance="i1", reason="starting")
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, joined.member_id)
    assert joined.skip_assignment is False
    sync = rc.request(14, 5, SyncGroupRequest(
        group_id=group, generation_id=1, member_id=joined.member_id, group_instance_id="i1",
        protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")]))
    assert sync.error_code == 0
    return joined.member_id


def test_static_leader_rejoining_a_stable_group_skips_assignment_from_v9(broker):
    group = _group()
    rc = RawClient(broker.bootstrap)
    try:
        old = _stable_static_group(rc, group)
        # the same instance restarts (empty member id): no rebalance, a new member id; at v9
        # the leader learns the members and is told to compute no assignment
        again = _join(rc, group, 9, instance="i1")
        assert again.error_code == 0 and again.member_id not in ("", old)
        assert (again.generation_id, again.leader, again.skip_assignment) == (
            1, again.member_id, True)
        assert [(m.member_id, m.group_instance_id, bytes(m.metadata)) for m in again.members] == [
            (again.member_id, "i1", b"meta")]
        # below v9 a rejoining static leader is answered as a follower: no members, and the
        # old leader id, so it does not assign
        older = _join(rc, group, 8, instance="i1")
        assert older.error_code == 0 and older.member_id != again.member_id
        assert (older.generation_id, older.leader, older.members) == (1, again.member_id, [])
    finally:
        rc.close()


def test_describe_groups_v6_unknown_group_is_group_id_not_found(broker):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        new = rc.request(15, 6, DescribeGroupsRequest(groups=[group]))
        g = new.groups[0]
        assert (g.error_code, g.group_state, g.members) == (Errors.GROUP_ID_NOT_FOUND, "Dead", [])
        assert g.error_message == f"Group {group} not found."
        old = rc.request(15, 5, DescribeGroupsRequest(groups=[group]))
        assert (old.groups[0].error_code, old.groups[0].group_state) == (0, "Dead")
    finally:
        rc.close()


def test_describe_groups_authorized_operations_only_when_asked(broker):
    rc = RawClient(broker.bootstrap)
    group = _group()
    try:
        _stable_static_group(rc, group)
        asked = rc.request(15, 6, DescribeGroupsRequest(groups=[group],
                                                        include_authorized_operations=True))
        assert (asked.groups[0].group_state, asked.groups[0].authorized_operations) == (
            "Stable", GROUP_OPS)
        plain = rc.request(15, 6, DescribeGroupsRequest(groups=[group]))
        assert plain.groups[0].authorized_operations == OMITTED
    finally:
        rc.close()


def test_find_coordinator_share_key_type(broker):
    rc = RawClient(broker.bootstrap)
    try:
        for version in (5, 6):
            got = rc.request(10, version, FindCoordinatorRequest(
                key_type=2, coordinator_keys=["group:topic-id:0"]))
            c = got.coordinators[0]
            assert (c.key, c.error_code, c.node_id) == ("group:topic-id:0", Errors.INVALID_REQUEST,
                                                        -1)
        groups = rc.request(10, 6, FindCoordinatorRequest(key_type=0, coordinator_keys=["g", ""]))
        assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
            ("g", 0, 0), ("", Errors.INVALID_GROUP_ID, -1)]
    finally:
        rc.close()


def test_metadata_authorized_operations_by_version(broker, topic_name):
    rc = RawClient(broker.bootstrap)
    try:
        topics = [MetadataRequestTopic(name=topic_name), MetadataRequestTopic(name="no_such.x")]
        created = rc.request(3, 4, MetadataRequest(topics=topics[:1], allow_auto_topic_creation=True))
        assert created.topics[0].error_code in (0, Errors.LEADER_NOT_AVAILABLE)
        for version in (8, 10):
            got = rc.request(3, version, MetadataRequest(
                topics=topics, allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True))
            assert got.cluster_authorized_operations == CLUSTER_OPS
            by_name = {t.name: (t.error_code, t.topic_authorized_operations) for t in got.topics}
            # the unknown topic too, as Kafka (it sets them on every topic it answers)
            assert by_name["no_such.x"] == (Errors.UNKNOWN_TOPIC_OR_PARTITION, TOPIC_OPS)
            assert by_name[topic_name][1] == TOPIC_OPS
        # v11+ has no cluster operations; the topic's only when asked
        got = rc.request(3, 12, MetadataRequest(topics=topics[:1],
                                                include_topic_authorized_operations=True))
        assert got.topics[0].topic_authorized_operations == TOPIC_OPS
        plain = rc.request(3, 12, MetadataRequest(topics=topics[:1]))
        assert plain.topics[0].topic_authorized_operations == OMITTED
    finally:
        rc.close()
