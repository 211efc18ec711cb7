"""``RaftConfig``: the quorum's timers and sizes, by Kafka's names (``QuorumConfig``).

``RaftConfig.from_properties`` reads the ``controller.quorum.*`` keys of a broker config;
every field has Kafka's default. Times are milliseconds of the clock the shell passes in.

- ``election_timeout_ms`` (``controller.quorum.election.timeout.ms``, 1000): a voter
  with no leader starts an election after a uniformly random time in
  ``[election_timeout_ms, 2 * election_timeout_ms)``.
- ``fetch_timeout_ms`` (``controller.quorum.fetch.timeout.ms``, 2000): a follower that
  has had no successful Fetch answer for this long considers the leader gone; a leader
  that has not been fetched from by a majority for 1.5 times this long resigns
  (check-quorum).
- ``election_backoff_max_ms`` (``controller.quorum.election.backoff.max.ms``, 1000):
  cap of the exponential back-off of preferred successors after EndQuorumEpoch.
- ``request_timeout_ms`` (``controller.quorum.request.timeout.ms``, 2000): an
  unanswered request is sent again after this long. It must exceed ``fetch_max_wait_ms``
  plus a round trip, or a follower gives up on every parked Fetch just before its answer
  arrives (the answer to a request it no longer waits for is dropped) and, seeing no
  answer for ``fetch_timeout_ms``, turns prospective against a healthy leader.
- ``retry_backoff_ms`` (``controller.quorum.retry.backoff.ms``, 20): wait after an
  error answer before retrying.
- ``fetch_max_wait_ms`` (500, Kafka's MAX_FETCH_WAIT_MS): how long the leader parks a
  Fetch with nothing new before answering it empty.
- ``fetch_max_bytes`` (8 MiB) and ``fetch_snapshot_max_bytes`` (8 MiB): sizes asked for
  in Fetch and FetchSnapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_KAFKA_NAMES = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
}


@dataclass(frozen=True, slots=True)
class RaftConfig:
    cluster_id: str | None = None
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024

    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], cluster_id: str | None = None
                        ) -> RaftConfig:
        """Read ``controller.quorum.*`` keys (values may be strings); others are ignored."""
        kwargs: dict[str, Any] = {"cluster_id": cluster_id}
        for key, attr in _KAFKA_NAMES.items():
            if key in props:
                kwargs[attr] = int(props[key])
        return cls(**kwargs)
