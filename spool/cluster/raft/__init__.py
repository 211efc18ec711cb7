"""A sans-I/O Raft core in the KRaft style (KIP-595, KIP-996 pre-vote).

``RaftNode`` (node.py, with elections.py and replication.py) is the state machine;
``messages`` the RPCs named after Kafka's; ``store`` the two storage protocols it needs (``RaftLog``, ``QuorumStateStore``) and
``memory`` their in-memory implementations; ``outputs`` what it asks its shell to do;
``config`` its timers by Kafka's ``controller.quorum.*`` names. ``tests/sim`` drives it
under a seeded simulated network and clock.
"""

from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.memory import MemoryQuorumStateStore, MemoryRaftLog, MemoryRecords
from spool.cluster.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    OffsetAndEpoch,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from spool.cluster.raft.node import RaftNode
from spool.cluster.raft.outputs import (
    HighWatermarkAdvanced,
    LeaderChanged,
    Output,
    Respond,
    Send,
    SnapshotInstalled,
)
from spool.cluster.raft.roles import (
    CANDIDATE,
    FOLLOWER,
    LEADER,
    PROSPECTIVE,
    RESIGNED,
    UNATTACHED,
    RaftInvariantError,
)
from spool.cluster.raft.store import (
    ElectionState,
    LeaderChange,
    LogEntry,
    QuorumStateStore,
    RaftLog,
    Records,
)

__all__ = [
    "CANDIDATE", "FOLLOWER", "LEADER", "PROSPECTIVE", "RESIGNED", "UNATTACHED",
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse", "ElectionState",
    "EndQuorumEpochRequest", "EndQuorumEpochResponse", "EpochEndOffset", "FetchRequest",
    "FetchResponse", "FetchSnapshotRequest", "FetchSnapshotResponse", "HighWatermarkAdvanced",
    "LeaderChange", "LeaderChanged", "LeaderIdAndEpoch", "LogEntry", "MemoryQuorumStateStore",
    "MemoryRaftLog", "MemoryRecords", "OffsetAndEpoch", "Output", "QuorumStateStore",
    "RaftConfig", "RaftInvariantError", "RaftLog", "RaftNode", "Records", "Request", "Respond",
    "Response", "Send", "SnapshotId", "SnapshotInstalled", "VoteRequest", "VoteResponse",
]
