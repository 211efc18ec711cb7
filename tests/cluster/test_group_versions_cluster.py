"""OffsetCommit v10 and OffsetFetch v8/v10 on three brokers: topic IDs resolve on every
broker from the metadata image, and an OffsetFetch naming groups of two coordinators answers
each group on its own (the one coordinated elsewhere NOT_COORDINATOR, the other its offsets),
as Kafka's broker does per group."""

from __future__ import annotations

import uuid

from spool.protocol._generated import MetadataRequest, OffsetCommitRequest, OffsetFetchRequest
from spool.protocol._generated.metadata_request import MetadataRequestTopic
from spool.protocol._generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from spool.protocol._generated.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from spool.protocol.errors import Errors
from tests.cluster.test_brokers import RACKS, coordinator, create, partitions_of
from tests.helpers.cluster_proc import COMBINED
from tests.helpers.raw_client import RawClient


def test_offsets_by_topic_id_and_per_group_coordinators(cluster_factory):
    cluster = cluster_factory(roles=(COMBINED,) * 3, racks=RACKS, proxied=False).start()
    cluster.wait_formed()
    name = f"gv-{uuid.uuid4().hex[:6]}"
    create(cluster.bootstrap, name, 1, 3)
    cluster.wait_until("leaders", lambda: partitions_of(cluster.bootstrap, name))
    coords: dict[str, int] = {}
    for i in range(30):
        g = f"g{i}-{name}"
        coords[g] = cluster.wait_until("group coordinator",
                                       lambda g=g: coordinator(cluster.nodes[1].bootstrap, g, 0))
    a = next(iter(coords))
    b = next(g for g, n in coords.items() if n != coords[a])
    clients = {n: RawClient(cluster.nodes[n].bootstrap) for n in {coords[a], coords[b]}}
    try:
        topic_id = clients[coords[a]].request(3, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name=name)])).topics[0].topic_id
        for g, offset in ((a, 11), (b, 22)):
            def commit(g=g, offset=offset):
                got = clients[coords[g]].request(8, 10, OffsetCommitRequest(
                    group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
                        OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                            OffsetCommitRequestPartition(partition_index=0,
                                                         committed_offset=offset,
                                                         committed_metadata="")])]))
                codes = [(t.topic_id, [p.error_code for p in t.partitions]) for t in got.topics]
                # the coordinator may still load its partition: retriable, as clients retry
                return codes if codes != [(topic_id, [Errors.COORDINATOR_LOAD_IN_PROGRESS])] \
                    else f"{g}: loading"

            assert cluster.wait_until("commit", commit) == [(topic_id, [0])]
        for version, key in ((8, name), (10, topic_id)):
            topics = [OffsetFetchRequestTopics(name=name if version < 10 else "",
                                               topic_id=topic_id, partition_indexes=[0])]
            got = clients[coords[a]].request(9, version, OffsetFetchRequest(groups=[
                OffsetFetchRequestGroup(group_id=g, topics=topics) for g in (a, b)]))
            answered = {g.group_id: (g.error_code, [
                (t.topic_id if version >= 10 else t.name,
                 [(p.committed_offset, p.error_code) for p in t.partitions]) for t in g.topics])
                for g in got.groups}
            assert answered == {a: (0, [(key, [(11, 0)])]), b: (Errors.NOT_COORDINATOR, [])}
    finally:
        for c in clients.values():
            c.close()
