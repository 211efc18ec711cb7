"""A seeded, deterministic simulation of partition replication (``spool.replica.partition``).

One ``ReplicationSimulation(seed)`` draws everything from ``random.Random(seed)``: 3 to 5
brokers, each holding a real ``Partition`` over a real ``PartitionLog`` in its own
directory (on tmpfs when there is one), one topic with one partition (replication factor
3 or all brokers, ``min.insync.replicas`` 1 to RF), and how hostile the world is. Time is
simulated: an event queue ordered by (time, sequence); the same seed replays the same run
exactly (``python -m tests.sim --replication --seed N -v`` traces it).

The world, as the broker shell drives a ``Partition`` (``spool/replica/manager.py`` and
``fetcher.py``, REPLICATION.md):

- **The controller** is a real ``QuorumController`` (node 0) whose metadata log commits at
  once (the quorum has its own simulator): brokers register (a restart is a new
  incarnation, which leaves every ISR), heartbeat every ``heartbeat_ms`` and get the
  records they lack in the answer; ``tick`` fences a broker whose session expired (it
  leaves the ISR; a new leader comes from the ISR only); with ``rebalance_ms``,
  ``balance_leaders`` (auto.leader.rebalance.enable) moves leadership back to the
  preferred replica. Leaders' AlterPartition (v3) is validated by
  ``spool.cluster.alter_partition``. A broker applies the records of one
  answer at once (as a metadata delta): ``make_leader`` / ``make_follower``.
- **Followers fetch** as ReplicaFetcher does: on a new leader or epoch, truncate first
  (OffsetsForLeaderEpoch for ``leader_epochs.latest_epoch()``, Kafka's
  ``getOffsetTruncationState`` loop; no epoch: truncate to the high watermark), then
  Fetch at the log end offset with the current leader epoch; the leader validates the
  epoch, calls ``update_follower_fetch``, answers whole batches up to its log end and its
  high watermark, and parks a Fetch with nothing to read until an append or
  ``fetch_wait_ms``. A request without an answer is sent again after a timeout.
- **The leader's ISR**: shrink every ``lag_ms / 2`` (``isr_shrink_candidates``), expand
  when a follower caught up (``isr_expand_candidates``): ``begin_isr_change``, one
  AlterPartition, and Kafka's rules for its end (``_alter_done``): no answer, send it
  again; INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED, ``complete_isr_change(None)``;
  other errors leave the change pending until the metadata settles it.
- **Producers** append at the broker the controller names leader (sometimes at a random
  broker: stale metadata) with acks=all or acks=1; an acks=all append is acknowledged
  once the leader's high watermark passes it, unless the ISR is then smaller than
  ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS_AFTER_APPEND), leadership moved or it
  timed out. One idempotent producer (acks=all, one batch in flight) sends a batch that
  was not acknowledged again, same sequence, to whoever leads then: the leaders' producer
  state (rebuilt from the log after truncations and restarts) must answer the copies it
  holds as duplicates. **Consumers** read a random replica up to its high watermark
  (KIP-392).
- **Faults**: message loss, random delays (so reordering across connections), network
  partitions (the controller included; sometimes one-way) that heal, broker crashes
  (kill -9: the log keeps what it had, the process state is gone) and restarts; a
  restarted log opens its HW from ``replication-offset-checkpoint``, written every
  ``hw_checkpoint_ms`` as the log manager does (or never).

A fault phase, then a calm phase (healed, every broker restarted): within ``LIVENESS_MS``
an acks=all append must be acknowledged and every replica must be back in the ISR with
the leader's log end and high watermark.

Invariants, checked after every event (``Violation`` names the first broken one):

- every batch acknowledged with acks=all (the high watermark passed it while the ISR had
  at least ``min.insync.replicas``) is, at the same offset with the same bytes, in the log
  of every broker that leads in that leader epoch or a later one;
- the logs agree below every replica's high watermark: the bytes of each offset below any
  replica's high watermark, in any life, are the bytes every replica has there once its
  high watermark passes it (so nothing a high watermark covered is ever lost or changed);
- what a consumer reads lies below the high watermark of the replica it reads from, and so
  is in that committed history;
- a leader's high watermark never goes down within its leader epoch (and one life); a
  leader's log never shrinks within its epoch;
- at the end, every replica's log is the leader's, byte for byte; it holds every
  acknowledged batch, and each idempotent sequence once, in order;
- the ISR contains the leader, in the controller's image and in every leader's Partition;
  the controller elects a leader only from the ISR;
- the ISR the controller holds for a leader's epoch is within that leader's maximal ISR
  (the committed ISR plus a change in flight), the premise of its HW rule: a replica the
  controller counts in sync, and so may elect, is one the leader's HW waits for.
"""

from __future__ import annotations

import heapq
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spool.cluster.controller import QuorumController
from spool.cluster.image import Endpoint, MetadataImage, PartitionRegistration
from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import AlterPartitionRequest
from spool.protocol._generated import alter_partition_request as apq
from spool.protocol._generated.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from spool.protocol.errors import Errors, KafkaError, error_name
from spool.records.batch import iter_batches
from spool.records.builder import BatchBuilder
from spool.replica.partition import Partition
from spool.storage.config import LogConfig
from spool.storage.log import PartitionLog
from tests.helpers.storage_batches import make_batch
from tests.sim.events import EventQueue, Violation, draw_cut

CLUSTER_ID = "rsimrsimrsimrsimrsim00"
MV = ("metadata.version", 1, 14)
TOPIC = "orders"
CONTROLLER = 0
CLOCK_BASE = 1_700_000_000_000
LIVENESS_MS = 20000
FETCH_BACKOFF_MS = 20
PRODUCE_TIMEOUT_MS = 400
ALTER_RETRY_MS = 500  # spool.replica.manager's
READ_ALL = 1 << 24
IDEM_PID = 4242



def tmp_root() -> Path | None:
    """tmpfs when there is one: the logs are real files, the disk is not the point."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


@dataclass
class Params:
    """What one seed draws: the cluster and how hostile its world is."""

    brokers: int
    rf: int
    min_isr: int
    fault_ms: int
    loss: float
    delay_max_ms: int
    crash_every_ms: int
    partition_every_ms: int
    produce_every_ms: int
    acks_all: float
    lag_ms: int
    session_ms: int
    heartbeat_ms: int
    fetch_max_bytes: int
    fetch_wait_ms: int
    segment_bytes: int
    hw_checkpoint_ms: int
    rebalance_ms: int

    @classmethod
    def draw(cls, rng: random.Random) -> Params:
        brokers = rng.choice((3, 3, 4, 5))
        rf = min(brokers, rng.choice((3, 3, brokers)))
        return cls(
            brokers=brokers,
            rf=rf,
            min_isr=min(rf, rng.choice((1, 2, 2, rf))),
            fault_ms=rng.choice((1000, 2000)),
            loss=rng.choice((0.0, 0.01, 0.05, 0.2)),
            delay_max_ms=rng.choice((2, 10, 30)),
            crash_every_ms=rng.choice((0, 300, 800)),
            partition_every_ms=rng.choice((0, 250, 600)),
            produce_every_ms=rng.choice((5, 15, 40)),
            acks_all=rng.choice((0.5, 0.9)),
            lag_ms=rng.choice((60, 150, 400)),
            session_ms=rng.choice((120, 300)),
            heartbeat_ms=rng.choice((10, 25)),
            fetch_max_bytes=rng.choice((250, 1000, 1 << 16)),  # 250: one batch or two
            fetch_wait_ms=rng.choice((5, 30)),
            segment_bytes=rng.choice((600, 4096, 1 << 20)),
            hw_checkpoint_ms=rng.choice((0, 50, 400)),  # 0: never written
            rebalance_ms=rng.choice((0, 0, 300)),  # auto.leader.rebalance.enable
        )


@dataclass
class Msg:
    kind: str
    src: int
    dst: int
    req_id: int
    body: dict
    src_life: int = 0  # a response reaches only the life of the broker that asked


@dataclass
class Acked:
    """An acks=all batch the producer was told is written."""

    first: int
    last: int
    data: bytes
    epoch: int  # the leader epoch it was appended and acknowledged in
    n: int


@dataclass
class Pending:
    """An acks=all append waiting for the high watermark (a delayed produce)."""

    broker: int
    life: int
    epoch: int
    first: int
    last: int
    deadline: int
    data: bytes
    n: int
    idempotent: bool


@dataclass
class Broker:
    node_id: int
    up: bool = False
    life: int = 0
    incarnation: uuid.UUID | None = None
    registered: bool = False
    epoch: int = -1  # broker epoch
    image: MetadataImage = field(default_factory=lambda: MetadataImage(cluster_id=CLUSTER_ID))
    meta_offset: int = -1
    log: PartitionLog | None = None
    partition: Partition | None = None
    applied: PartitionRegistration | None = None
    # the fetcher
    fetch_state: str = "idle"  # idle, truncate, fetch
    fetch_leader: int = -1
    fetch_epoch: int = -1
    fetch_gen: int = 0
    fetch_req: int = 0
    # the leader side
    parked: dict = field(default_factory=dict)  # follower -> Msg (a Fetch waiting for data)
    alters: dict = field(default_factory=dict)  # AlterPartitions unanswered: req id -> Msg
    alter_retry_at: int = 0  # after a failed AlterPartition, no other before this
    # the checks
    checked: int = 0  # offsets below this were held to the committed history (this life)
    hw_seen: tuple[int, int] = (-1, -1)  # (leader epoch, high watermark) while leading
    leo_seen: tuple[int, int] = (-1, -1)  # (leader epoch, log end offset) while leading
    verified: tuple[int, int] = (-1, 0)  # (leader epoch, acked batches checked in it)


class ReplicationSimulation(EventQueue):
    alter_failure_completes = False  # see _alter_done
    stale_alter_reply_completes = False  # see _alter_done

    def __init__(self, seed: int, trace: Callable[[str], None] | None = None,
                 params: Params | None = None, base_dir: Path | None = None) -> None:
        self.seed = seed
        super().__init__(random.Random(seed), trace)
        self.p = params or Params.draw(self.rng)
        self._own_dir = base_dir is None
        self.dir = base_dir or Path(tempfile.mkdtemp(prefix=f"spool-rsim-{seed}-",
                                                     dir=tmp_root()))
        self.next_id = 0
        self.cut: set[tuple[int, int]] = set()
        self.faults = True
        self.steps = 0
        self.recovery_ms = -1
        self.stats = {"produced": 0, "acked_all": 0, "acked_1": 0, "refused": 0,
                      "failed": 0, "crashes": 0, "partitions": 0, "elections": 0,
                      "isr_changes": 0, "truncations": 0, "consumed": 0,
                      "idempotent_acked": 0, "duplicates": 0}
        self.log_config = LogConfig(internal_segment_bytes=self.p.segment_bytes,
                                    min_insync_replicas=self.p.min_isr)
        self.committed: dict[int, bytes] = {}  # offset -> its batch, below some replica's HW
        self.acked: list[Acked] = []
        self.pending: list[Pending] = []
        self.produced = 0
        self.idem_seq = 0  # the idempotent producer's next sequence
        self.idem_batch: bytes | None = None  # its batch not yet acknowledged
        self.idem_inflight = False
        self.idem_acked: list[int] = []  # base sequences acknowledged
        self.controller = QuorumController(
            ControllerConfig(broker_session_timeout_ms=self.p.session_ms),
            cluster_id=CLUSTER_ID, rng=random.Random(self.rng.getrandbits(64)))
        self.meta: list[Any] = []
        self._commit(self.controller.activate(0))
        self.brokers = {i: Broker(i) for i in range(1, self.p.brokers + 1)}
        self._bootstrap()
        self._at(self._every(self.p.produce_every_ms), "produce")
        self._at(self._every(50), "consume")
        self._at(self._every(2 * self.p.produce_every_ms), "idempotent")
        self._at(10, "tick")
        if self.p.rebalance_ms:
            self._at(self.p.rebalance_ms, "rebalance")
        for kind, every in (("crash", self.p.crash_every_ms),
                            ("partition", self.p.partition_every_ms)):
            if every:
                self._at(self._every(every), kind)


    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    # -- the controller ----------------------------------------------------------------------
    def _commit(self, result: Any) -> Any:
        if result.records:
            before = self.controller.image
            for rec in result.records:
                self.controller.replay(rec, len(self.meta))
                self.meta.append(rec)
            self._check_controller(before, self.controller.image)
        return result.reply

    def _registration(self, img: MetadataImage) -> PartitionRegistration | None:
        t = img.topic(TOPIC)
        return None if t is None else t.partitions.get(0)

    def _check_controller(self, before: MetadataImage, after: MetadataImage) -> None:
        old, new = self._registration(before), self._registration(after)
        if new is None:
            return
        if new.leader >= 0 and new.leader not in new.isr:
            raise Violation(f"controller: leader {new.leader} not in the ISR {new.isr}")
        if old is not None and new.leader != old.leader and new.leader >= 0:
            if new.leader not in old.isr:
                raise Violation(f"controller elected {new.leader}, not in the ISR {old.isr}")
            self.stats["elections"] += 1
        if old is not None and new.isr != old.isr:
            self.stats["isr_changes"] += 1
        if old is None or new != old:
            self._log(f"controller: leader {new.leader} epoch {new.leader_epoch} isr "
                      f"{list(new.isr)} partition epoch {new.partition_epoch}")

    def _bootstrap(self) -> None:
        """Every broker registered and unfenced, then the topic: the cluster as
        ``spool cluster up`` leaves it, before the first event."""
        for b in self.brokers.values():
            b.incarnation = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            reply = self._commit(self.controller.register_broker(
                broker_id=b.node_id, cluster_id=CLUSTER_ID, incarnation_id=b.incarnation,
                listeners=[Endpoint("PLAINTEXT", "sim", 9092 + b.node_id, 0)], features=[MV],
                next_offset=len(self.meta), now_ms=0))
            b.epoch = reply.broker_epoch
        for b in self.brokers.values():
            self._commit(self.controller.heartbeat(
                broker_id=b.node_id, broker_epoch=b.epoch, want_fence=False,
                want_shutdown=False, current_metadata_offset=len(self.meta) - 1, now_ms=0))
        reply = self._commit(self.controller.create_topics(CreateTopicsRequest(
            topics=[CreatableTopic(
                name=TOPIC, num_partitions=1, replication_factor=self.p.rf, assignments=[],
                configs=[CreatableTopicConfig(name="min.insync.replicas",
                                              value=str(self.p.min_isr))])],
            timeout_ms=1000, validate_only=False)))
        assert reply.topics[0].error_code == 0, reply
        for b in self.brokers.values():
            self._start(b, bootstrap=True)

    def _controller_receive(self, m: Msg) -> None:
        c = self.controller
        reply: dict[str, Any] = {"error": 0}
        try:
            if m.kind == "register":
                r = self._commit(c.register_broker(
                    broker_id=m.src, cluster_id=CLUSTER_ID, incarnation_id=m.body["incarnation"],
                    listeners=[Endpoint("PLAINTEXT", "sim", 9092 + m.src, 0)], features=[MV],
                    next_offset=len(self.meta), now_ms=self.now))
                reply["epoch"] = r.broker_epoch
            elif m.kind == "heartbeat":
                self._commit(c.heartbeat(
                    broker_id=m.src, broker_epoch=m.body["epoch"], want_fence=False,
                    want_shutdown=False, current_metadata_offset=m.body["offset"],
                    now_ms=self.now))
            elif m.kind == "alter":
                reply = self._alter_partition(m)
        except KafkaError as e:
            reply["error"] = e.code
        if m.kind in ("register", "heartbeat"):
            start = m.body["offset"] + 1
            reply["start"], reply["records"] = start, self.meta[start:]
        self._send(Msg(m.kind + "_resp", CONTROLLER, m.src, m.req_id, reply, m.src_life))

    def _alter_partition(self, m: Msg) -> dict[str, Any]:
        body = m.body
        topic = self.controller.image.topic(TOPIC)
        assert topic is not None
        req = AlterPartitionRequest(broker_id=m.src, broker_epoch=body["broker_epoch"], topics=[
            apq.TopicData(topic_id=topic.topic_id, partitions=[apq.PartitionData(
                partition_index=0, leader_epoch=body["leader_epoch"],
                new_isr_with_epochs=[apq.BrokerState(broker_id=r, broker_epoch=e)
                                     for r, e in body["isr"]],
                leader_recovery_state=0, partition_epoch=body["partition_epoch"])])])
        resp = self._commit(self.controller.alter_partition(req, 3))
        if resp.error_code:
            return {"error": resp.error_code}
        p = resp.topics[0].partitions[0]
        return {"error": p.error_code, "leader": p.leader_id, "leader_epoch": p.leader_epoch,
                "isr": tuple(p.isr), "partition_epoch": p.partition_epoch}

    # -- the network -------------------------------------------------------------------------
    def _send(self, m: Msg) -> None:
        if (m.src, m.dst) in self.cut or (self.faults and self.rng.random() < self.p.loss):
            self._log(f"lost {m.src}->{m.dst} {m.kind}")
            return
        self._at(self.now + 1 + self.rng.randrange(self.p.delay_max_ms), "msg", m)

    def _deliver(self, m: Msg) -> None:
        if (m.src, m.dst) in self.cut:
            return
        if m.dst == CONTROLLER:
            self._controller_receive(m)
            return
        b = self.brokers[m.dst]
        if not b.up:
            return
        if m.kind.endswith("_resp"):
            if b.life != m.src_life:
                return
            getattr(self, "_on_" + m.kind)(b, m)
        else:
            getattr(self, "_on_" + m.kind)(b, m)
        self._after(b)

    # -- brokers: life and metadata ----------------------------------------------------------
    def _start(self, b: Broker, bootstrap: bool = False) -> None:
        b.life += 1
        b.up = True
        b.partition = None
        b.applied = None
        b.fetch_state, b.fetch_req, b.fetch_leader, b.fetch_epoch = "idle", 0, -1, -1
        b.fetch_gen += 1
        b.parked = {}
        b.alters, b.alter_retry_at = {}, 0
        b.checked = 0
        b.hw_seen = b.leo_seen = (-1, -1)
        b.verified = (-1, 0)
        b.log = PartitionLog(self.dir / f"broker-{b.node_id}" / f"{TOPIC}-0", self.log_config,
                             clock=lambda: CLOCK_BASE + self.now, hw_follows_leo=False)
        if bootstrap:
            b.registered = True
            b.image = self.controller.image
            b.meta_offset = len(self.meta) - 1
        else:
            b.incarnation = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            b.registered, b.epoch = False, -1
            b.image = MetadataImage(cluster_id=CLUSTER_ID)
            b.meta_offset = -1
        self._log(f"start {b.node_id} life {b.life}: log end {b.log.log_end_offset} "
                  f"hw {b.log.high_watermark}")
        self._apply_metadata(b)
        self._at(self.now + 1 + self.rng.randrange(self.p.heartbeat_ms), "heartbeat",
                 b.node_id, b.life)
        self._at(self.now + self.p.lag_ms // 2, "isr", b.node_id, b.life)
        if self.p.hw_checkpoint_ms:
            self._at(self.now + self.p.hw_checkpoint_ms, "hw_checkpoint", b.node_id, b.life)
        self._after(b)

    def _hw_checkpoint(self, b: Broker) -> None:
        """replica.high.watermark.checkpoint.interval.ms: the log manager's write of
        ``replication-offset-checkpoint`` (a restart opens the log at min(it, LEO))."""
        assert b.log is not None
        b.log.checkpoints.update(b.log.tp, high_watermark=b.log.high_watermark)
        b.log.checkpoints.write(recovery_points=False, log_starts=False)
        self._at(self.now + self.p.hw_checkpoint_ms, "hw_checkpoint", b.node_id, b.life)

    def _crash(self, b: Broker) -> None:
        """kill -9: what reached the log's files stays (the page cache outlives the
        process); nothing is flushed, closed cleanly or checkpointed."""
        assert b.log is not None
        _abandon(b.log)
        b.log = None
        b.partition = None
        b.up = False
        self.stats["crashes"] += 1
        self._log(f"crash {b.node_id}")
        self._fail_pending(b, "crashed")
        if self.faults:
            self._at(self.now + 20 + self.rng.randrange(300), "restart", b.node_id)

    def _heartbeat(self, b: Broker) -> None:
        if b.registered:
            self._send(Msg("heartbeat", b.node_id, CONTROLLER, self._id(),
                           {"epoch": b.epoch, "offset": b.meta_offset}, b.life))
        else:
            self._send(Msg("register", b.node_id, CONTROLLER, self._id(),
                           {"incarnation": b.incarnation, "offset": b.meta_offset}, b.life))
        self._at(self.now + self.p.heartbeat_ms, "heartbeat", b.node_id, b.life)

    def _on_register_resp(self, b: Broker, m: Msg) -> None:
        if m.body["error"] or b.registered:
            return
        b.registered, b.epoch = True, m.body["epoch"]
        self._log(f"{b.node_id} registered, broker epoch {b.epoch}")
        self._metadata(b, m)

    def _on_heartbeat_resp(self, b: Broker, m: Msg) -> None:
        if not m.body["error"]:
            self._metadata(b, m)

    def _metadata(self, b: Broker, m: Msg) -> None:
        start, records = m.body["start"], m.body["records"]
        end = start + len(records) - 1
        if end <= b.meta_offset or start > b.meta_offset + 1:
            return  # an older answer, overtaken
        b.image = b.image.replay(records[b.meta_offset + 1 - start:], offset=end)
        b.meta_offset = end
        self._apply_metadata(b)

    def _apply_metadata(self, b: Broker) -> None:
        """What ReplicaManager.apply_changes does with the broker's new image."""
        topic = b.image.topic(TOPIC)
        reg = None if topic is None else topic.partitions.get(0)
        if reg is None or b.node_id not in reg.replicas or reg == b.applied:
            return
        assert b.log is not None
        b.applied = reg
        if b.partition is None:
            b.partition = Partition(TOPIC, 0, b.log, b.node_id, topic.topic_id)
        p = b.partition
        was_leader = p.is_leader
        if reg.leader == b.node_id:
            new = p.make_leader(reg, self.now)
            self._stop_fetcher(b)
            if new:
                self._log(f"{b.node_id} leads epoch {reg.leader_epoch} from offset "
                          f"{p.log_end_offset}, isr {list(reg.isr)}")
                self._answer_parked(b)
        else:
            changed = p.make_follower(reg)
            if was_leader:
                self._answer_parked(b)
            if changed:
                self._stop_fetcher(b)
                if reg.leader >= 0:
                    b.fetch_state, b.fetch_leader, b.fetch_epoch = (
                        "truncate", reg.leader, reg.leader_epoch)
                    self._log(f"{b.node_id} follows {reg.leader} in epoch {reg.leader_epoch}")
                    self._fetcher_step(b)

    # -- brokers: the fetcher ----------------------------------------------------------------
    def _stop_fetcher(self, b: Broker) -> None:
        b.fetch_state, b.fetch_req = "idle", 0
        b.fetch_gen += 1

    def _fetcher_step(self, b: Broker) -> None:
        p = b.partition
        if b.fetch_state == "idle" or b.fetch_req or p is None:
            return
        if b.fetch_state == "truncate":
            latest = b.log.leader_epochs.latest_epoch()
            if latest is None or latest < 0:
                self._truncate(b, p.high_watermark, "no leader epoch")
                b.fetch_state = "fetch"
            else:
                self._request(b, "epoch_req", {"epoch": latest})
                return
        self._request(b, "fetch", {"offset": p.log_end_offset,
                                   "max_bytes": self.p.fetch_max_bytes})

    def _request(self, b: Broker, kind: str, body: dict) -> None:
        body["leader_epoch"] = b.fetch_epoch
        b.fetch_req = self._id()
        self._send(Msg(kind, b.node_id, b.fetch_leader, b.fetch_req, body, b.life))
        timeout = 3 * self.p.delay_max_ms + self.p.fetch_wait_ms + 20
        self._at(self.now + timeout, "fetch_timeout", b.node_id, b.life, b.fetch_req)

    def _truncate(self, b: Broker, offset: int, why: str) -> None:
        p = b.partition
        assert p is not None
        if offset < p.log_end_offset:
            self.stats["truncations"] += 1
        self._log(f"{b.node_id} truncates to {offset} ({why}; log end {p.log_end_offset}, "
                  f"hw {p.high_watermark})")
        p.truncate_to(offset)

    def _retry_later(self, b: Broker) -> None:
        b.fetch_req = 0
        self._at(self.now + FETCH_BACKOFF_MS, "fetch_retry", b.node_id, b.life, b.fetch_gen)

    def _on_epoch_req_resp(self, b: Broker, m: Msg) -> None:
        if m.req_id != b.fetch_req:
            return
        p = b.partition
        assert p is not None
        body = m.body
        if body["error"]:
            self._log(f"{b.node_id} OffsetsForLeaderEpoch to {m.src}: {error_name(body['error'])}")
            self._retry_later(b)
            return
        b.fetch_req = 0
        leo = p.log_end_offset
        leader_epoch, leader_end = body["epoch"], body["end_offset"]
        done = True
        if leader_end < 0:
            target, why = p.high_watermark, "leader knows no such epoch"
        else:
            mine, my_end = b.log.leader_epochs.end_offset_for(leader_epoch, leo)
            if my_end < 0:
                target, why = min(leader_end, leo), f"epoch {leader_epoch} below mine"
            elif mine != leader_epoch:
                target, done = min(my_end, leo), False
                why = f"leader answered epoch {leader_epoch} I lack"
            else:
                target = min(my_end, leader_end, leo)
                why = f"epoch {leader_epoch} ends at {leader_end}"
        self._truncate(b, target, why)
        b.fetch_state = "fetch" if done else "truncate"
        self._fetcher_step(b)

    def _on_fetch_resp(self, b: Broker, m: Msg) -> None:
        if m.req_id != b.fetch_req:
            return
        p = b.partition
        assert p is not None
        body = m.body
        if body["error"] == Errors.OFFSET_OUT_OF_RANGE:
            b.fetch_req = 0
            b.fetch_state = "truncate"
            self._fetcher_step(b)
            return
        if body["error"]:
            self._log(f"{b.node_id} fetch from {m.src}: {error_name(body['error'])}")
            self._retry_later(b)
            return
        b.fetch_req = 0
        data = body["records"]
        if data:
            first = next(iter_batches(data))[1].base_offset
            if first != p.log_end_offset:
                raise Violation(f"{b.node_id} fetched a batch at {first} from {m.src} for its "
                                f"log end {p.log_end_offset}: the logs' batches diverge")
            p.append_as_follower(bytearray(data))
        p.update_high_watermark_from_leader(body["hw"])
        self._fetcher_step(b)

    # -- brokers: the leader side ------------------------------------------------------------
    def _leader_error(self, b: Broker, m: Msg) -> int:
        p = b.partition
        if p is None or not p.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if m.body["leader_epoch"] < p.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if m.body["leader_epoch"] > p.leader_epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if m.src not in p.replicas:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def _on_epoch_req(self, b: Broker, m: Msg) -> None:
        err = self._leader_error(b, m)
        body: dict[str, Any] = {"error": err}
        if not err:
            assert b.partition is not None
            body["epoch"], body["end_offset"] = b.log.leader_epochs.end_offset_for(
                m.body["epoch"], b.partition.log_end_offset)
        self._send(Msg("epoch_req_resp", b.node_id, m.src, m.req_id, body, m.src_life))

    def _on_fetch(self, b: Broker, m: Msg) -> None:
        err = self._leader_error(b, m)
        p = b.partition
        offset = m.body["offset"]
        if not err and not p.log.log_start_offset <= offset <= p.log_end_offset:
            err = Errors.OFFSET_OUT_OF_RANGE
        if err:
            self._send(Msg("fetch_resp", b.node_id, m.src, m.req_id, {"error": err}, m.src_life))
            return
        if p.update_follower_fetch(m.src, offset, self.now):
            self._log(f"{b.node_id} hw -> {p.high_watermark} (fetch of {m.src} at {offset})")
        self._maybe_expand(b)
        if offset == p.log_end_offset:
            old = b.parked.get(m.src)
            b.parked[m.src] = m
            if old is None or old.req_id != m.req_id:
                self._at(self.now + self.p.fetch_wait_ms, "fetch_wait", b.node_id, b.life,
                         m.src, m.req_id)
            return
        self._answer_fetch(b, m)

    def _answer_fetch(self, b: Broker, m: Msg) -> None:
        err = self._leader_error(b, m)
        p = b.partition
        body: dict[str, Any] = {"error": err}
        if not err:
            offset = m.body["offset"]
            if not p.log.log_start_offset <= offset <= p.log_end_offset:
                body["error"] = Errors.OFFSET_OUT_OF_RANGE
            else:
                body["records"] = p.log.read_bytes(offset, m.body["max_bytes"])
                body["hw"] = p.high_watermark
        self._send(Msg("fetch_resp", b.node_id, m.src, m.req_id, body, m.src_life))

    def _answer_parked(self, b: Broker) -> None:
        parked, b.parked = b.parked, {}
        for m in parked.values():
            self._answer_fetch(b, m)

    def _maybe_expand(self, b: Broker) -> None:
        p = b.partition
        if p is None or self.now < b.alter_retry_at:
            return
        add = [r for r in p.isr_expand_candidates()
               if r in b.image.brokers and b.image.brokers[r].active]
        if add:
            self._alter(b, tuple(p.isr) + tuple(add), "expand")

    def _isr_check(self, b: Broker) -> None:
        p = b.partition
        if p is not None and self.now >= b.alter_retry_at:
            out = p.isr_shrink_candidates(self.now, self.p.lag_ms)
            if out:
                self._alter(b, tuple(r for r in p.isr if r not in out), "shrink")
        self._at(self.now + self.p.lag_ms // 2, "isr", b.node_id, b.life)

    def _alter(self, b: Broker, isr: tuple[int, ...], why: str) -> None:
        """The change goes pending (the HW waits for the maximal ISR), then one
        AlterPartition with the broker epochs of the image (``_alter_done``)."""
        p = b.partition
        assert p is not None
        me = b.image.brokers.get(b.node_id)
        if me is None:
            return
        epochs = [(r, b.image.brokers[r].epoch if r in b.image.brokers else -1) for r in isr]
        m = Msg("alter", b.node_id, CONTROLLER, self._id(), {
            "broker_epoch": me.epoch, "leader_epoch": p.leader_epoch,
            "partition_epoch": p.partition_epoch, "isr": epochs}, b.life)
        self._log(f"{b.node_id} asks to {why} the ISR {list(p.isr)} -> {list(isr)} "
                  f"(partition epoch {p.partition_epoch})")
        p.begin_isr_change(isr)
        self._send_alter(b, m)

    def _send_alter(self, b: Broker, m: Msg) -> None:
        b.alters[m.req_id] = m
        self._send(m)
        self._at(self.now + self.p.lag_ms, "alter_timeout", b.node_id, b.life, m.req_id)

    def _alter_done(self, b: Broker, req_id: int, body: dict | None) -> None:
        """The end of one AlterPartition, by Kafka's rules (AlterPartitionManager and
        ``Partition.handleAlterPartitionError``): no answer or a retriable error (the
        controller's STALE_BROKER_EPOCH, NOT_CONTROLLER): send it again, the change stays
        pending (it may have been applied); INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED
        (the controller says it applied nothing): ``complete_isr_change(None)``; other
        errors (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...): the change stays
        pending until the metadata settles it (``make_leader`` / ``make_follower``).
        With ``alter_failure_completes`` (what a shell must not do): any error or a
        timeout completes the change with None and retries after ALTER_RETRY_MS.
        An answer to a change that is no longer the one pending (the image settled it,
        another was proposed since: another pending ISR or partition epoch) is ignored,
        as Kafka's ``partitionState != proposedIsrState``; with
        ``stale_alter_reply_completes`` (what a shell must not do either) it completes
        whatever change is pending."""
        m = b.alters.pop(req_id, None)
        if m is None or b.partition is None:
            return
        p = b.partition
        error = -1 if body is None else body["error"]
        moved = False
        sent = m.body
        if not self.stale_alter_reply_completes and (
                p.pending_isr != tuple(r for r, _ in sent["isr"])
                or (p.leader_epoch, p.partition_epoch) != (sent["leader_epoch"],
                                                           sent["partition_epoch"])):
            self._log(f"{b.node_id} AlterPartition {'timed out' if body is None else body}: "
                      f"stale, the partition moved on (pending {p.pending_isr}, partition "
                      f"epoch {p.partition_epoch})")
            return  # Kafka: the state is no longer the one proposed; ignore the answer
        if not error:
            moved = p.complete_isr_change(body["isr"], body["leader_epoch"],
                                          body["partition_epoch"])
        elif self.alter_failure_completes:
            b.alter_retry_at = self.now + ALTER_RETRY_MS
            moved = p.complete_isr_change(None, -1, -1)
        elif error in (-1, Errors.STALE_BROKER_EPOCH, Errors.NOT_CONTROLLER):
            if p.is_leader and p.leader_epoch == m.body["leader_epoch"]:
                self._send_alter(b, Msg(m.kind, m.src, m.dst, self._id(), m.body, m.src_life))
        elif error in (Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED):
            moved = p.complete_isr_change(None, -1, -1)
        self._log(f"{b.node_id} AlterPartition "
                  f"{'timed out' if body is None else body}: isr {list(p.isr)}, "
                  f"pending {p.pending_isr}, partition epoch {p.partition_epoch}"
                  + (", hw moved" if moved else ""))

    def _on_alter_resp(self, b: Broker, m: Msg) -> None:
        if m.req_id in b.alters:
            self._alter_done(b, m.req_id, m.body)
            self._maybe_expand(b)

    # -- producers and consumers -------------------------------------------------------------
    def _produce(self, final: bool = False) -> None:
        acks = -1 if final or self.rng.random() < self.p.acks_all else 1
        self.produced += 1
        n = self.produced
        batch = make_batch(1 + self.rng.randrange(3), timestamp=CLOCK_BASE + self.now,
                           value_size=8 + self.rng.randrange(40), tag=self.seed * 1000000 + n)
        self._append(self._pick_leader(final), batch, acks, n, idempotent=False)

    def _pick_leader(self, fresh: bool) -> Broker:
        """The broker the controller names leader (metadata a client just refreshed), or
        now and then any broker (stale metadata)."""
        reg = self._registration(self.controller.image)
        if reg is not None and reg.leader > 0 and (fresh or self.rng.random() < 0.85):
            return self.brokers[reg.leader]
        return self.brokers[self.rng.choice(list(self.brokers))]

    def _idempotent_produce(self) -> None:
        """One idempotent producer (enable.idempotence, acks=all, one batch in flight):
        a batch not acknowledged is sent again, with the same sequence, to whichever
        broker leads then; the next sequence only after an acknowledgement."""
        if self.idem_inflight:
            return
        if self.idem_batch is None:
            k = 1 + self.rng.randrange(3)
            builder = BatchBuilder(producer_id=IDEM_PID, producer_epoch=0,
                                   base_sequence=self.idem_seq)
            for i in range(k):
                builder.append(None, b"idem-%d-%d" % (self.idem_seq, i),
                               timestamp=CLOCK_BASE + self.now)
            self.idem_batch = builder.build()
        self.produced += 1
        self._append(self._pick_leader(False), bytearray(self.idem_batch), -1, self.produced,
                     idempotent=True)

    def _append(self, b: Broker, batch: bytearray, acks: int, n: int, idempotent: bool) -> None:
        p = b.partition
        if not b.up or p is None:
            return
        what = f"produce #{n}{' (idempotent)' if idempotent else ''} acks={acks} at {b.node_id}"
        try:
            info = p.append_as_leader(batch, acks=acks, now_ms=self.now)
        except KafkaError as e:
            self.stats["refused"] += 1
            self._log(f"{what}: {error_name(e.code)}")
            return
        self.stats["produced"] += 1
        self._log(f"{what}: offsets {info.first_offset}..{info.last_offset} epoch "
                  f"{p.leader_epoch}" + ("" if info.num_records else " (a duplicate)"))
        self.stats["duplicates"] += not info.num_records
        if acks == 1:
            self.stats["acked_1"] += 1
        else:
            data = bytes(p.log.read_bytes(info.first_offset, READ_ALL))
            h = next(iter_batches(data))[1]
            self.pending.append(Pending(b.node_id, b.life, p.leader_epoch, info.first_offset,
                                        info.last_offset, self.now + PRODUCE_TIMEOUT_MS,
                                        data[:h.size], n, idempotent))
            self.idem_inflight |= idempotent
        self._answer_parked(b)
        self._after(b)

    def _produce_done(self, e: Pending, why: str | None) -> None:
        if why is None:
            self.acked.append(Acked(e.first, e.last, e.data, e.epoch, e.n))
            self.stats["acked_all"] += 1
        else:
            self.stats["failed"] += 1
        self._log(f"produce #{e.n} " + ("acknowledged (acks=all): "
                                        f"{e.first}..{e.last}" if why is None
                                        else f"not acknowledged: {why}"))
        if e.idempotent:
            self.idem_inflight = False
            if why is None:
                h = next(iter_batches(e.data))[1]
                self.idem_acked.append(h.base_sequence)
                self.stats["idempotent_acked"] += 1
                self.idem_seq = h.base_sequence + h.last_offset_delta + 1
                self.idem_batch = None

    def _fail_pending(self, b: Broker, why: str) -> None:
        keep = []
        for e in self.pending:
            if e.broker == b.node_id:
                self._produce_done(e, why)
            else:
                keep.append(e)
        self.pending = keep

    def _complete_pending(self, b: Broker) -> None:
        p = b.partition
        keep = []
        for e in self.pending:
            if e.broker != b.node_id:
                keep.append(e)
                continue
            why = None
            if e.life != b.life or p is None or (p.is_leader and p.leader_epoch != e.epoch):
                why = "NOT_LEADER_OR_FOLLOWER"  # the shell ends waiters on a leader change
            else:
                done, error = p.replication_status(e.last + 1)
                if done and not error:
                    if len(p.isr) < self.p.min_isr:
                        raise Violation(f"produce #{e.n} acknowledged with the ISR "
                                        f"{list(p.isr)}, below min.insync.replicas="
                                        f"{self.p.min_isr}")
                    self._produce_done(e, None)
                    continue
                if done:
                    why = error_name(error)
                elif self.now >= e.deadline:
                    why = "REQUEST_TIMED_OUT"
            if why is None:
                keep.append(e)
            else:
                self._produce_done(e, why)
        self.pending = keep

    def _consume(self) -> None:
        live = [b for b in self.brokers.values() if b.up and b.partition is not None]
        if not live:
            return
        b = self.rng.choice(live)
        p = b.partition
        hw, start = p.high_watermark, p.log.log_start_offset
        if hw <= start:
            return
        offset = start + self.rng.randrange(hw - start)
        data = p.log.read_bytes(offset, 1 + self.rng.randrange(4096), max_offset=hw)
        for pos, h in iter_batches(data):
            if h.last_offset >= hw:
                raise Violation(f"a consumer of {b.node_id} read offset {h.last_offset}, "
                                f"above its high watermark {hw}")
            self._hold_to_committed(b, h.base_offset, h.last_offset, data[pos:pos + h.size],
                                    "a consumer read")
            self.stats["consumed"] += 1

    # -- invariants --------------------------------------------------------------------------
    def _hold_to_committed(self, b: Broker, first: int, last: int, data: bytes, who: str
                           ) -> None:
        for o in range(first, last + 1):
            seen = self.committed.get(o)
            if seen is None:
                self.committed[o] = data
            elif seen != data:
                raise Violation(f"{who} at {b.node_id} has offset {o} as {data[:40].hex()}..., "
                                f"but {seen[:40].hex()}... was below a high watermark there")

    def _after(self, b: Broker) -> None:
        """Checks after a step of broker ``b``, then complete what waited on it."""
        p = b.partition
        if not b.up or p is None:
            return
        hw = p.high_watermark
        if b.checked > hw:
            b.checked = hw
        if b.checked < hw:
            offset = b.checked
            while offset < hw:
                data = p.log.read_bytes(offset, READ_ALL, max_offset=hw)
                if not data:
                    raise Violation(f"{b.node_id} cannot read offset {offset} below its high "
                                    f"watermark {hw}")
                for pos, h in iter_batches(data):
                    self._hold_to_committed(b, h.base_offset, h.last_offset,
                                            data[pos:pos + h.size], "the log")
                    offset = h.last_offset + 1
            b.checked = hw
        if p.is_leader:
            epoch = p.leader_epoch
            if b.node_id not in p.isr:
                raise Violation(f"leader {b.node_id} of epoch {epoch} is not in its ISR "
                                f"{list(p.isr)}")
            last_epoch, last_hw = b.hw_seen
            if last_epoch == epoch and hw < last_hw:
                raise Violation(f"leader {b.node_id}'s high watermark went back from {last_hw} "
                                f"to {hw} in epoch {epoch}")
            b.hw_seen = (epoch, hw)
            last_epoch, last_leo = b.leo_seen
            if last_epoch == epoch and p.log_end_offset < last_leo:
                raise Violation(f"leader {b.node_id} of epoch {epoch} shortened its log from "
                                f"{last_leo} to {p.log_end_offset}")
            b.leo_seen = (epoch, p.log_end_offset)
            reg = self._registration(self.controller.image)
            if reg is not None and reg.leader == b.node_id and reg.leader_epoch == epoch:
                missing = set(reg.isr) - set(p.maximal_isr)
                if missing:
                    raise Violation(
                        f"leader {b.node_id}'s maximal ISR {list(p.maximal_isr)} lacks "
                        f"{sorted(missing)} of the controller's ISR {list(reg.isr)} in epoch "
                        f"{epoch}: its HW may pass a replica that can be elected")
            self._check_leader_has_acked(b)
        if any(e.broker == b.node_id for e in self.pending):
            self._complete_pending(b)

    def _check_leader_has_acked(self, b: Broker) -> None:
        p = b.partition
        epoch, done = b.verified
        if epoch != p.leader_epoch:
            done = 0
        todo = [a for a in self.acked[done:] if a.epoch <= p.leader_epoch]
        b.verified = (p.leader_epoch, len(self.acked))
        if not todo:
            return
        held = {}
        for data in p.log.iter_batches(max(p.log.log_start_offset, min(a.first for a in todo))):
            held[next(iter_batches(data))[1].base_offset] = data
        for a in todo:
            if held.get(a.first) != a.data:
                raise Violation(
                    f"leader {b.node_id} of epoch {p.leader_epoch} lacks acks=all batch #{a.n} "
                    f"at {a.first}..{a.last}, acknowledged in epoch {a.epoch} (log end "
                    f"{p.log_end_offset})")

    # -- faults ------------------------------------------------------------------------------
    def _partition(self) -> None:
        if self.cut:
            self.cut.clear()
            self._log("partition healed")
        else:
            ids = [CONTROLLER, *self.brokers]
            side, self.cut = draw_cut(self.rng, ids)
            self._log(f"partition {sorted(side)} | {sorted(set(ids) - side)}")
            self.stats["partitions"] += 1
        self._at(self._every(self.p.partition_every_ms), "partition")

    def _end_faults(self) -> None:
        self.faults = False
        self.cut.clear()
        self._log("faults end: healed, restarting every broker")
        for b in self.brokers.values():
            if not b.up:
                self._start(b)

    # -- the loop ----------------------------------------------------------------------------
    def _live(self, i: int, life: int) -> Broker | None:
        b = self.brokers[i]
        return b if b.up and b.life == life else None

    def _step(self) -> bool:
        if not self.queue:
            return False
        t, _, kind, payload = heapq.heappop(self.queue)
        self.now = t
        self.steps += 1
        if kind == "msg":
            self._deliver(payload[0])
        elif kind == "tick":
            fenced = self._commit(self.controller.tick(self.now))
            if fenced:
                self._log(f"controller fenced {fenced}")
            self._at(self.now + 10, "tick")
        elif kind == "rebalance":
            self._commit(self.controller.balance_leaders())
            self._at(self.now + self.p.rebalance_ms, "rebalance")
        elif kind == "hw_checkpoint":
            b = self._live(*payload)
            if b is not None:
                self._hw_checkpoint(b)
        elif kind in ("heartbeat", "isr"):
            b = self._live(*payload)
            if b is not None:
                (self._heartbeat if kind == "heartbeat" else self._isr_check)(b)
                self._after(b)
        elif kind == "fetch_timeout":
            b = self._live(payload[0], payload[1])
            if b is not None and b.fetch_req == payload[2]:
                b.fetch_req = 0
                self._fetcher_step(b)
        elif kind == "fetch_retry":
            b = self._live(payload[0], payload[1])
            if b is not None and b.fetch_gen == payload[2]:
                self._fetcher_step(b)
        elif kind == "fetch_wait":
            b = self._live(payload[0], payload[1])
            if b is not None:
                m = b.parked.get(payload[2])
                if m is not None and m.req_id == payload[3]:
                    del b.parked[payload[2]]
                    self._answer_fetch(b, m)
        elif kind == "alter_timeout":
            b = self._live(payload[0], payload[1])
            if b is not None and payload[2] in b.alters:
                self._alter_done(b, payload[2], None)
                self._after(b)
        elif kind == "restart":
            b = self.brokers[payload[0]]
            if not b.up:
                self._start(b)
        elif not self.faults:
            return True  # fault and workload events stop with the fault phase
        elif kind == "produce":
            self._produce()
            self._at(self._every(self.p.produce_every_ms), "produce")
        elif kind == "idempotent":
            self._idempotent_produce()
            self._at(self._every(2 * self.p.produce_every_ms), "idempotent")
        elif kind == "consume":
            self._consume()
            self._at(self._every(50), "consume")
        elif kind == "crash":
            live = [b for b in self.brokers.values() if b.up]
            if live:
                self._crash(self.rng.choice(live))
            self._at(self._every(self.p.crash_every_ms), "crash")
        elif kind == "partition":
            self._partition()
        if self.pending:  # produce timeouts and completions
            for b in self.brokers.values():
                if b.up:
                    self._complete_pending(b)
        return True

    def run(self) -> ReplicationSimulation:
        """The fault phase, then the calm phase's liveness check; raises ``Violation``."""
        try:
            while self.queue and self.queue[0][0] <= self.p.fault_ms:
                self._step()
            self.now = self.p.fault_ms
            self._end_faults()
            self._calm()
        finally:
            self.close()
        return self

    def _calm(self) -> None:
        deadline = self.now + LIVENESS_MS
        acked = len(self.acked)
        next_produce = self.now
        while self.now < deadline:
            if len(self.acked) == acked and self.now >= next_produce and not self.pending:
                self._produce(final=True)
                next_produce = self.now + 50
            if len(self.acked) > acked and self._converged():
                self.recovery_ms = self.now - self.p.fault_ms
                self._final_check()
                return
            if not self._step():
                break
        reg = self._registration(self.controller.image)
        raise Violation(
            f"no recovery within {LIVENESS_MS} ms of calm: "
            f"{'no acks=all append acknowledged' if len(self.acked) == acked else 'replicas not converged'}; "
            f"controller {reg}; " + "; ".join(self._describe(b) for b in self.brokers.values()))

    def _describe(self, b: Broker) -> str:
        p = b.partition
        if not b.up or p is None:
            return f"{b.node_id}:{'up' if b.up else 'down'}"
        return (f"{b.node_id}:l{p.leader_id}/e{p.leader_epoch}/isr{list(p.isr)}/"
                f"hw{p.high_watermark}/leo{p.log_end_offset}/{b.fetch_state}")

    def _converged(self) -> bool:
        reg = self._registration(self.controller.image)
        if reg is None or reg.leader < 0 or set(reg.isr) != set(reg.replicas):
            return False
        lead = self.brokers[reg.leader].partition
        if lead is None or not lead.is_leader or lead.leader_epoch != reg.leader_epoch:
            return False
        for r in reg.replicas:
            p = self.brokers[r].partition
            if (p is None or p.log_end_offset != lead.log_end_offset
                    or p.high_watermark != lead.log_end_offset):
                return False
        return True

    def _final_check(self) -> None:
        """Every replica's log, byte for byte, is the leader's; every acked batch is in it."""
        reg = self._registration(self.controller.image)
        assert reg is not None
        lead = self.brokers[reg.leader]
        want = b"".join(lead.log.iter_batches())
        for r in reg.replicas:
            b = self.brokers[r]
            if b.log is None or b"".join(b.log.iter_batches()) != want:
                raise Violation(f"replica {r}'s log differs from leader {reg.leader}'s at the end")
        for a in self.acked:
            data = lead.log.read_bytes(a.first, len(a.data))
            if data[:len(a.data)] != a.data:
                raise Violation(f"acks=all batch #{a.n} at {a.first} is not in the final log")
        seqs = [h.base_sequence for data in lead.log.iter_batches()
                for _, h in iter_batches(data) if h.producer_id == IDEM_PID]
        if len(set(seqs)) != len(seqs) or seqs != sorted(seqs):
            raise Violation(f"the idempotent producer's sequences in the final log are {seqs}: "
                            f"a batch sent again was written twice or out of order")
        lost = sorted(set(self.idem_acked) - set(seqs))
        if lost:
            raise Violation(f"acknowledged idempotent sequences {lost} are not in the final log")

    def close(self) -> None:
        for b in self.brokers.values():
            if b.log is not None:
                _abandon(b.log)
            b.log = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def _abandon(log: PartitionLog) -> None:
    """Drop a log as kill -9 does, but deterministically: its deferred file work (index
    and producer-state caches, which the loader does without) has run, so a replay finds
    the same files; then its descriptors close, with nothing flushed or checkpointed."""
    log.wait_file_work()
    for seg in log.segments:
        seg.close()
    log.closed = True
