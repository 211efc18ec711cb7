"""The ``quorum-state`` file: a node's durable vote and epoch (Kafka's FileQuorumStateStore).

One line of JSON in ``<metadata.log.dir>/__cluster_metadata-0/quorum-state``,
written as Kafka writes it at ``data_version`` 0 (static voters,
``controller.quorum.voters``)::

    {"clusterId":"","leaderId":1,"leaderEpoch":7,"votedId":-1,"appliedOffset":0,
     "currentVoters":null,"data_version":0}

``leaderId``/``votedId`` are -1 when unknown/none. Kafka's version 1
(``votedDirectoryId`` instead of the v0-only fields) is read too.

Durability: ``write`` replaces the file atomically (``quorum-state.tmp``,
fsync, rename, fsync the directory): after a crash the file holds the old
state or the new one, never a torn line. A vote is durable before the
raft core lets its VoteResponse leave (the driver writes, then sends).
A file that does not parse is an error (``QuorumStateError``): a node
that forgot its vote could vote twice in one epoch, so it does not start.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from spool.util.fileio import TMP_SUFFIX, atomic_write

FILE_NAME = "quorum-state"
DATA_VERSION = 0
_SUPPORTED = (0, 1)


class QuorumStateError(Exception):
    """The quorum-state file exists but cannot be read."""


@dataclass(frozen=True)
class StoredElection:
    """What the file holds: the epoch, the leader if known, the vote if cast."""

    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1


def read_quorum_state(path: Path) -> StoredElection | None:
    """The stored election, or None when no file exists (a fresh node)."""
    try:
        line = path.read_text(encoding="utf-8").splitlines()[0]
    except FileNotFoundError:
        return None
    except (OSError, IndexError, UnicodeDecodeError) as e:
        raise QuorumStateError(f"{path}: unreadable: {e}") from e
    try:
        data = json.loads(line)
        version = int(data["data_version"])
        if version not in _SUPPORTED:
            raise ValueError(f"data_version {version} is not one of {_SUPPORTED}")
        return StoredElection(
            leader_epoch=int(data.get("leaderEpoch", -1)),
            leader_id=int(data.get("leaderId", -1)),
            voted_id=int(data.get("votedId", -1)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise QuorumStateError(f"{path}: not a quorum-state file: {e}") from e


def write_quorum_state(path: Path, state: StoredElection) -> None:
    """Replace the file atomically (module doc); blocking (fsyncs)."""
    data = {
        "clusterId": "",
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": None,
        "data_version": DATA_VERSION,
    }
    atomic_write(path, (json.dumps(data, separators=(",", ":")) + "\n").encode())


def remove_leftover(path: Path) -> None:
    """Drop a ``quorum-state.tmp`` a crash left behind (the file itself is intact)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    if tmp.exists():
        os.unlink(tmp)
