"""The roles a ``RaftNode`` can be in (Kafka's EpochState classes, as names) and the
error it raises when asked to break Raft. See ``node`` for what each role does."""

from __future__ import annotations

NEVER = 1 << 62  # a deadline that never comes

UNATTACHED = "unattached"
PROSPECTIVE = "prospective"
CANDIDATE = "candidate"
LEADER = "leader"
FOLLOWER = "follower"
RESIGNED = "resigned"


class RaftInvariantError(AssertionError):
    """The core was asked to do something Raft forbids (a bug, not a fault to survive)."""
