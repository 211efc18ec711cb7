"""The group coordinator: classic groups as a deterministic state machine.

Contract:

- Every operation is a plain method call on the event loop's thread (never
  concurrent) and returns a ``Result``: records for ``__consumer_offsets``
  and the replies to release once they are appended. A JoinGroup or a
  follower's SyncGroup that must wait parks its ``reply`` callable on the
  member; a later operation or timer answers it through that later
  operation's ``Result``.
- Time comes only from the injected clock, member ids only from the
  injected ``new_id`` (default: a random UUID). Deadlines (session timeouts,
  rebalance timeouts, the initial rebalance delay, pending member ids,
  offset retention) are kept in ``Timers``; the owner calls ``due()`` at
  or after ``next_deadline()`` and fires each due timer as an operation
  (``tick()`` fires them all in one ``Result``). Tests drive a ``FakeClock``.
- Durability: committed offsets, a group's existence for its offsets and a
  group's deletion change only by ``replay(record)``, which the runtime
  calls once the record is in the log (``spool.broker.coordinator_log``);
  an operation never replays what it writes. Group membership lives in
  memory (as Kafka's classic groups, whose records are not replayed live);
  its durable projection is the GroupMetadata record written when a
  generation's assignment is settled (Stable), when the group empties and
  when a static member is replaced. So that a failed append leaves no
  trace, the runtime takes ``checkpoint(group_ids)`` before an operation
  that may change those groups and ``revert``s to it if the append fails
  (Kafka's snapshot registry revert): the groups' fields, the members an
  operation changed (a copy-on-write ``MemberJournal``) and the timers
  come back; ``accept`` keeps the changes once the records are in. ``load(key, value)`` replays a record from the
  log at startup; ``loaded()`` then restarts the members' session timers.
  Replaying the same log always yields the same state.
- Errors are Kafka codes in the reply values; a bad request never raises.

Offsets, listings and deletion live in ``spool.coordinator.admin``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from spool.coordinator.consumer_group import ConsumerGroup, StaticTopics, TopicsView
from spool.coordinator.group import ClassicGroup, GroupState, Member, MemberJournal
from spool.coordinator.offsets import OffsetStore
from spool.coordinator.records import GROUP_TYPES, decode, record_type
from spool.coordinator.result import JoinMember, JoinResult, OutRecord, Reply, Result, SyncResult
from spool.coordinator.schema import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    SchemaError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
)
from spool.coordinator.timers import Timers
from spool.protocol.errors import Errors
from spool.util.logs import fields

log = logging.getLogger("spool.coordinator")
S = GroupState

# Replayers of the KIP-848/KIP-932 record types (``spool.coordinator.records.GROUP_TYPES``):
# ``fn(coordinator, key_msg, value_msg_or_None, live)``, registered with ``register_replayer``
# by the modules that own those records. ``live`` is False while loading the log at start.
Replayer = Callable[["GroupCoordinator", Any, Any, bool], None]
TYPED_REPLAYERS: dict[int, Replayer] = {}


def register_replayer(types: Iterable[int], fn: Replayer) -> None:
    for t in types:
        if t in TYPED_REPLAYERS and TYPED_REPLAYERS[t] is not fn:
            raise ValueError(f"record type {t} already has a replayer")
        TYPED_REPLAYERS[t] = fn


@dataclass(frozen=True)
class CoordinatorConfig:
    """The broker settings the coordinator obeys (Kafka names in the field docs)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = 1000  # group.max.size (Kafka: 2^31-1, i.e. unbounded)
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    share_session_timeout_ms: int = 45000  # group.share.session.timeout.ms (after a load)
    # KIP-848 consumer groups (spool.coordinator.consumer_ops); the session timeout and the
    # heartbeat interval are per group: GroupCoordinator.group_config
    consumer_session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2147483647  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    reason: str | None = None  # JoinGroup v8+ (KIP-800): logged
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)


@dataclass
class Checkpoint:
    """The groups an operation may change, as they were before it (the timers and the
    members keep their own journals: ``Timers.begin``, ``MemberJournal``)."""

    groups: dict[str, ClassicGroup | ConsumerGroup | None]


class GroupCoordinator:
    def __init__(self, clock, config: CoordinatorConfig | None = None,
                 new_id: Callable[[], str] | None = None) -> None:
        self.clock = clock
        self.config = config or CoordinatorConfig()
        self.new_id = new_id or (lambda: str(uuid.uuid4()))
        self.groups: dict[str, Any] = {}  # ClassicGroup | ConsumerGroup | ...: one namespace
        self.offsets = OffsetStore()
        self.timers = Timers()
        self._checkpoint: Checkpoint | None = None  # open while an operation runs
        # the topics KIP-848 groups subscribe to (the runtime sets the broker's metadata)
        self.topics: TopicsView = StaticTopics()
        # a group's KIP-848 setting (consumer.session.timeout.ms...): broker.group_configs.get
        self.group_config: Callable[[str, str], Any] = self._default_group_config
        # a group's __consumer_offsets partition (the runtime sets partition_for's; a shard's
        # limits, as group.share.max.groups, count the groups of that partition)
        self.partition_of: Callable[[str], int] = lambda group_id: 0
        self._schedule_retention()

    def _default_group_config(self, group_id: str, name: str) -> Any:
        return {"consumer.session.timeout.ms": self.config.consumer_session_timeout_ms,
                "consumer.heartbeat.interval.ms": self.config.consumer_heartbeat_interval_ms,
                "share.session.timeout.ms": self.config.share_session_timeout_ms,
                }[name]

    # ---- time

    def now(self) -> int:
        return self.clock.now_ms()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self) -> Result:
        """Fire every timer that is due; one ``Result`` for all of them."""
        out = Result()
        for _, fn in self.timers.expired(self.now()):
            fn(out)
        return out

    def due(self) -> list[tuple[tuple, Callable[[Result], None]]]:
        """Remove and return the due timers as ``(key, fire)``; ``fire(out)`` runs one. Keys
        name the group they concern second (``("heartbeat", group, member)``), if any."""
        return self.timers.expired(self.now())

    # ---- checkpoints (a failed append leaves no trace)

    def checkpoint(self, group_ids: list[str]) -> Checkpoint:
        """Remember ``group_ids`` and start journaling timers, before an operation on them.
        A group the operation changes through records applied at once (KIP-848) is saved
        the first time it is touched, named here or not (``touch``)."""
        self.timers.begin()
        MemberJournal.open()
        self._checkpoint = Checkpoint({g: (self.groups[g].copy() if g in self.groups else None)
                                       for g in group_ids})
        return self._checkpoint

    def touch(self, group_id: str) -> None:
        """A group is about to change during an operation: save it in the open checkpoint
        if it is not there yet (Kafka's snapshot registry, per group)."""
        cp = self._checkpoint
        if cp is not None and group_id not in cp.groups:
            group = self.groups.get(group_id)
            cp.groups[group_id] = None if group is None else group.copy()

    def accept(self, cp: Checkpoint) -> None:
        """The operation's records are in the log: keep its changes."""
        self._checkpoint = None
        self.timers.commit()
        MemberJournal.close()

    def revert(self, cp: Checkpoint, answered: list[Reply]) -> None:
        """The append failed: restore the groups, members and timers of ``cp``. Parked
        requests in ``answered`` got the error already, so the restored members forget them."""
        self._checkpoint = None
        self.timers.rollback()
        MemberJournal.undo()
        done = {id(fn) for fn in answered}
        for gid, saved in cp.groups.items():
            live = self.groups.get(gid)
            if saved is None:
                self.groups.pop(gid, None)
                continue
            if live is None or type(live) is not type(saved):
                self.groups[gid] = live = saved
            else:
                live.restore(saved)
            if not isinstance(live, ClassicGroup):
                continue
            for m in live.members.values():
                if id(m.join_reply) in done:
                    m.join_reply = None
                if id(m.sync_reply) in done:
                    m.sync_reply = None

    def _at(self, key: tuple, delay_ms: int, fn) -> None:
        self.timers.schedule(key, self.now() + delay_ms, fn)

    # ---- records

    def _write_group(self, group: ClassicGroup, out: Result) -> None:
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms,
                            m.metadata(group.protocol_name), m.assignment)
                for m in group.members.values()
            ],
        )
        out.records.append(_record(group.group_id, encode_group_value(value)))

    def load(self, key: bytes | None, value: bytes | None) -> None:
        """Replay one ``__consumer_offsets`` record read back from the log at startup."""
        self._replay(key, value, live=False)

    def replay(self, record: OutRecord) -> None:
        """Apply one record this coordinator produced, now that it is in the log."""
        self._replay(record.key, record.value, live=True)

    def _replay(self, key: bytes | None, value: bytes | None, live: bool) -> None:
        if key is None:
            return
        try:
            t = record_type(key)
            if t in GROUP_TYPES:  # KIP-848 / KIP-932 records (spool.coordinator.records)
                replayer = TYPED_REPLAYERS.get(t)
                if replayer is None:
                    log.warning("skipping a __consumer_offsets record of type %d: not served", t)
                    return
                k_msg, v_msg = decode(key, value, GROUP_TYPES)
                replayer(self, k_msg, v_msg, live)
                return
            k = decode_key(key)
            if isinstance(k, OffsetKey):
                self.offsets.replay(k, None if value is None else decode_offset_value(value))
                if value is not None and k.group not in self.groups:
                    self.groups[k.group] = ClassicGroup(k.group, state_timestamp=self.now())
            elif value is None:
                if live and not isinstance(self.groups.get(k.group), ClassicGroup):
                    return  # written by the upgrade that made this group a consumer group
                group = self.groups.pop(k.group, None)
                if group is not None and live:
                    group.transition(S.DEAD, self.now())
            elif not live:  # live: the in-memory group is what this record projects
                self.groups[k.group] = _group_from_value(k, decode_group_value(value))
        except SchemaError as e:
            log.warning("skipping an unreadable __consumer_offsets record: %s", e)

    def loaded(self, group_ids: Iterable[str] | None = None) -> None:
        """After the last ``load``: start the session timers of the loaded members (of
        ``group_ids``, the groups of one partition just loaded; default every group)."""
        for gid in list(self.groups) if group_ids is None else group_ids:
            group = self.groups.get(gid)
            if group is not None and not isinstance(group, ClassicGroup):
                group.on_loaded(self)  # KIP-848/932 groups start their own sessions
                continue
            for member in group.members.values() if group is not None else ():
                self._heartbeat(group, member)

    def unload(self, group_ids: Iterable[str], error: object) -> int:
        """Forget ``group_ids`` (their ``__consumer_offsets`` partition is no longer led
        here): their parked JoinGroup/SyncGroup get ``error`` (NOT_COORDINATOR), their
        timers stop, their members and offsets are dropped. Outside any operation.
        Returns how many parked requests were answered."""
        drop = set(group_ids)
        answered = 0
        for gid in drop:
            group = self.groups.pop(gid, None)
            self.offsets.drop(gid)
            for m in group.members.values() if isinstance(group, ClassicGroup) else ():
                for fn in (m.join_reply, m.sync_reply):
                    if fn is not None:
                        fn(error)
                        answered += 1
                m.join_reply = m.sync_reply = None
        self.timers.cancel_where(lambda key: len(key) > 1 and key[1] in drop)
        return answered

    def group_ids(self) -> set[str]:
        """Every group known here: with members, or with committed offsets only."""
        return set(self.groups) | set(self.offsets.groups())

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{self.new_id()}"

    # ---- JoinGroup

    def join_group(self, req: JoinRequest, reply: Reply) -> Result:
        out = Result()
        if req.reason:
            log.info("group %s: member %r joins; client reason: %s", req.group_id, req.member_id,
                     req.reason)
        code = self._check_join(req)
        if code:
            out.reply(reply, JoinResult(code, member_id=req.member_id))
            return out
        group = self.groups.get(req.group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            from spool.coordinator import consumer_ops

            if not isinstance(group, ConsumerGroup):
                out.reply(reply, JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL,
                                            member_id=req.member_id))
                return out
            if not group.is_empty():  # a classic member joins the consumer group
                from spool.coordinator import consumer_classic

                consumer_classic.join(self, group, req, reply, out)
                return out
            consumer_ops.delete_group(self, group, out)  # an empty consumer group: replaced
            group = None
        created = group is None
        if group is None:
            if req.member_id:
                out.reply(reply, JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return out
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, state_timestamp=self.now())
        code = self._check_group_accepts(group, req)
        if code:
            if created:
                del self.groups[req.group_id]
            out.reply(reply, JoinResult(code, member_id=req.member_id))
        elif not req.member_id:
            self._join_unknown_member(group, req, reply, out)
        else:
            self._join_known_member(group, req, reply, out)
        return out

    def _check_join(self, req: JoinRequest) -> int:
        if not req.group_id:
            return Errors.INVALID_GROUP_ID
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return Errors.INVALID_SESSION_TIMEOUT
        return 0

    def _check_group_accepts(self, group: ClassicGroup, req: JoinRequest) -> int:
        if group.is_(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if not group.supports(req.protocol_type, [n for n, _ in req.protocols]):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        known = req.member_id in group.members or req.member_id in group.pending_members or (
            req.group_instance_id is not None and req.group_instance_id in group.static_members)
        if not known and group.size >= self.config.max_size:
            return Errors.GROUP_MAX_SIZE_REACHED
        return 0

    def _join_unknown_member(self, group: ClassicGroup, req: JoinRequest, reply: Reply,
                             out: Result) -> None:
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            self._replace_static_member(group, req, reply, out)
        elif instance is None and req.require_known_member_id:
            member_id = self._new_member_id(req.client_id)
            group.pending_members.add(member_id)
            self._at(("pending", group.group_id, member_id), req.session_timeout_ms,
                     lambda o: self._expire_pending(group, member_id, o))
            out.reply(reply, JoinResult(Errors.MEMBER_ID_REQUIRED, member_id=member_id))
        else:
            member_id = self._new_member_id(instance if instance is not None else req.client_id)
            self._add_member_and_rebalance(group, req, member_id, reply, out)

    def _join_known_member(self, group: ClassicGroup, req: JoinRequest, reply: Reply,
                           out: Result) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, req, member_id, reply, out)
            return
        code = self._check_member(group, member_id, req.group_instance_id)
        if code:
            out.reply(reply, JoinResult(code, member_id=member_id))
            return
        member = group.members[member_id]
        same = member.protocols == list(req.protocols)
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member(member, req, reply, out)
            self._maybe_complete_join(group, out)
        elif group.is_(S.COMPLETING_REBALANCE) and same:
            out.reply(reply, self._join_result(group, member_id))
        elif group.is_(S.STABLE) and same and member_id != group.leader_id:
            out.reply(reply, self._join_result(group, member_id))
        else:  # Stable with new protocols or the leader rejoining; CompletingRebalance changed
            self._update_member(member, req, reply, out)
            self._prepare_rebalance(group, out)

    def _check_member(self, group: ClassicGroup, member_id: str, instance: str | None) -> int:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID for a request naming a member, else 0."""
        if instance is not None and instance in group.static_members:
            return 0 if group.static_members[instance] == member_id else Errors.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return Errors.UNKNOWN_MEMBER_ID
        if instance is not None:  # a dynamic member claiming an instance id it never had
            return Errors.FENCED_INSTANCE_ID
        return 0

    def _update_member(self, member: Member, req: JoinRequest, reply: Reply, out: Result) -> None:
        if member.join_reply is not None and member.join_reply is not reply:
            out.reply(member.join_reply, JoinResult(Errors.REBALANCE_IN_PROGRESS,
                                                    member_id=member.member_id))
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.join_reply = reply

    def _add_member_and_rebalance(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                                  reply: Reply, out: Result) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), join_reply=reply)
        group.add(member)
        group.new_member_added = True
        self._heartbeat(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group, out)
        else:
            self._prepare_rebalance(group, out)

    def _replace_static_member(self, group: ClassicGroup, req: JoinRequest, reply: Reply,
                               out: Result) -> None:
        """KIP-345: a known group.instance.id with a fresh member id takes the old one's place."""
        old_id = group.static_members[req.group_instance_id]
        old = group.members.pop(old_id)
        fenced = JoinResult(Errors.FENCED_INSTANCE_ID, member_id=old_id)
        out.reply(old.join_reply, fenced)
        out.reply(old.sync_reply, SyncResult(Errors.FENCED_INSTANCE_ID))
        self.timers.cancel(("heartbeat", group.group_id, old_id))
        new_id = self._new_member_id(req.group_instance_id)
        was_leader = group.leader_id == old_id
        member = Member(new_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[req.group_instance_id] = new_id
        if was_leader:
            group.leader_id = new_id
        self._heartbeat(group, member)
        if group.is_(S.STABLE) and old.protocols == member.protocols:
            # No rebalance. From JoinGroup v9 (KIP-814) a rejoining leader gets the members
            # and skip_assignment: it learns the subscriptions but computes no assignment.
            # Before, the old leader id keeps it a follower, so it does not compute an
            # assignment a Stable group would never hand out.
            self._write_group(group, out)
            if req.supports_skip_assignment:
                result = self._join_result(group, new_id)
                out.reply(reply, replace(result, skip_assignment=was_leader))
            else:
                out.reply(reply, JoinResult(0, new_id, group.generation, group.protocol_type,
                                            group.protocol_name,
                                            old_id if was_leader else group.leader_id))
        elif group.is_(S.PREPARING_REBALANCE):
            member.join_reply = reply
            self._maybe_complete_join(group, out)
        else:
            member.join_reply = reply
            self._prepare_rebalance(group, out)

    def _join_result(self, group: ClassicGroup, member_id: str) -> JoinResult:
        members: tuple[JoinMember, ...] = ()
        if member_id == group.leader_id:
            members = tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(0, member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members)

    # ---- rebalancing

    def _prepare_rebalance(self, group: ClassicGroup, out: Result) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                out.reply(m.sync_reply, SyncResult(Errors.REBALANCE_IN_PROGRESS))
                m.sync_reply = None
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.now())
        key = ("join", group.group_id)
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.new_member_added = False
            group.in_initial_delay = True
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            self._at(key, delay, lambda o: self._initial_delay_over(group, delay, o))
            return
        self._at(key, group.max_rebalance_timeout_ms(), lambda o: self._rebalance_timeout(group, o))
        self._maybe_complete_join(group, out)

    def _initial_delay_over(self, group: ClassicGroup, delay: int, out: Result) -> None:
        """group.initial.rebalance.delay.ms: wait again while members keep arriving."""
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            step = min(delay, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= step
            group.new_member_added = False
            self._at(("join", group.group_id), step, lambda o: self._initial_delay_over(group, delay, o))
            return
        group.in_initial_delay = False
        if group.is_(S.PREPARING_REBALANCE):
            self._complete_join(group, out)

    def _rebalance_timeout(self, group: ClassicGroup, out: Result) -> None:
        if group.is_(S.PREPARING_REBALANCE):
            self._complete_join(group, out)

    def _maybe_complete_join(self, group: ClassicGroup, out: Result) -> None:
        if (group.is_(S.PREPARING_REBALANCE) and not group.in_initial_delay
                and group.all_members_joined()):
            self._complete_join(group, out)

    def _complete_join(self, group: ClassicGroup, out: Result) -> None:
        self.timers.cancel(("join", group.group_id))
        for m in [m for m in group.members.values() if m.join_reply is None]:
            self._remove_member(group, m.member_id, out, rebalance=False)
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, self.now())
            self._write_group(group, out)
            return
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, self.now())
        log.info("group %s rebalanced: generation %d with %d members (protocol %s)",
                 group.group_id, group.generation, len(group.members), group.protocol_name,
                 extra=fields(group=group.group_id, generation=group.generation,
                              members=len(group.members),
                              member_ids=sorted(group.members)[:20], protocol=group.protocol_name))
        for m in group.members.values():
            out.reply(m.join_reply, self._join_result(group, m.member_id))
            m.join_reply = None
            self._heartbeat(group, m)

    # ---- members leaving

    def _heartbeat(self, group: ClassicGroup, member: Member) -> None:
        self._at(("heartbeat", group.group_id, member.member_id), member.session_timeout_ms,
                 lambda o: self._session_expired(group, member.member_id, o))

    def _session_expired(self, group: ClassicGroup, member_id: str, out: Result) -> None:
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        if member.join_reply is not None or member.sync_reply is not None:
            self._heartbeat(group, member)  # parked requests keep a member alive
            return
        log.info("group %s: member %s session timed out", group.group_id, member_id)
        self._remove_member(group, member_id, out)

    def _expire_pending(self, group: ClassicGroup, member_id: str, out: Result) -> None:
        group.pending_members.discard(member_id)
        self._maybe_complete_join(group, out)

    def _remove_member(self, group: ClassicGroup, member_id: str, out: Result,
                       rebalance: bool = True) -> None:
        member = group.remove(member_id)
        self.timers.cancel(("heartbeat", group.group_id, member_id))
        out.reply(member.join_reply, JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member_id))
        out.reply(member.sync_reply, SyncResult(Errors.UNKNOWN_MEMBER_ID))
        if not rebalance:
            return
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, out)
        elif group.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group, out)

    # ---- SyncGroup, Heartbeat, LeaveGroup

    def sync_group(self, group_id: str, generation: int, member_id: str, instance: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], reply: Reply) -> Result:
        out = Result()
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):  # a classic member of a consumer group
            from spool.coordinator import consumer_classic

            consumer_classic.sync(self, group, generation, member_id, instance, protocol_type,
                                  protocol_name, reply, out)
            return out
        code = self._check_generation(group, member_id, instance, generation)
        if not code and ((protocol_type and protocol_type != group.protocol_type)
                         or (protocol_name and protocol_name != group.protocol_name)):
            code = Errors.INCONSISTENT_GROUP_PROTOCOL
        if not code and group.is_(S.PREPARING_REBALANCE):
            code = Errors.REBALANCE_IN_PROGRESS
        if code:
            out.reply(reply, SyncResult(code))
            return out
        member = group.members[member_id]
        self._heartbeat(group, member)
        if group.is_(S.STABLE):
            out.reply(reply, SyncResult(0, group.protocol_type, group.protocol_name, member.assignment))
            return out
        member.sync_reply = reply
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            group.transition(S.STABLE, self.now())
            self._write_group(group, out)
            for m in group.members.values():
                out.reply(m.sync_reply, SyncResult(0, group.protocol_type, group.protocol_name,
                                                   m.assignment))
                m.sync_reply = None
        return out

    def _check_generation(self, group: ClassicGroup | None, member_id: str, instance: str | None,
                          generation: int) -> int:
        if not isinstance(group, ClassicGroup) or group.is_(S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID  # no such classic group (or one of another type)
        if group.is_(S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        code = self._check_member(group, member_id, instance)
        if code:
            return code
        if generation != group.generation:
            return Errors.ILLEGAL_GENERATION
        return 0

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance: str | None = None) -> tuple[Result, int]:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):  # a classic member of a consumer group
            from spool.coordinator import consumer_classic

            return Result(), consumer_classic.heartbeat(self, group, generation, member_id,
                                                        instance)
        code = self._check_generation(group, member_id, instance, generation)
        if code:
            return Result(), code
        self._heartbeat(group, group.members[member_id])
        if group.is_(S.PREPARING_REBALANCE):
            return Result(), Errors.REBALANCE_IN_PROGRESS
        return Result(), 0

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[Result, list[int]]:
        """Remove each (member_id, group_instance_id); one error code per member."""
        out = Result()
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):  # classic members of a consumer group
            from spool.coordinator import consumer_classic

            return out, consumer_classic.leave(self, group, members, out)
        codes = []
        for member_id, instance in members:
            if not isinstance(group, ClassicGroup) or group.is_(S.DEAD):
                codes.append(Errors.UNKNOWN_MEMBER_ID)
                continue
            if instance is not None and instance in group.static_members:
                real = group.static_members[instance]
                if member_id and member_id != real:
                    codes.append(Errors.FENCED_INSTANCE_ID)
                    continue
                member_id = real
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group_id, member_id))
                self._maybe_complete_join(group, out)
                codes.append(0)
            elif member_id in group.members:
                log.info("group %s: member %s left", group_id, member_id)
                self._remove_member(group, member_id, out)
                codes.append(0)
            else:
                codes.append(Errors.UNKNOWN_MEMBER_ID)
        return out, codes

    # ---- retention

    def _schedule_retention(self) -> None:
        self._at(("retention",), self.config.retention_check_interval_ms, self._run_retention)

    def _run_retention(self, out: Result) -> None:
        from spool.coordinator.admin import expire_offsets

        expire_offsets(self, out)
        self._schedule_retention()


def _record(group_id: str, value: bytes | None) -> OutRecord:
    return OutRecord(group_id, encode_group_key(GroupKey(group_id)), value)


def _group_from_value(key: GroupKey, v: GroupValue) -> ClassicGroup:
    group = ClassicGroup(key.group, generation=v.generation, protocol_type=v.protocol_type or None,
                         protocol_name=v.protocol, state_timestamp=v.current_state_timestamp)
    for m in v.members:
        group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout, m.session_timeout, v.protocol_type,
                         [(v.protocol or "", m.subscription)], assignment=m.assignment))
    group.leader_id = v.leader if v.leader in group.members else group.leader_id
    group.state = S.STABLE if group.members else S.EMPTY
    return group
