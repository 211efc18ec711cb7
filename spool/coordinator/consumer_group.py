"""A KIP-848 consumer group (``group.protocol=consumer``): its model and the replay of its records.

The group (Kafka's ``ConsumerGroup``) holds:

- ``group_epoch``: bumped whenever a member joins, leaves or changes its
  subscription, or the subscribed topics' metadata changes (record type 3);
- ``subscription_metadata``: name -> ``TopicMetadata`` (id, partition count)
  of every subscribed topic that exists, as of the last epoch bump (type 4);
- ``members``: member id -> ``ConsumerGroupMember``; its subscription part
  (instance id, rack, client, subscribed names and regex, rebalance timeout,
  server assignor: type 5) and its current assignment part (member epoch,
  previous epoch, ``MemberState``, assigned partitions and partitions pending
  revocation: type 8);
- ``assignment_epoch`` and ``target``: the target assignment computed for that
  epoch, member id -> topic id -> partitions (types 6 and 7);
- ``regexes``: every subscribed regular expression resolved against the
  topic names (type 16).

State (Kafka's ``ConsumerGroupState``): Empty (no members), Assigning (the
group epoch is ahead of the assignment epoch), Reconciling (some member is not
``STABLE`` at the assignment epoch), Stable.

The only way to change a group is ``apply(coordinator, key_msg, value_msg)``
with one record's generated key and value (None: a tombstone). It is what the
replayer registered for types 3-8 and 16 runs at load (``live=False``); an
operation (``spool.coordinator.consumer_ops``) builds its records and applies
them at once through the same function, so the live replay of those records
once they are in the log does nothing. ``apply`` replaces values (members are never changed
in place), which keeps ``copy`` cheap. Replaying a log therefore rebuilds
exactly the state the operations left. ``copy``/``restore`` serve the
coordinator's checkpoint: a failed append reverts the group.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from spool.protocol._generated import DATA_SCHEMAS

if TYPE_CHECKING:
    from spool.coordinator.coordinator import GroupCoordinator

log = logging.getLogger("spool.coordinator")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# Assignment: topic id -> partitions (empty sets never stored).
Partitions = dict[uuid.UUID, frozenset[int]]

TYPE_METADATA = 3
TYPE_PARTITION_METADATA = 4
TYPE_MEMBER_METADATA = 5
TYPE_TARGET_METADATA = 6
TYPE_TARGET_MEMBER = 7
TYPE_CURRENT_ASSIGNMENT = 8
TYPE_REGEX = 16
TYPES = (TYPE_METADATA, TYPE_PARTITION_METADATA, TYPE_MEMBER_METADATA, TYPE_TARGET_METADATA,
         TYPE_TARGET_MEMBER, TYPE_CURRENT_ASSIGNMENT, TYPE_REGEX)


class MemberState(enum.IntEnum):
    """Kafka's MemberState (the byte in ConsumerGroupCurrentMemberAssignmentValue.State)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


@dataclass(frozen=True)
class ClassicMetadata:
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # a member using the classic protocol (JoinGroup/SyncGroup, KIP-848's migration): its
    # session timeout and its JoinGroup protocols (name, metadata); None: the consumer protocol
    classic: ClassicMetadata | None = None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    def subscription(self) -> tuple:
        """The fields of the member metadata record (type 5)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def current(self) -> tuple:
        """The fields of the current assignment record (type 8)."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation)


class ConsumerGroup:
    type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.target: dict[str, Partitions] = {}
        self.regexes: dict[str, ResolvedRegex] = {}

    # ---- checkpoints

    def copy(self) -> ConsumerGroup:
        """A checkpoint: the maps are copied, their values are shared (``apply`` replaces a
        member, an assignment or a metadata entry, it never changes one in place), so a
        checkpoint costs O(members), not a deep copy of every assignment."""
        saved = ConsumerGroup(self.group_id)
        saved.__dict__.update({k: (dict(v) if isinstance(v, dict) else v)
                               for k, v in self.__dict__.items()})
        return saved

    def restore(self, saved: ConsumerGroup) -> None:
        self.__dict__.clear()
        self.__dict__.update(saved.copy().__dict__)

    def snapshot(self) -> dict[str, Any]:
        """Everything the records determine (tests compare a replayed group with a live one)."""
        return {"epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
                "members": {k: vars(m) for k, m in sorted(self.members.items())},
                "metadata": dict(sorted(self.subscription_metadata.items())),
                "target": dict(sorted(self.target.items())),
                "regexes": dict(sorted(self.regexes.items()))}

    # ---- derived state

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def on_loaded(self, coord: GroupCoordinator) -> None:
        """After a load: the members' session timers (``consumer_ops.loaded``)."""
        from spool.coordinator import consumer_ops

        consumer_ops.loaded(coord, self)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> the epoch of the member holding it (assigned or pending
        revocation); absent: free."""
        out: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            for parts in (m.assigned, m.pending_revocation):
                for tid, ps in parts.items():
                    for p in ps:
                        out[(tid, p)] = m.member_epoch
        return out

    def subscribed_names(self, members: Iterable[ConsumerGroupMember]) -> set[str]:
        """Topic names subscribed by ``members``: by name, or through a resolved regex."""
        names: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                resolved = self.regexes.get(m.subscribed_topic_regex)
                if resolved is not None:
                    names |= resolved.topics
        return names

    def all_classic_except(self, member_id: str) -> bool:
        """Every member but ``member_id`` uses the classic protocol, and it does not."""
        m = self.members.get(member_id)
        return m is not None and m.classic is None and all(
            o.classic is not None for mid, o in self.members.items() if mid != member_id)

    def supports_classic(self, protocol_type: str, names: Iterable[str]) -> bool:
        """A classic member may join: protocol type ``consumer`` and, once the group has
        members, a protocol every classic member supports (Kafka's supportsClassicProtocols)."""
        if protocol_type != "consumer":
            return False
        names = list(names)
        if not self.members:
            return bool(names)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(n in {p for p, _ in c.protocols} for c in classic) for n in names)

    def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str | None:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for m in members:
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return None
        return max(sorted(counts), key=lambda n: counts[n])


class TopicsView(Protocol):
    """The topics a coordinator sees (the broker's metadata)."""

    def names(self) -> Iterable[str]: ...

    def lookup(self, name: str) -> TopicMetadata | None: ...


class StaticTopics:
    """A ``TopicsView`` over a dict (tests; the coordinator's default: no topics)."""

    def __init__(self, topics: Mapping[str, tuple[uuid.UUID, int]] | None = None) -> None:
        self.topics = dict(topics or {})

    def names(self) -> Iterable[str]:
        return self.topics.keys()

    def lookup(self, name: str) -> TopicMetadata | None:
        t = self.topics.get(name)
        return None if t is None else TopicMetadata(t[0], name, t[1])


# ---- records (key and value messages of the generated schemas)

def _msg(name: str, **fields: Any) -> Any:
    return DATA_SCHEMAS[name](**fields)


def _tps(cls_name: str, parts: Mapping[uuid.UUID, frozenset[int]]) -> list:
    cls = _struct(cls_name)
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(parts.items(),
                                                                      key=lambda kv: str(kv[0]))]


def _struct(path: str) -> Any:
    """A nested struct class of a generated record, ``"Module.Class"``."""
    import importlib

    module, cls = path.split(".")
    return getattr(importlib.import_module(f"spool.protocol._generated.{module}"), cls)


def _parts(entries: Iterable[Any]) -> Partitions:
    out: Partitions = {}
    for e in entries:
        if e.partitions:
            out[e.topic_id] = frozenset(out.get(e.topic_id, frozenset()) | set(e.partitions))
    return out


def epoch_record(group_id: str, epoch: int | None) -> tuple[Any, Any]:
    return (_msg("ConsumerGroupMetadataKey", group_id=group_id),
            None if epoch is None else _msg("ConsumerGroupMetadataValue", epoch=epoch))


def metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata] | None) -> tuple[Any, Any]:
    key = _msg("ConsumerGroupPartitionMetadataKey", group_id=group_id)
    if metadata is None:
        return key, None
    tm = _struct("consumer_group_partition_metadata_value.TopicMetadata")
    return key, _msg("ConsumerGroupPartitionMetadataValue", topics=[
        tm(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
           partition_metadata=[]) for _, t in sorted(metadata.items())])


def member_record(group_id: str, member_id: str,
                  m: ConsumerGroupMember | None) -> tuple[Any, Any]:
    key = _msg("ConsumerGroupMemberMetadataKey", group_id=group_id, member_id=member_id)
    if m is None:
        return key, None
    return key, _msg("ConsumerGroupMemberMetadataValue", instance_id=m.instance_id,
                     rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                     subscribed_topic_names=list(m.subscribed_topic_names),
                     subscribed_topic_regex=m.subscribed_topic_regex,
                     rebalance_timeout_ms=m.rebalance_timeout_ms,
                     server_assignor=m.server_assignor,
                     classic_member_metadata=None if m.classic is None else _struct(
                         "consumer_group_member_metadata_value.ClassicMemberMetadata")(
                         session_timeout_ms=m.classic.session_timeout_ms,
                         supported_protocols=[
                             _struct("consumer_group_member_metadata_value.ClassicProtocol")(
                                 name=n, metadata=md) for n, md in m.classic.protocols]))


def target_epoch_record(group_id: str, epoch: int | None) -> tuple[Any, Any]:
    return (_msg("ConsumerGroupTargetAssignmentMetadataKey", group_id=group_id),
            None if epoch is None else _msg("ConsumerGroupTargetAssignmentMetadataValue",
                                            assignment_epoch=epoch))


def target_record(group_id: str, member_id: str, parts: Partitions | None) -> tuple[Any, Any]:
    key = _msg("ConsumerGroupTargetAssignmentMemberKey", group_id=group_id, member_id=member_id)
    if parts is None:
        return key, None
    return key, _msg("ConsumerGroupTargetAssignmentMemberValue", topic_partitions=_tps(
        "consumer_group_target_assignment_member_value.TopicPartition", parts))


def current_record(group_id: str, member_id: str,
                   m: ConsumerGroupMember | None) -> tuple[Any, Any]:
    key = _msg("ConsumerGroupCurrentMemberAssignmentKey", group_id=group_id, member_id=member_id)
    if m is None:
        return key, None
    tp = "consumer_group_current_member_assignment_value.TopicPartitions"
    return key, _msg("ConsumerGroupCurrentMemberAssignmentValue", member_epoch=m.member_epoch,
                     previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                     assigned_partitions=_tps(tp, m.assigned),
                     partitions_pending_revocation=_tps(tp, m.pending_revocation))


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex | None) -> tuple[Any, Any]:
    key = _msg("ConsumerGroupRegularExpressionKey", group_id=group_id, regular_expression=regex)
    if resolved is None:
        return key, None
    return key, _msg("ConsumerGroupRegularExpressionValue", topics=sorted(resolved.topics),
                     version=resolved.version, timestamp=resolved.timestamp)


# ---- the one way to change a consumer group

def _group(coord: GroupCoordinator, group_id: str, create: bool) -> ConsumerGroup | None:
    group = coord.groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        return group
    if not create:
        return None
    if group is not None and (getattr(group, "members", None) or group.type != "classic"):
        log.warning("consumer group record for %s, which is a non-empty %s group: replaced",
                    group_id, group.type)
    new = ConsumerGroup(group_id)
    coord.groups[group_id] = new  # an empty classic group (offsets only) becomes this one
    return new


def apply(coord: GroupCoordinator, key: Any, value: Any | None) -> None:
    """Apply one consumer group record (type 3-8 or 16) to ``coord`` (module doc)."""
    t = type(key).VALID_VERSIONS[0]
    coord.touch(key.group_id)  # saved in the operation's checkpoint before it changes
    group = _group(coord, key.group_id, value is not None)
    if group is None:
        return  # a tombstone for a group that is gone
    if t == TYPE_METADATA:
        if value is not None:
            group.group_epoch = value.epoch
        elif coord.groups.get(key.group_id) is group:
            del coord.groups[key.group_id]
    elif t == TYPE_PARTITION_METADATA:
        group.subscription_metadata = {} if value is None else {
            tm.topic_name: TopicMetadata(tm.topic_id, tm.topic_name, tm.num_partitions)
            for tm in value.topics}
    elif t == TYPE_MEMBER_METADATA:
        if value is None:
            group.members.pop(key.member_id, None)
            return
        m = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.members[key.member_id] = replace(
            m, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic=None if value.classic_member_metadata is None else ClassicMetadata(
                value.classic_member_metadata.session_timeout_ms,
                tuple((p.name, bytes(p.metadata))
                      for p in value.classic_member_metadata.supported_protocols)))
    elif t == TYPE_TARGET_METADATA:
        group.assignment_epoch = -1 if value is None else value.assignment_epoch
    elif t == TYPE_TARGET_MEMBER:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = _parts(value.topic_partitions)
    elif t == TYPE_CURRENT_ASSIGNMENT:
        if value is None:
            m = group.members.get(key.member_id)
            if m is not None:
                group.members[key.member_id] = replace(
                    m, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                    pending_revocation={})
            return
        m = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.members[key.member_id] = replace(
            m, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=(MemberState(value.state) if value.state in MemberState._value2member_map_
                   else MemberState.UNKNOWN),
            assigned=_parts(value.assigned_partitions),
            pending_revocation=_parts(value.partitions_pending_revocation))
    elif t == TYPE_REGEX:
        if value is None:
            group.regexes.pop(key.regular_expression, None)
        else:
            group.regexes[key.regular_expression] = ResolvedRegex(
                frozenset(value.topics), value.version, value.timestamp)


def replay(coord: GroupCoordinator, key: Any, value: Any | None, live: bool) -> None:
    """The registered replayer: at load apply the record; live, the operation that wrote it
    has applied it already."""
    if not live:
        apply(coord, key, value)
