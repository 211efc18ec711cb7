"""Share groups (KIP-932) in the group coordinator: the model and its records (types 9-15).

A ``ShareGroup`` lives in ``GroupCoordinator.groups`` beside the classic groups (one
namespace, Kafka's single map). Its state, as Kafka's ``ShareGroup``:

- ``group_epoch`` (ShareGroupMetadata, type 11): bumped when the membership or the
  subscribed topics' metadata change; ``assignment_epoch`` (type 12): the group epoch
  the target assignment was computed at; ``target`` (type 13): member -> topic id ->
  partitions; ``subscription`` (type 9): the subscribed topics as last seen (id, name,
  partition count).
- ``members`` (types 10 and 14): member id, member epoch and previous epoch, rack,
  client id/host, subscribed topic names, assigned partitions. A share member needs no
  revocation: its assignment is its target as soon as it heartbeats (always Stable).
- the share-partition state bookkeeping (type 15, ShareGroupStatePartitionMetadata):
  ``initializing`` (topic id -> name, partitions, when), ``initialized`` (topic id ->
  name, partitions) and ``deleting`` (topic id -> name). Only initialized partitions are
  assigned (``spool.coordinator.share_assignor``).

State only by replay: every change is a record, and ``emit(coord, out, key, value)``
appends the record to the operation's ``Result`` *and* applies it at once through
``apply``, the same function that replays the log at load. The replayer registered for
types 9-15 applies records only while loading (``live`` False): a live replay is of a
record its operation already applied. A failed append reverts through the coordinator's
checkpoint (``copy``/``restore``; ``emit`` saves the group in it first: ``touch``).
``state`` is ``Empty`` without members, else
``Stable`` (Kafka's ShareGroupState; ``Dead`` once deleted).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from spool.coordinator.consumer_group import Partitions, TopicMetadata
from spool.coordinator.coordinator import GroupCoordinator, register_replayer
from spool.coordinator.records import encode, key_type
from spool.coordinator.result import OutRecord, Result
from spool.protocol._generated import DATA_SCHEMAS
from spool.protocol._generated import share_group_current_member_assignment_value as _cur
from spool.protocol._generated import share_group_partition_metadata_value as _pm
from spool.protocol._generated import share_group_state_partition_metadata_value as _sp
from spool.protocol._generated import share_group_target_assignment_member_value as _tam

TYPE = "share"
MEMBER_STATE_STABLE = 0  # Kafka's MemberState.STABLE
LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Partitions = field(default_factory=dict)


@dataclass
class InitTopic:
    name: str
    partitions: set[int]
    create_timestamp: int = -1


class ShareGroup:
    type = TYPE

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Partitions] = {}
        self.subscription: dict[str, TopicMetadata] = {}
        self.initializing: dict[uuid.UUID, InitTopic] = {}
        self.initialized: dict[uuid.UUID, InitTopic] = {}
        self.deleting: dict[uuid.UUID, str] = {}

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def copy(self) -> ShareGroup:
        """A checkpoint, taken on every heartbeat: the maps are copied and each member
        shallowly. ``apply`` sets a member's fields in place but replaces its assignment, and
        replaces targets, subscriptions and the initializing/initialized tables rather than
        changing them (operations change copies: ``init_tables``), so this costs O(members),
        not a deep copy of every assignment (as ``ConsumerGroup.copy``)."""
        saved = ShareGroup(self.group_id)
        saved.__dict__.update({k: (dict(v) if isinstance(v, dict) else v)
                               for k, v in self.__dict__.items()})
        saved.members = {mid: replace(m) for mid, m in self.members.items()}
        return saved

    def restore(self, saved: ShareGroup) -> None:
        self.__dict__.update(copy.deepcopy(saved).__dict__)

    def on_loaded(self, coord: GroupCoordinator) -> None:
        """After a load: every member gets a fresh session (Kafka's onLoaded) of the group's
        ``share.session.timeout.ms``."""
        from spool.coordinator.share_ops import schedule_session

        timeout = int(coord.group_config(self.group_id, "share.session.timeout.ms"))
        for mid in self.members:
            schedule_session(coord, self.group_id, mid, timeout)

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def init_tables(self) -> tuple[dict[uuid.UUID, InitTopic], dict[uuid.UUID, InitTopic]]:
        """Copies of ``initializing`` and ``initialized`` for an operation to change and
        record (``state_partition_record``)."""
        return copy.deepcopy(self.initializing), copy.deepcopy(self.initialized)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for meta in self.subscription.values():
            if meta.topic_id == topic_id:
                return meta.name
        for table in (self.initialized, self.initializing):
            if topic_id in table:
                return table[topic_id].name
        return None


# ---- records: the generated key/value messages (spool.coordinator.records)

def _msg(name: str, **fields: Any) -> Any:
    return DATA_SCHEMAS[name](**fields)


def _tps(cls: Any, parts: Partitions) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(parts.items()) if ps]


def metadata_record(group_id: str, epoch: int | None) -> tuple[Any, Any]:
    return (_msg("ShareGroupMetadataKey", group_id=group_id),
            None if epoch is None else _msg("ShareGroupMetadataValue", epoch=epoch))


def partition_metadata_record(group_id: str, topics: dict[str, TopicMetadata] | None
                              ) -> tuple[Any, Any]:
    key = _msg("ShareGroupPartitionMetadataKey", group_id=group_id)
    if topics is None:
        return key, None
    return key, _msg("ShareGroupPartitionMetadataValue", topics=[
        _pm.TopicMetadata(topic_id=m.topic_id, topic_name=m.name,
                          num_partitions=m.num_partitions, partition_metadata=[])
        for _, m in sorted(topics.items())])


def member_record(group_id: str, m: ShareMember | None, member_id: str = "") -> tuple[Any, Any]:
    key = _msg("ShareGroupMemberMetadataKey", group_id=group_id,
               member_id=m.member_id if m is not None else member_id)
    if m is None:
        return key, None
    return key, _msg("ShareGroupMemberMetadataValue", rack_id=m.rack_id, client_id=m.client_id,
                     client_host=m.client_host,
                     subscribed_topic_names=list(m.subscribed_topic_names))


def target_metadata_record(group_id: str, epoch: int | None) -> tuple[Any, Any]:
    key = _msg("ShareGroupTargetAssignmentMetadataKey", group_id=group_id)
    return key, (None if epoch is None
                 else _msg("ShareGroupTargetAssignmentMetadataValue", assignment_epoch=epoch))


def target_member_record(group_id: str, member_id: str, parts: Partitions | None
                         ) -> tuple[Any, Any]:
    key = _msg("ShareGroupTargetAssignmentMemberKey", group_id=group_id, member_id=member_id)
    if parts is None:
        return key, None
    return key, _msg("ShareGroupTargetAssignmentMemberValue",
                     topic_partitions=_tps(_tam.TopicPartition, parts))


def current_assignment_record(group_id: str, m: ShareMember | None, member_id: str = ""
                              ) -> tuple[Any, Any]:
    key = _msg("ShareGroupCurrentMemberAssignmentKey", group_id=group_id,
               member_id=m.member_id if m is not None else member_id)
    if m is None:
        return key, None
    return key, _msg("ShareGroupCurrentMemberAssignmentValue", member_epoch=m.member_epoch,
                     previous_member_epoch=m.previous_member_epoch, state=MEMBER_STATE_STABLE,
                     assigned_partitions=_tps(_cur.TopicPartitions, m.assigned))


def state_partition_record(group_id: str, initializing: dict[uuid.UUID, InitTopic] | None,
                           initialized: dict[uuid.UUID, InitTopic] | None = None,
                           deleting: dict[uuid.UUID, str] | None = None) -> tuple[Any, Any]:
    """ShareGroupStatePartitionMetadata (``initializing`` None: the tombstone)."""
    key = _msg("ShareGroupStatePartitionMetadataKey", group_id=group_id)
    if initializing is None:
        return key, None

    def infos(table: dict[uuid.UUID, InitTopic]) -> list:
        return [_sp.TopicPartitionsInfo(topic_id=t, topic_name=i.name,
                                        partitions=sorted(i.partitions),
                                        create_timestamp=i.create_timestamp)
                for t, i in sorted(table.items()) if i.partitions]

    return key, _msg("ShareGroupStatePartitionMetadataValue",
                     initializing_topics=infos(initializing),
                     initialized_topics=infos(initialized or {}),
                     deleting_topics=[_sp.TopicInfo(topic_id=t, topic_name=n)
                                      for t, n in sorted((deleting or {}).items())])


def emit(coord: GroupCoordinator, out: Result, rec: tuple[Any, Any]) -> None:
    """Append the record to ``out`` and apply it to memory now (see the module doc)."""
    key_msg, value_msg = rec
    key, value = encode(key_msg, value_msg)
    out.records.append(OutRecord(key_msg.group_id, key, value))
    coord.touch(key_msg.group_id)  # saved in the operation's checkpoint before it changes
    apply(coord, key_msg, value_msg)


# ---- replay

def _group(coord: GroupCoordinator, group_id: str, create: bool) -> ShareGroup | None:
    g = coord.groups.get(group_id)
    if isinstance(g, ShareGroup):
        return g
    if g is None and create:
        g = coord.groups[group_id] = ShareGroup(group_id)  # type: ignore[assignment]
        return g
    return None  # absent, or a group of another type: the record is not ours to apply


def _parts(tps: list) -> Partitions:
    return {tp.topic_id: frozenset(tp.partitions) for tp in tps if tp.partitions}


def apply(coord: GroupCoordinator, key: Any, value: Any | None) -> None:
    """Apply one record of types 9-15 to ``coord`` (at load, and by ``emit``)."""
    t = key_type(key)
    g = _group(coord, key.group_id, create=value is not None)
    if g is None:
        return
    if t == 11:  # ShareGroupMetadata
        if value is None:
            del coord.groups[key.group_id]
        else:
            g.group_epoch = value.epoch
    elif t == 9:  # ShareGroupPartitionMetadata
        g.subscription = {} if value is None else {
            m.topic_name: TopicMetadata(m.topic_id, m.topic_name, m.num_partitions)
            for m in value.topics}
    elif t == 10:  # ShareGroupMemberMetadata
        if value is None:
            g.members.pop(key.member_id, None)
        else:
            m = g.members.setdefault(key.member_id, ShareMember(key.member_id))
            m.rack_id, m.client_id, m.client_host = (value.rack_id, value.client_id,
                                                     value.client_host)
            m.subscribed_topic_names = tuple(value.subscribed_topic_names)
    elif t == 12:  # ShareGroupTargetAssignmentMetadata
        g.assignment_epoch = 0 if value is None else value.assignment_epoch
    elif t == 13:  # ShareGroupTargetAssignmentMember
        if value is None:
            g.target.pop(key.member_id, None)
        else:
            g.target[key.member_id] = _parts(value.topic_partitions)
    elif t == 14:  # ShareGroupCurrentMemberAssignment
        m = g.members.get(key.member_id)
        if value is None:
            if m is not None:
                m.member_epoch = m.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
                m.assigned = {}
        else:
            m = g.members.setdefault(key.member_id, ShareMember(key.member_id))
            m.member_epoch, m.previous_member_epoch = (value.member_epoch,
                                                       value.previous_member_epoch)
            m.assigned = _parts(value.assigned_partitions)
    elif t == 15:  # ShareGroupStatePartitionMetadata
        if value is None:
            g.initializing, g.initialized, g.deleting = {}, {}, {}
        else:
            g.initializing = {i.topic_id: InitTopic(i.topic_name, set(i.partitions),
                                                    i.create_timestamp)
                              for i in value.initializing_topics}
            g.initialized = {i.topic_id: InitTopic(i.topic_name, set(i.partitions),
                                                   i.create_timestamp)
                             for i in value.initialized_topics}
            g.deleting = {i.topic_id: i.topic_name for i in value.deleting_topics}


def _replay(coord: GroupCoordinator, key: Any, value: Any | None, live: bool) -> None:
    if not live:  # live: the operation that wrote the record applied it (emit)
        apply(coord, key, value)


register_replayer(range(9, 16), _replay)
