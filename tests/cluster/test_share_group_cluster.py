"""A share group in a 3-node cluster: ShareGroupHeartbeat is served by the group's coordinator
(NOT_COORDINATOR elsewhere), its share-partition state is initialized through the share
coordinator of each key (another broker, over the network), and when the group's
coordinator is killed -9 the new one has loaded the group from the replicated
``__consumer_offsets``: the member goes on at its epoch with its assignment."""

from __future__ import annotations

import uuid

import pytest

from spool.protocol._generated import ShareGroupDescribeRequest
from spool.protocol.errors import Errors
from tests.cluster.test_coordinator_failover import (
    OVERRIDES,
    coordinator,
    create,
    fully_replicated,
)
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient
from tests.helpers.share import assigned, hb

pytestmark = pytest.mark.timeout(240)


def test_share_group_moves_with_its_coordinator(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, overrides={
        **OVERRIDES, "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "3"}, proxied=False).start()
    cluster.wait_formed()
    topic, group = f"sq-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, topic, 2)
    coord = cluster.wait_until("the group's coordinator",
                               lambda: coordinator(cluster.bootstrap, group, 0))
    other = next(n for n in cluster.nodes if n != coord)
    with RawClient(cluster.nodes[other].bootstrap) as rc:  # once it knows the topic
        cluster.wait_until("NOT_COORDINATOR from another broker", lambda: (
            True if (code := hb(rc, group, "m1", 0, [topic]).error_code) == Errors.NOT_COORDINATOR
            else f"error {code}"), 60)
    with RawClient(cluster.nodes[coord].bootstrap) as rc:
        first = cluster.wait_until("the join (__consumer_offsets loaded)", lambda: (
            r if (r := hb(rc, group, "m1", 0, [topic])).error_code == 0
            else f"error {r.error_code}"), 60)

        last = {"epoch": first.member_epoch}

        def until_assigned():
            r = hb(rc, group, "m1", last["epoch"])
            last["epoch"] = r.member_epoch if r.error_code == 0 else last["epoch"]
            return r if r.error_code == 0 and assigned(r) else f"not yet ({r.error_code})"

        got = cluster.wait_until("both partitions initialized and assigned", until_assigned, 60)
        epoch = got.member_epoch
        assert sorted(assigned(got).popitem()[1]) == [0, 1]
    cluster.wait_until("__consumer_offsets replicated",
                       lambda: fully_replicated(cluster, "__consumer_offsets"), 60)
    cluster.nodes[coord].kill()
    new = cluster.wait_until(
        "a new coordinator",
        lambda: (n if isinstance(n := coordinator(cluster.live_bootstrap([coord]), group, 0),
                                 int) and n != coord else f"coordinator {n}"), 60)

    def heartbeat_there():
        with RawClient(cluster.nodes[new].bootstrap) as rc:
            r = hb(rc, group, "m1", epoch)
        return r if r.error_code == 0 else f"error {r.error_code}"

    again = cluster.wait_until("the member's heartbeat on the new coordinator",
                               heartbeat_there, 60)
    assert again.member_epoch == epoch
    with RawClient(cluster.nodes[new].bootstrap) as rc:
        d = rc.request(77, 1, ShareGroupDescribeRequest(group_ids=[group])).groups[0]
    assert (d.error_code, [m.member_id for m in d.members]) == (0, ["m1"])
    assert [sorted(p.partitions) for p in d.members[0].assignment.topic_partitions] == [[0, 1]]
