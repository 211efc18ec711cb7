"""What a coordinator operation produces: records to append, then replies to release.

The runtime (``spool.broker.coordinator_log``) appends ``records`` (each to
its owner's partition: a group's ``__consumer_offsets`` partition, a
transactional id's ``__transaction_state`` one), replays them into the
state machine, and only then calls every ``(reply, value)`` in ``replies``,
in order. A reply may answer the request that caused the operation or a
request parked earlier (a JoinGroup waiting for the rebalance to complete).
If the append fails nothing is replayed and every reply gets the error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Reply = Callable[[Any], None]


@dataclass(frozen=True)
class OutRecord:
    owner: str  # the group id or transactional id: it picks the partition
    key: bytes
    value: bytes | None  # None: a tombstone


@dataclass
class Result:
    records: list[OutRecord] = field(default_factory=list)
    replies: list[tuple[Reply, Any]] = field(default_factory=list)

    def reply(self, fn: Reply | None, value: Any) -> None:
        if fn is not None:
            self.replies.append((fn, value))


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False  # JoinGroup v9+: a static leader rejoined a Stable group


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]
