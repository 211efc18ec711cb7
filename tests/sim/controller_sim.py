"""The quorum carrying the controller: ``Simulation`` with a ``QuorumController`` on every
node (``spool.cluster.controller``), driven as the broker process drives it.

Every node replays the committed metadata records it applies (decoded with
``metadata_records.decode_record``) and, from a snapshot, the records its controller
wrote into it (``snapshot_records``). The quorum leader activates its controller once it
has applied every entry before its epoch's LeaderChange (Kafka activates the new active
controller at the same point), then issues writes one at a time, each computed against
its image, appended as one ``append`` and acknowledged only once committed and replayed:
broker registrations (now and then a new incarnation), heartbeats that unfence, session
ticks, topic creations with unique names, partition reassignments (new replica lists and
cancellations) and the leaders' ISR expansions (AlterPartition) that complete them.

Invariants on top of ``Simulation``'s (which already hold every applied record to the
committed log, event by event):

- the image a node's controller holds after applying offsets ``[0, k)``, by entries or
  from a snapshot, equals the image a reference controller builds by replaying the
  committed log ``[0, k)`` (checked at every snapshot load and, for every node, at the
  end of the run);
- every acknowledged topic creation is in every voter's final image, with its topic id,
  and every acknowledged registration's broker epoch is at most its final epoch;
- in the final image, a partition's adding and removing replicas are disjoint subsets of
  its replicas, and its ISR is a non-empty subset of them.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from spool.cluster.controller import QuorumController
from spool.cluster.image import Endpoint, MetadataImage
from spool.cluster.ops import ControllerConfig
from spool.protocol._generated import alter_partition_reassignments_request as aprq
from spool.protocol._generated import alter_partition_request as apq
from spool.protocol._generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from spool.protocol._generated.feature_level_record import FeatureLevelRecord
from spool.protocol.errors import KafkaError
from spool.protocol.metadata_records import decode_record, encode_record
from tests.sim.sim import LEADER, SimNode, Simulation, Violation

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
MV = ("metadata.version", 1, 14)
BROKERS = (1, 2, 3, 4)


class ControllerSimulation(Simulation):
    def __init__(self, seed: int, **kw: Any) -> None:
        self.controllers: dict[int, QuorumController] = {}
        self.active: dict[int, int] = {}  # node -> epoch its controller was activated in
        self.pending: dict[int, tuple[int, int, str, Any]] = {}  # node -> epoch, last, ...
        self.reference = QuorumController(ControllerConfig(), cluster_id=CLUSTER_ID)
        self.reference_images: list[MetadataImage] = [self.reference.image]
        self.incarnations: dict[int, uuid.UUID] = {}
        self.acked_topics: dict[str, uuid.UUID] = {}
        self.acked_epochs: dict[int, int] = {}
        self.topics = 0
        super().__init__(seed, **kw)

    # -- the state machine -------------------------------------------------------------------
    def new_state_machine(self, n: SimNode) -> None:
        self.controllers[n.node_id] = QuorumController(
            ControllerConfig(), cluster_id=CLUSTER_ID, rng=random.Random(self.rng.getrandbits(64)))
        self.active.pop(n.node_id, None)
        self.pending.pop(n.node_id, None)

    def applied_entry(self, n: SimNode, entry: Any) -> None:
        self._extend_reference()
        if entry.value is not None:
            record, _ = decode_record(entry.value)
            self.controllers[n.node_id].replay(record, entry.offset)

    def _extend_reference(self) -> None:
        while len(self.reference_images) <= len(self.committed):
            offset = len(self.reference_images) - 1
            _, value = self.committed[offset]
            if value is not None:
                self.reference.replay(decode_record(value)[0], offset)
            self.reference_images.append(self.reference.image)

    def snapshot_extra(self, n: SimNode) -> list[bytes]:
        return [encode_record(r) for r in self.controllers[n.node_id].snapshot_records()]

    def loaded_snapshot(self, n: SimNode, extra: Any) -> None:
        end = len(n.applied)
        controller = self.controllers[n.node_id]
        controller.load_snapshot([decode_record(v)[0] for v in extra], end - 1)
        self._extend_reference()
        self._check_image(n, "after loading a snapshot")

    def _check_image(self, n: SimNode, when: str) -> None:
        k = len(n.applied)
        if self.controllers[n.node_id].image != self.reference_images[k]:
            raise Violation(f"node {n.node_id}'s controller image {when} at offset {k} is not "
                            f"the committed log's: {self.controllers[n.node_id].image} != "
                            f"{self.reference_images[k]}")

    # -- the active controller ---------------------------------------------------------------
    def after_apply(self, n: SimNode) -> None:
        r = n.raft
        if r is None:
            return
        i = n.node_id
        if r.role != LEADER:
            self.active.pop(i, None)
            self.pending.pop(i, None)
            return
        pend = self.pending.get(i)
        if pend is not None:
            epoch, last, kind, info = pend
            if epoch != r.epoch:
                del self.pending[i]
            elif len(n.applied) > last:
                del self.pending[i]
                self._acknowledge(kind, info)
        if self.active.get(i) != r.epoch and len(n.applied) > r.epoch_start_offset >= 0:
            self.active[i] = r.epoch
            self._write(n, "activate", self.controllers[i].activate(self._clock(n)), None)

    def _write(self, n: SimNode, kind: str, result: Any, info: Any) -> None:
        r = n.raft
        assert r is not None
        if not result.records:
            self._acknowledge(kind, info, result.reply)
            return
        last = r.append([encode_record(rec) for rec in result.records], self._clock(n))
        self.pending[n.node_id] = (r.epoch, last, kind, (info, result.reply))
        self._log(f"{n.node_id} controller {kind}: {len(result.records)} records, last {last}")
        self._after(n, r.poll(self._clock(n)))

    def _acknowledge(self, kind: str, info: Any, reply: Any = None) -> None:
        if isinstance(info, tuple):
            info, reply = info
        if kind == "create" and reply.topics[0].error_code == 0:
            self.acked_topics[info] = reply.topics[0].topic_id
        elif kind == "register":
            self.acked_epochs[info] = reply.broker_epoch

    def workload(self) -> None:
        leaders = [n for n in self._live() if n.raft.role == LEADER
                   and self.active.get(n.node_id) == n.raft.epoch
                   and n.node_id not in self.pending]
        if not leaders:
            return
        n = self.rng.choice(leaders)
        controller = self.controllers[n.node_id]
        now = self._clock(n)
        img = controller.image
        op = self.rng.random()
        try:
            if op < 0.3 or not img.brokers:
                b = self.rng.choice(BROKERS)
                if b not in self.incarnations or self.rng.random() < 0.1:
                    self.incarnations[b] = uuid.UUID(int=self.rng.getrandbits(128), version=4)
                result = controller.register_broker(
                    broker_id=b, cluster_id=CLUSTER_ID, incarnation_id=self.incarnations[b],
                    listeners=[Endpoint("PLAINTEXT", "127.0.0.1", 9092 + b, 0)],
                    rack=f"r{b % 2}", features=[MV], next_offset=n.raft.log_end_offset,
                    now_ms=now)
                self._write(n, "register", result, b)
            elif op < 0.6:
                b = self.rng.choice(sorted(img.brokers))
                result = controller.heartbeat(
                    broker_id=b, broker_epoch=img.brokers[b].epoch, want_fence=False,
                    want_shutdown=False, current_metadata_offset=len(n.applied) - 1, now_ms=now)
                self._write(n, "heartbeat", result, b)
            elif op < 0.8 or not img.topics_by_name:
                self.topics += 1
                name = f"t{self.topics}"
                req = CreateTopicsRequest(topics=[CreatableTopic(
                    name=name, num_partitions=1 + self.rng.randrange(3), replication_factor=-1,
                    assignments=[], configs=[])], timeout_ms=1000, validate_only=False)
                self._write(n, "create", controller.create_topics(req), name)
            elif op < 0.85:
                move = self._reassignment(img)
                if move is not None:
                    self._write(n, "reassign", controller.alter_partition_reassignments(move),
                                None)
            elif op < 0.9:
                req = self._isr_expansion(img)
                if req is not None:
                    self._write(n, "alter isr", controller.alter_partition(req, 3), None)
            else:
                self._write(n, "tick", controller.tick(now), None)
        except KafkaError:
            pass

    def _pick_partition(self, img: MetadataImage) -> tuple[Any, int] | None:
        names = sorted(n for n, t in img.topics_by_name.items() if t.partitions)
        if not names:  # (a topic's records may be applied in part so far)
            return None
        t = img.topics_by_name[self.rng.choice(names)]
        return t, self.rng.choice(sorted(t.partitions))

    def _reassignment(self, img: MetadataImage) -> aprq.AlterPartitionReassignmentsRequest | None:
        """A random new replica list (brokers registered or not) or a cancellation."""
        picked = self._pick_partition(img)
        if picked is None:
            return None
        t, pid = picked
        size = self.rng.randrange(4)
        replicas = self.rng.sample(BROKERS, size) if size else None
        return aprq.AlterPartitionReassignmentsRequest(topics=[aprq.ReassignableTopic(
            name=t.name, partitions=[aprq.ReassignablePartition(partition_index=pid,
                                                                replicas=replicas)])])

    def _isr_expansion(self, img: MetadataImage) -> apq.AlterPartitionRequest | None:
        """The leader of a random partition puts every active replica in its ISR."""
        picked = self._pick_partition(img)
        if picked is None:
            return None
        t, pid = picked
        p = t.partitions[pid]
        if p.leader == -1:
            return None
        isr = [p.leader] + [r for r in p.replicas if r != p.leader and r in img.brokers
                            and img.brokers[r].active]
        return apq.AlterPartitionRequest(
            broker_id=p.leader, broker_epoch=img.brokers[p.leader].epoch,
            topics=[apq.TopicData(topic_id=t.topic_id, partitions=[apq.PartitionData(
                partition_index=pid, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, leader_recovery_state=0,
                new_isr_with_epochs=[apq.BrokerState(broker_id=r,
                                                     broker_epoch=img.brokers[r].epoch)
                                     for r in isr])])])

    def final_values(self) -> list[bytes]:
        # Replays to nothing new: the image keeps metadata.version where it is.
        level = self.reference.image.features.get(
            "metadata.version", ControllerConfig().metadata_version)
        return [encode_record(FeatureLevelRecord(name="metadata.version", feature_level=level))]

    def final_check(self) -> None:
        self._extend_reference()
        for n in self._live():
            self._check_image(n, "at the end")
        for v in self.voters:
            img = self.controllers[v].image
            for name, topic_id in self.acked_topics.items():
                topic = img.topic(name)
                if topic is None or topic.topic_id != topic_id:
                    raise Violation(f"acknowledged topic {name} ({topic_id}) is "
                                    f"{topic} on node {v}")
            for t in img.topics_by_id.values():
                for pid, p in t.partitions.items():
                    adding, removing = set(p.adding_replicas), set(p.removing_replicas)
                    if (not adding | removing <= set(p.replicas) or adding & removing
                            or not p.isr or not set(p.isr) <= set(p.replicas)):
                        raise Violation(f"{t.name}-{pid} on node {v}: {p}")
            for b, epoch in self.acked_epochs.items():
                broker = img.brokers.get(b)
                if broker is None or broker.epoch < epoch:
                    raise Violation(f"acknowledged registration of broker {b} at epoch "
                                    f"{epoch} is gone on node {v}: {broker}")
