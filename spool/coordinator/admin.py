"""Offsets and group administration on a ``GroupCoordinator``.

OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups,
DeleteGroups and offset retention. Same contract as the coordinator:
functions of (coordinator, request fields) returning a ``Result`` (records,
then replies) plus the response data; no I/O, the clock is the
coordinator's. Nothing here changes a group, its offsets or its existence
(only timers: a commit is a member's heartbeat): the records written here
do, when the runtime replays them after appending them
(``GroupCoordinator.replay``), so these need no group checkpoint.

Retention (``offsets.retention.minutes``): a group with a protocol type
(``consumer``) loses all its offsets once it has been Empty that long; a
group that only stores offsets (no members ever, ``protocol_type`` None)
loses each offset that long after its commit. A group left Empty with no
offsets is then deleted (tombstone, Dead).
"""

from __future__ import annotations

from dataclasses import dataclass

from spool.coordinator import consumer_ops
from spool.coordinator.consumer_group import ConsumerGroup
from spool.coordinator.coordinator import GroupCoordinator, _record
from spool.coordinator.group import ClassicGroup, GroupState
from spool.coordinator.offsets import CommittedOffset, OffsetStore
from spool.coordinator.result import GroupSummary, MemberSummary, Result
from spool.coordinator.schema import subscribed_topics
from spool.coordinator.share_ops import delete_share_group
from spool.protocol.errors import Errors

S = GroupState


@dataclass(frozen=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


def commit_offsets(
    coord: GroupCoordinator, group_id: str, generation: int, member_id: str,
    instance: str | None, offsets: list[OffsetToCommit],
    missing_group: int = Errors.ILLEGAL_GENERATION, version: int = 9,
) -> tuple[Result, list[int]]:
    """OffsetCommit: one error code per offset (the same for all when the group refuses,
    ``_check_commit``; ``version``: the request's)."""
    out = Result()
    code = _check_commit(coord, group_id, generation, member_id, instance, missing_group,
                         version=version)
    if code:
        return out, [code] * len(offsets)
    group = coord.groups.get(group_id)  # None: a group that only stores offsets, made by replay
    if isinstance(group, ClassicGroup) and member_id in group.members:
        coord._heartbeat(group, group.members[member_id])
    codes = []
    now = coord.now()
    for o in offsets:
        metadata = o.metadata or ""
        if len(metadata.encode("utf-8")) > coord.config.max_metadata_bytes:
            codes.append(Errors.OFFSET_METADATA_TOO_LARGE)
            continue
        committed = CommittedOffset(o.offset, o.leader_epoch, metadata, now)
        rec, _, _ = OffsetStore.commit_record(group_id, o.topic, o.partition, committed)
        out.records.append(rec)
        codes.append(0)
    return out, codes


def _check_commit(coord: GroupCoordinator, group_id: str, generation: int, member_id: str,
                  instance: str | None, missing_group: int = Errors.ILLEGAL_GENERATION,
                  transactional: bool = False, version: int = 9) -> int:
    """Kafka's ``validateOffsetCommit`` for a classic group (``generation`` is the
    request's generation_id_or_member_epoch). A group that does not exist takes commits
    without a generation (-1: the admin client or a consumer outside group management;
    Kafka makes it a "simple" group); with one it is ``missing_group`` (OffsetCommit v9+
    answers GROUP_ID_NOT_FOUND, older versions and TxnOffsetCommit ILLEGAL_GENERATION).
    An Empty group takes commits without a generation too; otherwise a request naming a
    member, a generation or an instance must name a current member and the current
    generation, and one naming none is UNKNOWN_MEMBER_ID; a group whose rebalance is
    completing is REBALANCE_IN_PROGRESS. A ``transactional`` commit (TxnOffsetCommit) is
    spared those two: older clients send no member, and the group's state is not enforced
    for transactional offsets (Kafka's ``isTransactional``). A KIP-848 consumer group:
    ``_check_consumer_commit``."""
    if not group_id:
        return Errors.INVALID_GROUP_ID
    group = coord.groups.get(group_id)
    if group is None:
        return 0 if generation < 0 else missing_group
    if isinstance(group, ConsumerGroup):
        return _check_consumer_commit(group, member_id, generation, transactional, version)
    if not isinstance(group, ClassicGroup):  # a share group commits no offsets
        return Errors.GROUP_ID_NOT_FOUND
    if group.is_(S.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_(S.EMPTY):
        return 0
    if generation < 0 and not member_id and instance is None:
        return 0 if transactional else Errors.UNKNOWN_MEMBER_ID
    code = coord._check_member(group, member_id, instance)
    if code:
        return code
    if generation != group.generation:
        return Errors.ILLEGAL_GENERATION
    if group.is_(S.COMPLETING_REBALANCE) and not transactional:
        return Errors.REBALANCE_IN_PROGRESS
    return 0  # Stable, or PreparingRebalance (eager members commit before rejoining)


def _check_consumer_commit(group: ConsumerGroup, member_id: str, epoch: int,
                           transactional: bool, version: int) -> int:
    """Kafka's ConsumerGroup.validateOffsetCommit: without a member epoch (-1: the admin
    client, a consumer outside the group) only while the group has no member; else the member
    must exist (UNKNOWN_MEMBER_ID), use OffsetCommit v9+ (UNSUPPORTED_VERSION) unless it uses
    the classic protocol, and name its current epoch (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION
    for a classic member and for TxnOffsetCommit, whose schema lacks it)."""
    if epoch < 0 and group.is_empty():
        return 0
    member = group.members.get(member_id)
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    if not transactional and member.classic is None and version < 9:
        return Errors.UNSUPPORTED_VERSION
    if epoch != member.member_epoch:  # a classic member's generation is its epoch
        return (Errors.ILLEGAL_GENERATION if transactional or member.classic is not None
                else Errors.STALE_MEMBER_EPOCH)
    return 0


def check_offset_fetch(coord: GroupCoordinator, group_id: str, member_id: str | None,
                       epoch: int) -> int:
    """OffsetFetch v9+ of a KIP-848 consumer group (Kafka's validateOffsetFetch): a request
    naming no member and epoch -1 reads freely; else the member must exist and name its
    current epoch. Classic groups' offsets are readable by anyone."""
    group = coord.groups.get(group_id)
    if not isinstance(group, ConsumerGroup) or (member_id is None and epoch < 0):
        return 0
    member = group.members.get(member_id or "")
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID
    if epoch == member.member_epoch:
        return 0
    return Errors.ILLEGAL_GENERATION if member.classic is not None else Errors.STALE_MEMBER_EPOCH


def fetch_offsets(
    coord: GroupCoordinator, group_id: str, partitions: list[tuple[str, int]] | None,
) -> dict[tuple[str, int], CommittedOffset | None]:
    """OffsetFetch: the listed partitions (None: every committed one); None where nothing is."""
    committed = coord.offsets.get(group_id)
    if partitions is None:
        return dict(sorted(committed.items()))
    return {tp: committed.get(tp) for tp in partitions}


def delete_offsets(
    coord: GroupCoordinator, group_id: str, partitions: list[tuple[str, int]],
) -> tuple[Result, int, list[int]]:
    """OffsetDelete: (result, group error, per-partition errors)."""
    out = Result()
    group = coord.groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        subscribed = group.subscribed_names(group.members.values())
    elif not isinstance(group, ClassicGroup) or group.is_(S.DEAD):
        return out, Errors.GROUP_ID_NOT_FOUND, []
    else:
        subscribed = set()
    if isinstance(group, ClassicGroup) and not group.is_(S.EMPTY):
        if group.protocol_type != "consumer":
            return out, Errors.NON_EMPTY_GROUP, []
        for m in group.members.values():
            subscribed |= subscribed_topics(m.metadata(group.protocol_name))
    codes = []
    committed = coord.offsets.get(group_id)
    for topic, partition in partitions:
        if topic in subscribed:
            codes.append(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
            continue
        if (topic, partition) in committed:
            _tombstone(coord, out, group_id, topic, partition)
        codes.append(0)
    return out, 0, codes


def _tombstone(coord: GroupCoordinator, out: Result, group_id: str, topic: str, partition: int) -> None:
    rec, _ = OffsetStore.tombstone_record(group_id, topic, partition)
    out.records.append(rec)


def describe_group(coord: GroupCoordinator, group_id: str) -> GroupSummary:
    """DescribeGroups: unknown groups describe as Dead; metadata and assignments only when Stable."""
    group = coord.groups.get(group_id)
    if not isinstance(group, ClassicGroup):  # share groups: ShareGroupDescribe
        return GroupSummary(group_id, S.DEAD.value, "", "", ())
    stable = group.is_(S.STABLE)
    members = tuple(
        MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      m.metadata(group.protocol_name) if stable else b"",
                      m.assignment if stable else b"")
        for m in group.members.values()
    )
    return GroupSummary(group_id, group.state.value, group.protocol_type or "",
                        group.protocol_name or "" if not group.is_(S.PREPARING_REBALANCE) else "",
                        members)


def list_groups(coord: GroupCoordinator, states: list[str] | None = None,
                types: list[str] | None = None) -> list[tuple[str, str, str, str]]:
    """ListGroups: (group_id, protocol_type, state, group type: ``classic``, ``consumer``...);
    filters match case-insensitively."""
    wanted = {s.lower() for s in states or []}
    kinds = {t.lower() for t in types or []}
    rows = []
    for g in coord.groups.values():
        if isinstance(g, ClassicGroup):
            if g.is_(S.DEAD):
                continue
            row = (g.group_id, g.protocol_type or "", g.state.value, "classic")
        elif isinstance(g, ConsumerGroup):
            row = (g.group_id, g.protocol_type, g.state.value, g.type)
        else:
            row = (g.group_id, g.type, g.state, g.type)
        if (wanted and row[2].lower() not in wanted) or (kinds and row[3] not in kinds):
            continue
        rows.append(row)
    return sorted(rows)


def delete_groups(coord: GroupCoordinator, group_ids: list[str]) -> tuple[Result, list[int]]:
    """DeleteGroups: only Empty groups; their offsets and metadata get tombstones. A consumer
    or share group's records are applied at once (``spool.coordinator.share_group``): checkpoint
    ``group_ids`` before; its share-partition state is deleted first (the handler)."""
    out = Result()
    codes = []
    deleted: set[str] = set()
    for gid in group_ids:
        group = coord.groups.get(gid)
        if not gid:
            codes.append(Errors.INVALID_GROUP_ID)
        elif group is None or gid in deleted:
            codes.append(Errors.GROUP_ID_NOT_FOUND)
        elif isinstance(group, ConsumerGroup):
            if not group.is_empty():
                codes.append(Errors.NON_EMPTY_GROUP)
                continue
            _delete_consumer_group(coord, group, out)
            deleted.add(gid)
            codes.append(0)
        elif not isinstance(group, ClassicGroup):  # share_ops.delete_group: its own records
            codes.append(delete_share_group(coord, group, out))
            if not codes[-1]:
                deleted.add(gid)
        elif group.is_(S.DEAD):
            codes.append(Errors.GROUP_ID_NOT_FOUND)
        elif not group.is_(S.EMPTY):
            codes.append(Errors.NON_EMPTY_GROUP)
        else:
            _delete_group(coord, group, out)
            deleted.add(gid)
            codes.append(0)
    return out, codes


def _delete_group(coord: GroupCoordinator, group: ClassicGroup, out: Result,
                  already: frozenset[tuple[str, int]] = frozenset()) -> None:
    """Tombstones for the group's offsets (but those in ``already``) and for the group; its
    replay turns the group Dead and forgets it."""
    for topic, partition in list(coord.offsets.get(group.group_id)):
        if (topic, partition) not in already:
            _tombstone(coord, out, group.group_id, topic, partition)
    out.records.append(_record(group.group_id, None))


def _delete_consumer_group(coord: GroupCoordinator, group: ConsumerGroup, out: Result,
                           already: frozenset[tuple[str, int]] = frozenset()) -> None:
    """Tombstones for the group's offsets (replayed once appended) and for every record of the
    group (applied at once: ``spool.coordinator.consumer_group``)."""
    for topic, partition in list(coord.offsets.get(group.group_id)):
        if (topic, partition) not in already:
            _tombstone(coord, out, group.group_id, topic, partition)
    consumer_ops.delete_group(coord, group, out)


def expire_offsets(coord: GroupCoordinator, out: Result) -> None:
    """One retention pass (see the module docstring)."""
    now = coord.now()
    retention = coord.config.offsets_retention_ms
    for group in list(coord.groups.values()):
        if isinstance(group, ConsumerGroup):
            if group.is_empty():  # each offset ages from its commit, as Kafka's
                committed = coord.offsets.get(group.group_id)
                expired = [tp for tp, c in committed.items()
                           if now - c.commit_timestamp >= retention]
                for topic, partition in expired:
                    _tombstone(coord, out, group.group_id, topic, partition)
                if len(expired) == len(committed):
                    _delete_consumer_group(coord, group, out, frozenset(expired))
            continue
        if not isinstance(group, ClassicGroup) or not group.is_(S.EMPTY) or group.pending_members:
            continue
        committed = coord.offsets.get(group.group_id)
        if group.protocol_type:
            expired = list(committed) if now - group.state_timestamp >= retention else []
        else:
            expired = [tp for tp, c in committed.items() if now - c.commit_timestamp >= retention]
        for topic, partition in expired:
            _tombstone(coord, out, group.group_id, topic, partition)
        if len(expired) == len(committed):  # nothing left once the tombstones are replayed
            _delete_group(coord, group, out, frozenset(expired))


def delete_topic_offsets(coord: GroupCoordinator, topics: set[str]) -> tuple[Result, list[str]]:
    """Deleted topics' committed offsets go, in every group holding one (Kafka's
    GroupCoordinator.onPartitionsDeleted): a tombstone each. Returns (result, the groups
    touched). A topic created again under the name then starts at ``auto.offset.reset``
    for a group, never at the deleted topic's offsets."""
    out = Result()
    touched = []
    for group_id in coord.offsets.groups():
        gone = [tp for tp in coord.offsets.get(group_id) if tp[0] in topics]
        for topic, partition in gone:
            _tombstone(coord, out, group_id, topic, partition)
        if gone:
            touched.append(group_id)
    return out, touched
