"""``Partition``: one replica's replication state, without I/O (Kafka's ``Partition``).

Sans-I/O: no asyncio, no sockets, no clock of its own; every method that needs the
time takes ``now_ms``. The broker's ``ReplicaManager`` (``spool.replica.manager``) is
the shell that calls it on the event loop; the follower fetcher calls the follower
side (``append_as_follower``, ``truncate_to``) from the executor, which touches the
log only (the log has its own lock).

State, by Kafka's names::

    leader_id, leader_epoch, partition_epoch, replicas   from the metadata image
    isr            the ISR the controller committed (image or AlterPartition reply)
    pending_isr    the ISR of an AlterPartition in flight (None: none in flight)
    maximal_isr    isr plus the members pending_isr adds (Kafka's maximalIsr): the
                   high watermark waits for all of them, so an expansion in flight
                   never lets the HW pass a replica the controller is about to add
    followers      replica id -> FollowerState (leader only): its log end offset as
                   its last Fetch said (-1: unknown), lastCaughtUpTimeMs, and the
                   leader's LEO and time at that previous Fetch

Rules (the leader's, Kafka's):

- **High watermark** = min(leader LEO, LEO of every other member of ``maximal_isr``);
  it never goes down. A new leader knows no follower's LEO (-1), so the HW moves
  past what it had only once every ISR member fetched in its epoch. An ISR of the
  leader alone: the HW is the LEO after each append.
- **lastCaughtUpTimeMs**: a Fetch at or past the leader's LEO makes the follower
  caught up at the fetch's time; one at or past the LEO the leader had at the
  follower's previous Fetch makes it caught up as of that previous Fetch.
  A follower is caught up when its LEO equals the leader's or it was caught up
  within ``replica.lag.time.max.ms``; ISR members that are not are shrink candidates.
- **Expansion**: a replica outside the ISR whose LEO reached both the HW and the
  start offset of this leader epoch (it holds everything this leader wrote).
- **min.insync.replicas**: acks=-1 with a committed ISR smaller than the topic's
  ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS, nothing appended; a delayed
  produce that completes with too small an ISR is NOT_ENOUGH_REPLICAS_AFTER_APPEND
  (``replication_status``).
- Stale metadata: a registration with the same leader epoch and an older
  partition epoch than the one held (an AlterPartition reply already applied) is
  ignored; one with the same leader and partition epochs (the image catching up
  with a reply already applied) keeps the ISR change in flight: only a new leader
  or partition epoch settles it.
- An AlterPartition answer counts only while its change is still the pending one
  (``is_pending``; Kafka's ``partitionState == proposedIsrState``): a late answer to
  a change the image settled must not clear a newer one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from spool.cluster.image import PartitionRegistration
from spool.protocol.errors import Errors, KafkaError
from spool.storage.log import AppendInfo, PartitionLog

NO_LEADER = -1
UNKNOWN_OFFSET = -1


class NotLeader(KafkaError):
    """NOT_LEADER_OR_FOLLOWER for one partition, with the leader (-1: none) and its epoch
    as this broker knows them: Produce v10+ and Fetch v16+ hand them to the client
    (KIP-951)."""

    def __init__(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        super().__init__(Errors.NOT_LEADER_OR_FOLLOWER,
                         f"this broker does not lead {topic}-{partition} (leader: {leader})")
        self.leader = leader
        self.leader_epoch = leader_epoch


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's ReplicaState)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0

    def caught_up(self, leader_leo: int, now_ms: int, lag_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now_ms - self.last_caught_up_ms <= lag_ms


class Partition:
    """One replica of a partition on this broker (module doc)."""

    def __init__(self, topic: str, partition: int, log: PartitionLog, node_id: int,
                 topic_id: uuid.UUID | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.node_id = node_id
        self.topic_id = topic_id
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.epoch_start_offset = UNKNOWN_OFFSET  # the LEO when this leader epoch began

    # -- what it is

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + tuple(r for r in pending if r not in self.isr)

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def _stale(self, reg: PartitionRegistration) -> bool:
        return reg.leader_epoch == self.leader_epoch and reg.partition_epoch < self.partition_epoch

    def _take(self, reg: PartitionRegistration) -> None:
        if (reg.leader_epoch, reg.partition_epoch) != (self.leader_epoch, self.partition_epoch):
            self.pending_isr = None  # a newer registration settles any change in flight
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.partition_epoch = reg.partition_epoch
        self.replicas = tuple(reg.replicas)
        self.isr = tuple(reg.isr)

    # -- transitions

    def make_leader(self, reg: PartitionRegistration, now_ms: int, *,
                    assign_epoch: bool = True) -> bool:
        """Lead as ``reg`` says; True for a new leadership or a new leader epoch (module doc).
        A new epoch's start (the LEO, ``epoch_start_offset``) goes into ``log.leader_epochs``
        -- a file write: with ``assign_epoch=False`` the caller does it off its event loop
        (the log's next append records the epoch from its batch anyway)."""
        if self._stale(reg):
            return False
        new = not self.is_leader or reg.leader_epoch != self.leader_epoch
        self._take(reg)
        if new:
            leo = self.log.log_end_offset
            self.epoch_start_offset = leo
            if assign_epoch:
                self.log.leader_epochs.assign(reg.leader_epoch, leo)
            self.followers = {r: FollowerState(
                last_caught_up_ms=now_ms if r in self.isr else 0,
                last_fetch_leader_leo=leo, last_fetch_ms=now_ms)
                for r in self.replicas if r != self.node_id}
        else:
            kept = self.followers
            self.followers = {r: kept.get(r) or FollowerState()
                              for r in self.replicas if r != self.node_id}
        self._maybe_increment_hw()
        return new

    def make_follower(self, reg: PartitionRegistration) -> bool:
        """Follow ``reg.leader``; True if the leader or its epoch changed (the fetcher
        must truncate, then fetch)."""
        if self._stale(reg):
            return False
        changed = reg.leader != self.leader_id or reg.leader_epoch != self.leader_epoch
        self._take(reg)
        self.pending_isr = None  # only a leader proposes ISR changes
        self.followers = {}
        self.epoch_start_offset = UNKNOWN_OFFSET
        return changed

    # -- leader side

    def _not_leader(self) -> KafkaError:
        return NotLeader(self.topic, self.partition, self.leader_id, self.leader_epoch)

    def append_as_leader(self, records, *, acks: int, now_ms: int,
                         log_append_time_ms: int | None = None, flush: bool = True,
                         verification_guard: object | None = None,
                         transaction_version: int = 0) -> AppendInfo:
        """Append in this leader epoch (module doc: min.insync.replicas); the HW moves at
        once when the ISR is this broker alone. ``now_ms`` is the request's time."""
        if self.leader_id != self.node_id:
            raise self._not_leader()
        if acks == -1 and len(self.isr) < (min_isr := self.min_insync_replicas):
            raise KafkaError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"the in-sync replica set of {self.topic}-{self.partition} has {len(self.isr)} "
                f"replica(s), fewer than min.insync.replicas={min_isr}")
        log = self.log
        info = log.append(records, leader_epoch=self.leader_epoch,
                          log_append_time_ms=log_append_time_ms, flush=flush,
                          verification_guard=verification_guard,
                          transaction_version=transaction_version)
        if not log.hw_follows_leo:  # (else the log moved it: a single node)
            self._maybe_increment_hw()
        return info

    def _maybe_increment_hw(self) -> bool:
        """Move the HW up to what the maximal ISR holds; True if it moved."""
        log = self.log
        if not self.is_leader or log.hw_follows_leo:
            return False
        new = log.log_end_offset
        followers = self.followers
        for r in self.maximal_isr:
            if r != self.node_id:
                st = followers.get(r)
                new = min(new, UNKNOWN_OFFSET if st is None else st.log_end_offset)
        if new > log.high_watermark:
            log.update_high_watermark(new)
            return True
        return False

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A Fetch from follower ``replica_id`` at ``fetch_offset`` (its LEO); True when
        the high watermark moved. NOT_LEADER_OR_FOLLOWER if this broker does not lead or
        ``replica_id`` is no replica."""
        st = self.followers.get(replica_id)
        if not self.is_leader or st is None:
            raise self._not_leader()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, now_ms)
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms
        return self._maybe_increment_hw()

    def isr_shrink_candidates(self, now_ms: int, lag_ms: int) -> tuple[int, ...]:
        """ISR members (the leader aside) not caught up within ``lag_ms``; () while an
        ISR change is in flight or when not leading."""
        if not self.is_leader or self.pending_isr is not None:
            return ()
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.node_id:
                continue
            st = self.followers.get(r)
            if st is None or not st.caught_up(leo, now_ms, lag_ms):
                out.append(r)
        return tuple(out)

    def isr_expand_candidates(self) -> tuple[int, ...]:
        """Replicas outside the ISR whose LEO reached the HW and this epoch's start."""
        if not self.is_leader or self.pending_isr is not None:
            return ()
        hw = self.log.high_watermark
        start = self.epoch_start_offset
        return tuple(r for r, st in self.followers.items()
                     if r not in self.isr and st.log_end_offset >= hw
                     and st.log_end_offset >= start)

    def begin_isr_change(self, new_isr: tuple[int, ...]) -> None:
        """An AlterPartition proposing ``new_isr`` is being sent: until it completes,
        the HW waits for ``maximal_isr`` and no other change is proposed."""
        if self.pending_isr is not None:
            raise RuntimeError(f"{self.topic}-{self.partition}: an ISR change is in flight")
        self.pending_isr = tuple(new_isr)

    def is_pending(self, new_isr: tuple[int, ...], leader_epoch: int,
                   partition_epoch: int) -> bool:
        """Whether the change proposing ``new_isr`` at these epochs is still the one in
        flight (an answer to any other is stale and must be ignored)."""
        return (self.pending_isr == tuple(new_isr) and self.is_leader
                and (self.leader_epoch, self.partition_epoch) == (leader_epoch,
                                                                  partition_epoch))

    def complete_isr_change(self, isr: tuple[int, ...] | None, leader_epoch: int,
                            partition_epoch: int) -> bool:
        """The pending AlterPartition answered (``isr`` None: the controller applied
        nothing, INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED). Applies the reply when it
        is for this leader epoch and newer than what is held; True if the HW moved.
        The caller checks ``is_pending`` first."""
        self.pending_isr = None
        if (isr is not None and self.is_leader and leader_epoch == self.leader_epoch
                and partition_epoch > self.partition_epoch):
            self.isr = tuple(isr)
            self.partition_epoch = partition_epoch
        return self._maybe_increment_hw()

    def replication_status(self, required_offset: int) -> tuple[bool, int]:
        """A delayed produce waiting for every offset below ``required_offset``:
        (done, error code). Done with NOT_LEADER_OR_FOLLOWER when leadership is lost,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW got there with too small an ISR."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, 0
        if len(self.isr) < self.min_insync_replicas:
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, 0

    # -- follower side

    def append_as_follower(self, records, *, flush: bool = True) -> AppendInfo:
        """Append the leader's batches with their offsets and leader epochs
        (NOT_LEADER_OR_FOLLOWER once this broker leads: a fetch in flight lost the race);
        ``flush=False``: a due ``flush.messages`` fsync is the caller's (``log.flush``)."""
        if self.is_leader:
            raise self._not_leader()
        return self.log.append(records, assign_offsets=False, flush=flush)

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (the log truncates its leader epoch cache)."""
        self.log.truncate_to(offset)

    def update_high_watermark_from_leader(self, leader_hw: int) -> None:
        """The follower's HW: the leader's, as far as this log reaches."""
        log = self.log
        log.update_high_watermark(min(leader_hw, log.log_end_offset))

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr}, hw={self.high_watermark}, "
                f"leo={self.log_end_offset})")
