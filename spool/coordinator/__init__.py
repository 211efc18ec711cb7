"""Group coordinator: classic consumer groups and committed offsets.

A deterministic state machine over the records of ``__consumer_offsets``
(``schema``); operations return ``Result`` (records to append, then replies
to release) and change durable state only when their records are replayed
after the append (``spool.broker.coordinator_log``). ``coordinator`` holds membership (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, timeouts), ``admin`` offsets and administration.
"""

# importing them registers the replayers of record types 3-8, 16 and 9-15
from spool.coordinator import consumer_ops, share_group  # noqa: F401
from spool.coordinator.coordinator import CoordinatorConfig, GroupCoordinator, JoinRequest
from spool.coordinator.group import ClassicGroup, GroupState, IllegalStateTransition, Member
from spool.coordinator.result import JoinResult, OutRecord, Result, SyncResult
from spool.coordinator.schema import partition_for

__all__ = [
    "ClassicGroup", "CoordinatorConfig", "GroupCoordinator", "GroupState", "IllegalStateTransition",
    "JoinRequest", "JoinResult", "Member", "OutRecord", "Result", "SyncResult", "partition_for",
]
