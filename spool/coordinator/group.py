"""A classic consumer group: its state, members and the legal state changes.

States and the states each may be entered from (Kafka's valid previous
states; anything else raises ``IllegalStateTransition``)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Empty, CompletingRebalance, Stable
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- Empty, PreparingRebalance, CompletingRebalance, Stable, Dead

Empty: no members (maybe committed offsets). PreparingRebalance: members are
(re)joining; their JoinGroup responses wait. CompletingRebalance: the join
round is over, a new generation and protocol are chosen, the leader's
SyncGroup is awaited. Stable: everyone has an assignment. Dead: deleted or
expired, about to be forgotten.

A ``Member``'s ``join_reply``/``sync_reply`` hold the callables that answer
its parked JoinGroup/SyncGroup. ``ClassicGroup.copy``/``restore`` and the
``MemberJournal`` let the coordinator undo an operation whose records
could not be appended. This module is pure data and rules; the
``GroupCoordinator`` drives it and owns time.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.EMPTY, S.COMPLETING_REBALANCE, S.STABLE}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.EMPTY, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A transition not in ``VALID_PREVIOUS``: a coordinator bug, never a client's fault."""


Reply = Callable[[Any], None]


class MemberJournal:
    """While open, the fields every ``Member`` had before its first change (so a failed
    operation can be undone). One at a time: the coordinator is single-threaded."""

    saved: dict[int, tuple[Member, dict[str, Any]]] | None = None

    @classmethod
    def open(cls) -> None:
        cls.saved = {}

    @classmethod
    def close(cls) -> dict[int, tuple[Member, dict[str, Any]]]:
        saved, cls.saved = cls.saved or {}, None
        return saved

    @classmethod
    def undo(cls) -> None:
        for member, fields in cls.close().values():
            member.__dict__.clear()
            member.__dict__.update(fields)


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_reply: Reply | None = None
    sync_reply: Reply | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        saved = MemberJournal.saved
        if saved is not None and id(self) not in saved:  # copy-on-write, first change only
            saved[id(self)] = (self, dict(self.__dict__))
        object.__setattr__(self, name, value)

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class ClassicGroup:
    type: ClassVar[str] = "classic"  # Kafka's group type (ListGroups, DescribeGroups)
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)
    initial_delay_remaining_ms: int = 0  # rebalance time still allowed for the initial delay
    new_member_added: bool = False
    in_initial_delay: bool = False

    def copy(self) -> ClassicGroup:
        """A copy to restore with ``restore``. The members themselves are not copied (that
        would cost a copy of every member before every operation): a ``MemberJournal``
        keeps the old fields of those an operation changes."""
        group = object.__new__(ClassicGroup)
        group.__dict__.update(self.__dict__)
        group.members = dict(self.members)
        group.static_members = dict(self.static_members)
        group.pending_members = set(self.pending_members)
        return group

    def restore(self, saved: ClassicGroup) -> None:
        """Become ``saved`` again, keeping this object's identity (timers refer to it)."""
        self.__dict__.update(vars(saved))

    def transition(self, new: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[new]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {new.value}")
        self.state = new
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def size(self) -> int:
        return len(self.members) + len(self.pending_members)

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its first candidate; most votes wins, ties by the leader's order."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        order = self.members[self.leader_id].protocol_names() if self.leader_id in self.members else []
        rank = {n: i for i, n in enumerate(order)}
        return max(votes, key=lambda n: (votes[n], -rank.get(n, len(rank))))

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_reply for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
