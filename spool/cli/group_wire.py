"""The group APIs confluent-kafka does not expose, over Spool's own client (``spool.cli.wire``).

confluent-kafka 2.16 lists only classic and consumer groups, and has no call for share
groups (ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets) nor for the
member epochs of ConsumerGroupDescribe; the group commands use these instead:

- ``await list_groups(admin, types, states)``: ListGroups (v5: ``types_filter``
  classic/consumer/share, v4+: ``states_filter``) sent to every broker of the cluster, as
  Kafka's admin client does (each broker answers for the groups it coordinates); the
  groups sorted by id. A broker that refuses (e.g. COORDINATOR_LOAD_IN_PROGRESS) fails the
  command with its error.
- ``await coordinator(admin, group)``: a ``WireAdmin`` connected to the group's
  coordinator (FindCoordinator, key type GROUP), retrying the retriable answers
  (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) until the
  command's timeout. The caller closes it.
- ``await delete_offsets(coord, group, parts)``: OffsetDelete (47) of ``[(topic,
  partition)]``: ``[(topic, partition, error code)]``; a top-level error (GROUP_ID_NOT_FOUND,
  NON_EMPTY_GROUP...) fails the command.
- ``await describe_consumer_group(coord, group)`` / ``describe_share_group(coord, group)``:
  the group's DescribedGroup of ConsumerGroupDescribe (69) / ShareGroupDescribe (77), or
  None when the coordinator says the group is not one of that type (GROUP_ID_NOT_FOUND)
  or does not serve the API; another error fails the command.
- ``await share_group_offsets(coord, group)``: DescribeShareGroupOffsets (90) for every
  topic the group has state for: ``[(topic, partition, start_offset, lag)]`` (lag -1 when
  unknown: v0, or a partition not initialized).
- ``await alter_share_group_offsets(coord, group, topic, offsets)``: AlterShareGroupOffsets
  (91); the top-level error (NON_EMPTY_GROUP...) or the first partition's fails the command.
- ``await delete_share_group_offsets(coord, group, topics)``: DeleteShareGroupOffsets (92):
  the group's share state of whole topics; errors as for the alter.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from spool.cli.common import CliError
from spool.cli.wire import WireAdmin, connect, refused
from spool.protocol._generated import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupDescribeRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
    ShareGroupDescribeRequest,
)
from spool.protocol._generated import alter_share_group_offsets_request as asgo
from spool.protocol._generated import delete_share_group_offsets_request as dsgd
from spool.protocol._generated import describe_share_group_offsets_request as dsgo
from spool.protocol._generated import offset_delete_request as odr
from spool.protocol.errors import Errors

GROUP_TYPES = ("classic", "consumer", "share")
RETRIABLE = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
             Errors.NOT_COORDINATOR}


async def list_groups(admin: WireAdmin, types: list[str], states: list[str],
                      timeout: float) -> list[Any]:
    """Every group of the cluster (module doc)."""
    md = await admin.metadata([])
    out: list[Any] = []
    for b in sorted(md.brokers, key=lambda b: b.node_id):
        node = await connect(f"{b.host}:{b.port}", timeout)
        try:
            req = ListGroupsRequest(states_filter=list(states), types_filter=list(types))
            version = node.version(16, 5)
            if types and version < 5:
                raise CliError(f"the broker at {node.address} cannot filter groups by type "
                               f"(ListGroups v{version}) (UNSUPPORTED_VERSION)", 1,
                               "UNSUPPORTED_VERSION")
            resp = await node.request(req, 5)
        finally:
            await node.client.close()
        if resp.error_code:
            raise refused(resp.error_code, None, f"broker {b.node_id}")
        out += resp.groups
    return sorted(out, key=lambda g: g.group_id)


async def coordinator(admin: WireAdmin, group: str, timeout: float) -> WireAdmin:
    """A connection to ``group``'s coordinator (module doc)."""
    deadline = time.monotonic() + timeout
    while True:
        version = admin.version(10, 4)
        if version >= 4:
            resp = await admin.request(FindCoordinatorRequest(key_type=0,
                                                              coordinator_keys=[group]), 4)
            c = resp.coordinators[0]
            code, message, host, port = c.error_code, c.error_message, c.host, c.port
            node_id = c.node_id
        else:
            resp = await admin.request(FindCoordinatorRequest(key=group, key_type=0), 3)
            code, message, host, port = resp.error_code, resp.error_message, resp.host, resp.port
            node_id = resp.node_id
        if code == 0:
            coord = await connect(f"{host}:{port}", timeout)
            coord.node_id = node_id
            return coord
        if code not in RETRIABLE or time.monotonic() > deadline:
            raise refused(code, message, f"group '{group}'")
        await asyncio.sleep(0.2)


async def _described(coord: WireAdmin, api_key: int, request: Any, ours: int,
                     group: str) -> Any | None:
    if api_key not in coord.served:
        return None
    resp = await coord.request(request, ours)
    [g] = resp.groups
    if g.error_code == Errors.GROUP_ID_NOT_FOUND:
        return None
    if g.error_code:
        raise refused(g.error_code, g.error_message, f"group '{group}'")
    return g


async def describe_consumer_group(coord: WireAdmin, group: str) -> Any | None:
    return await _described(coord, 69, ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False), 1, group)


async def describe_share_group(coord: WireAdmin, group: str) -> Any | None:
    return await _described(coord, 77, ShareGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False), 1, group)


async def share_group_offsets(coord: WireAdmin, group: str) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start offset, lag) of every share-partition the group has."""
    if 90 not in coord.served:
        return []
    resp = await coord.request(DescribeShareGroupOffsetsRequest(groups=[
        dsgo.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
    [g] = resp.groups
    if g.error_code:
        raise refused(g.error_code, g.error_message, f"group '{group}'")
    out = []
    for t in g.topics:
        for p in t.partitions:
            if p.error_code:
                raise refused(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")
            out.append((t.topic_name, p.partition_index, p.start_offset, p.lag))
    return sorted(out)


async def alter_share_group_offsets(coord: WireAdmin, group: str, topic: str,
                                    offsets: dict[int, int]) -> None:
    """Set the share-partition start offsets of ``topic`` (module doc)."""
    resp = await coord.request(AlterShareGroupOffsetsRequest(group_id=group, topics=[
        asgo.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
            asgo.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
            for p, o in sorted(offsets.items())])]), 0)
    if resp.error_code:
        raise refused(resp.error_code, resp.error_message, f"group '{group}'")
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code:
                raise refused(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")


async def delete_share_group_offsets(coord: WireAdmin, group: str, topics: list[str]) -> None:
    """Delete the group's share state of ``topics`` (module doc)."""
    resp = await coord.request(DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        dsgd.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), 0)
    if resp.error_code:
        raise refused(resp.error_code, resp.error_message, f"group '{group}'")
    for t in resp.responses:
        if t.error_code:
            raise refused(t.error_code, t.error_message, t.topic_name)


_OFFSET_DELETE_PHRASES = {
    Errors.GROUP_ID_NOT_FOUND: "the group does not exist",
    Errors.NON_EMPTY_GROUP: "its offsets can only be deleted while it has no members",
    Errors.INVALID_GROUP_ID: "not a valid group id",
}


async def delete_offsets(coord: WireAdmin, group: str,
                         parts: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """OffsetDelete of ``parts`` (module doc): ``[(topic, partition, error code)]``."""
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    resp = await coord.request(OffsetDeleteRequest(group_id=group, topics=[
        odr.OffsetDeleteRequestTopic(name=t, partitions=[
            odr.OffsetDeleteRequestPartition(partition_index=p) for p in sorted(ps)])
        for t, ps in sorted(by_topic.items())]), 0)
    if resp.error_code:
        raise refused(resp.error_code, _OFFSET_DELETE_PHRASES.get(resp.error_code),
                      f"group '{group}'")
    return sorted((t.name, p.partition_index, p.error_code) for t in resp.topics
                  for p in t.partitions)
