"""Replica placement for new partitions: rack-aware, striped, leaders spread.

``place(brokers, num_partitions, replication_factor, rng)`` returns one replica list
per new partition, the leader first. The idea is Kafka's ``StripedReplicaPlacer``
(our own code):

* Brokers are grouped by ``broker.rack`` (brokers without a rack form one rack of
  their own). Racks are taken round-robin, so the replicas of one partition are on
  distinct racks whenever there are at least ``replication_factor`` racks; with fewer
  racks, the replicas spread over all of them as evenly as they can.
* Each partition starts one rack further than the previous one, and each rack hands
  out its brokers in rotation (Kafka's ``BrokerList``): for each partition it serves,
  it starts one broker further than for the previous one, from a random starting
  point (``rng``: inject a seeded ``random.Random`` for a reproducible placement):
  consecutive partitions get different replica sets and leaders, so leadership spreads
  evenly, also when a rack has exactly as many brokers as the partition replicas.
* Unfenced brokers are used first; a fenced broker gets a follower replica only when
  a rack has no unfenced broker left for this partition. A leader is always unfenced.

Constraints (INVALID_REPLICATION_FACTOR with Kafka's wording when they cannot hold):
at most one replica per broker, so ``replication_factor`` <= usable brokers; at least
one unfenced broker. Brokers in controlled shutdown are not usable (the caller leaves
them out).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from spool.protocol.errors import Errors, KafkaError


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A broker that may receive new replicas."""

    broker_id: int
    rack: str | None = None
    fenced: bool = False


class _BrokerList:
    """Brokers handed out in rotation (Kafka's ``BrokerList``): in each partition (an
    ``epoch``) the list is read from one position further than in the previous one it
    served, each broker at most once."""

    def __init__(self, brokers: list[int], rng: random.Random) -> None:
        self.brokers = sorted(brokers)
        self.offset = rng.randrange(len(self.brokers)) if self.brokers else 0
        self.epoch = 0
        self.index = 0

    def next(self, epoch: int) -> int | None:
        if not self.brokers:
            return None
        if epoch != self.epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return None
        b = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return b


class _Rack:
    """One rack's unfenced and fenced brokers, each list in rotation."""

    def __init__(self, unfenced: list[int], fenced: list[int], rng: random.Random) -> None:
        self.unfenced, self.fenced = _BrokerList(unfenced, rng), _BrokerList(fenced, rng)

    def take(self, epoch: int, allow_fenced: bool) -> int | None:
        """This rack's next broker for partition ``epoch``, unfenced first."""
        b = self.unfenced.next(epoch)
        if b is None and allow_fenced:
            b = self.fenced.next(epoch)
        return b


def check_replication_factor(brokers: Sequence[UsableBroker], replication_factor: int) -> None:
    """INVALID_REPLICATION_FACTOR unless ``replication_factor`` replicas can be placed."""
    prefix = f"Unable to replicate the partition {replication_factor} time(s): "
    if replication_factor <= 0:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         prefix + "The replication factor must be positive.")
    if not any(not b.fenced for b in brokers):
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         prefix + "All brokers are currently fenced or in controlled shutdown.")
    if replication_factor > len(brokers):
        raise KafkaError(
            Errors.INVALID_REPLICATION_FACTOR,
            prefix + f"The target replication factor of {replication_factor} cannot be reached "
            f"because only {len(brokers)} broker(s) are registered.")


def place(brokers: Sequence[UsableBroker], num_partitions: int, replication_factor: int,
          rng: random.Random) -> list[list[int]]:
    """Replica lists (leader first) for ``num_partitions`` new partitions (module doc)."""
    check_replication_factor(brokers, replication_factor)
    by_rack: dict[str, tuple[list[int], list[int]]] = {}
    for b in brokers:
        unfenced, fenced = by_rack.setdefault(b.rack or "", ([], []))
        (fenced if b.fenced else unfenced).append(b.broker_id)
    racks = [_Rack(*by_rack[name], rng) for name in sorted(by_rack)]
    start = rng.randrange(len(racks))
    out = []
    for p in range(num_partitions):
        chosen: list[int] = []
        r = start + p
        misses = 0
        while len(chosen) < replication_factor:
            b = racks[r % len(racks)].take(p, allow_fenced=bool(chosen))
            r += 1
            if b is None:
                misses += 1
                if misses > 2 * len(racks):  # cannot happen after the checks above
                    raise AssertionError("placement found no broker")
                continue
            misses = 0
            chosen.append(b)
        out.append(chosen)
    return out
