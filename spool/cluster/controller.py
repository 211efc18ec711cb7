"""``QuorumController``: the active controller's state machine, sans I/O.

The controller is fed the committed metadata log and asked to compute writes:

    controller.replay(record, offset)         every committed record, in log order
    result = controller.create_topics(req)    a write: records + reply, from the image
    raft.append(result.records)               the caller's job; once committed,
    controller.replay(...) for each record    the records come back through replay
    send(result.reply)                        and only then is the reply sent

State changes only by replaying records (a write that is never committed leaves no
trace in the image); the one exception is the brokers' heartbeat bookkeeping (last
contact, reported metadata offset), soft state on the active controller only, as in
Kafka: ``activate(now_ms)`` resets it when this node becomes the quorum leader, after
it has replayed every committed record.

**One write in flight at a time.** Each write is computed against the image of what
is committed; the caller must append its records, wait for them to commit and replay
them before asking for the next write (or the next write could, say, place a second
topic of the same name). Reads (``image``) are free at any time.

Brokers (Kafka's ClusterControlManager, BrokerHeartbeatManager rules):

* ``register_broker`` writes a RegisterBrokerRecord, fenced. A new incarnation gets
  broker epoch = the offset of its RegisterBrokerRecord (the caller passes
  ``next_offset``, where the result's first record will land) and, when it replaces a
  previous incarnation, first leaves the ISRs and leaderships the old one held. The
  same incarnation registering again keeps its epoch and state.
* ``heartbeat``: a fenced broker is unfenced (BrokerRegistrationChangeRecord fenced=-1,
  then leaders elected for leaderless partitions it can lead) once it asks to be and
  its metadata offset has reached its RegisterBrokerRecord. ``want_shutdown`` from an
  unfenced broker that leads partitions starts a controlled shutdown: leaders move to
  other ISR members and it leaves the ISRs (PartitionChangeRecords), then
  BrokerRegistrationChangeRecord in_controlled_shutdown=1 (last, unlike Kafka, so its
  offset marks the end of the move); it is told to stop (``should_shut_down``) once it
  leads nothing and every active broker has reported reaching that offset; then it is
  fenced.
* ``tick(now_ms)`` fences the brokers whose last heartbeat is older than
  ``broker.session.timeout.ms``: they leave every ISR and leadership (new leaders
  from the ISR) and get BrokerRegistrationChangeRecord fenced=1.

Lifecycle: ``QuorumController(config, cluster_id=..., rng=random.Random(seed))``;
``replay``/``load_snapshot`` on every node that follows the log; ``activate(now_ms)``
when this node becomes the quorum leader (append what it returns: the bootstrap
metadata.version on an empty log); then writes, with ``tick(now_ms)`` at
``next_deadline_ms()``; ``snapshot_records()`` for Raft snapshots.

Topics, partitions, configs and producer ids: see ``topic_ops`` and ``config_ops``;
ACLs, SCRAM credentials and client quotas: ``spool.security``'s ``acl_ops``,
``scram_ops``, ``quota_ops`` over the image's ``security``;
ISR changes a partition leader asks for (AlterPartition): see ``alter_partition``;
ElectLeaders and leader balancing: see ``elections``; partition reassignments:
see ``reassignment``.
Records Kafka 4 writes at metadata.version 3.6-IV2 (``ops.METADATA_VERSION_LEVEL``):
fencing is BrokerRegistrationChangeRecord, never FenceBrokerRecord (both replay).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from spool.cluster import (
    alter_partition,
    config_ops,
    elections,
    features,
    reassignment,
    topic_ops,
)
from spool.cluster.image import (
    NO_LEADER,
    BrokerRegistration,
    Endpoint,
    MetadataDelta,
    MetadataImage,
)
from spool.cluster.ops import (
    METADATA_VERSION_FEATURE,
    BrokerHeartbeatReply,
    BrokerRegistrationReply,
    ControllerConfig,
    ControllerResult,
    ProducerIdsBlock,
)
from spool.cluster.snapshot import snapshot_records
from spool.protocol._generated.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from spool.protocol._generated.feature_level_record import FeatureLevelRecord
from spool.protocol._generated.producer_ids_record import ProducerIdsRecord
from spool.protocol._generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from spool.protocol._generated.unregister_broker_record import UnregisterBrokerRecord
from spool.protocol.errors import Errors, KafkaError
from spool.security import acl_ops, quota_ops, scram_ops

FENCE, UNFENCE = 1, -1  # BrokerRegistrationChangeRecord.fenced
MAX_PRODUCER_ID = (1 << 63) - 1


@dataclass
class _Session:
    """Heartbeat bookkeeping of one broker (soft state, active controller only)."""

    last_contact_ms: int
    metadata_offset: int = -1


class QuorumController:
    """The controller's state machine (module doc). Not thread-safe: one caller."""

    def __init__(self, config: ControllerConfig | None = None, *, cluster_id: str | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config or ControllerConfig()
        self.rng = rng or random.Random()
        self._image = MetadataImage(cluster_id=cluster_id)
        self._delta: MetadataDelta | None = None
        self._register_offsets: dict[int, int] = {}  # broker id -> its RegisterBrokerRecord
        self._shutdown_offsets: dict[int, int] = {}  # broker id -> in_controlled_shutdown rec
        self._sessions: dict[int, _Session] = {}

    # -- the log -----------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The image of every record replayed so far."""
        if self._delta is not None:
            self._image = self._delta.apply()
            self._delta = None
        return self._image

    @property
    def last_offset(self) -> int:
        return self._delta.offset if self._delta is not None else self._image.offset

    def replay(self, record: Any, offset: int) -> None:
        """Apply one committed record at ``offset`` (log order; snapshots too)."""
        if self._delta is None:
            self._delta = MetadataDelta(self._image)
        self._delta.replay(record, offset)
        if isinstance(record, RegisterBrokerRecord):
            self._register_offsets[record.broker_id] = offset
            self._shutdown_offsets.pop(record.broker_id, None)
            if record.in_controlled_shutdown and not record.fenced:  # from a snapshot
                self._shutdown_offsets[record.broker_id] = offset
        elif isinstance(record, UnregisterBrokerRecord):
            self._register_offsets.pop(record.broker_id, None)
            self._shutdown_offsets.pop(record.broker_id, None)
            self._sessions.pop(record.broker_id, None)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            if record.in_controlled_shutdown == 1:
                self._shutdown_offsets.setdefault(record.broker_id, offset)
            if record.fenced == FENCE:
                self._shutdown_offsets.pop(record.broker_id, None)

    def load_snapshot(self, records: Iterable[Any], offset: int) -> None:
        """Replace everything with a snapshot's records, all at ``offset`` (its end)."""
        self._image = MetadataImage(cluster_id=self._image.cluster_id)
        self._delta = None
        self._register_offsets.clear()
        self._shutdown_offsets.clear()
        for rec in records:
            self.replay(rec, offset)

    def snapshot_records(self) -> Iterator[Any]:
        """The whole image as records (for a Raft snapshot at ``last_offset``)."""
        return snapshot_records(self.image)

    def activate(self, now_ms: int) -> ControllerResult[None]:
        """This node became the active controller: every registered broker gets a fresh
        session. On an empty log, returns the bootstrap records (metadata.version, then the
        other features' bootstrap levels: ``spool.cluster.features``; then the records
        ``spool storage format`` left: ``config.bootstrap_records``)."""
        self._sessions = {b: _Session(now_ms) for b in self.image.brokers}
        if METADATA_VERSION_FEATURE in self.image.features:
            return ControllerResult([], None)
        return ControllerResult([FeatureLevelRecord(name=METADATA_VERSION_FEATURE,
                                                    feature_level=self.config.metadata_version)]
                                + [FeatureLevelRecord(name=n, feature_level=lvl)
                                   for n, lvl in sorted(features.bootstrap_levels().items())]
                                + list(self.config.bootstrap_records),
                                None)

    def update_features(self, updates: Sequence[features.FeatureUpdate], *, node_id: int,
                        validate_only: bool = False) -> ControllerResult[None]:
        """UpdateFeatures: the FeatureLevelRecords ``features.plan_update`` gives, checked
        against this controller's and every registered broker's supported levels. Raises
        KafkaError INVALID_UPDATE_VERSION (nothing written)."""
        img = self.image
        brokers = [(b.broker_id, {n: (lo, hi) for n, lo, hi in b.features})
                   for _, b in sorted(img.brokers.items())]
        planned = features.plan_update(img.features, updates, node_id=node_id, brokers=brokers)
        if validate_only:
            return ControllerResult([], None)
        return ControllerResult([FeatureLevelRecord(name=n, feature_level=lvl)
                                 for n, lvl in planned], None)

    # -- brokers -----------------------------------------------------------------------

    def register_broker(
        self, *, broker_id: int, cluster_id: str, incarnation_id: UUID,
        listeners: Sequence[Endpoint], rack: str | None = None,
        features: Sequence[tuple[str, int, int]] = (), next_offset: int, now_ms: int,
    ) -> ControllerResult[BrokerRegistrationReply]:
        """BrokerRegistration. ``next_offset``: the offset the result's first record will
        get. Raises KafkaError: INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION
        (another live incarnation holds the id), UNSUPPORTED_VERSION (features)."""
        img = self.image
        if img.cluster_id is not None and cluster_id != img.cluster_id:
            raise KafkaError(Errors.INCONSISTENT_CLUSTER_ID,
                             f"Expected cluster ID {img.cluster_id}, but got cluster ID "
                             f"{cluster_id}")
        existing = img.brokers.get(broker_id)
        if (existing is not None and existing.incarnation_id != incarnation_id
                and self._has_valid_session(existing, now_ms)):
            raise KafkaError(Errors.DUPLICATE_BROKER_REGISTRATION,
                             "Another broker is registered with that broker id.")
        supported = {n: (lo, hi) for n, lo, hi in features}
        for name, level in img.features.items():
            lo, hi = supported.get(name, (0, 0))
            if not lo <= level <= hi:
                raise KafkaError(Errors.UNSUPPORTED_VERSION,
                                 f"Unable to register because the broker does not support "
                                 f"version {level} of {name}. It wants a version between "
                                 f"{lo} and {hi}, inclusive.")
        records: list[Any] = []
        if existing is not None and existing.incarnation_id == incarnation_id:
            epoch, fenced, shutdown = existing.epoch, existing.fenced, existing.in_controlled_shutdown
        else:
            if existing is not None:  # the old incarnation's ISRs and leaderships go
                records += self._leave_partitions(img, broker_id)
            epoch, fenced, shutdown = next_offset + len(records), True, False
        records.append(RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,
            end_points=[BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                       security_protocol=e.security_protocol)
                        for e in listeners],
            features=[BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in features],
            rack=rack, fenced=fenced, in_controlled_shutdown=shutdown))
        self._sessions[broker_id] = _Session(now_ms)
        return ControllerResult(records, BrokerRegistrationReply(epoch))

    def heartbeat(
        self, *, broker_id: int, broker_epoch: int, want_fence: bool, want_shutdown: bool,
        current_metadata_offset: int, now_ms: int,
    ) -> ControllerResult[BrokerHeartbeatReply]:
        """BrokerHeartbeat (module doc). Raises STALE_BROKER_EPOCH for an unknown broker
        or another epoch."""
        img = self.image
        b = self._check_broker_epoch(img, broker_id, broker_epoch)
        registered_at = self._register_offsets.get(broker_id, img.offset)
        caught_up = current_metadata_offset >= registered_at
        session = self._sessions.setdefault(broker_id, _Session(now_ms))
        session.last_contact_ms = now_ms
        session.metadata_offset = current_metadata_offset
        records: list[Any] = []
        state = "fenced" if b.fenced else "shutdown" if b.in_controlled_shutdown else "unfenced"
        if state == "fenced":
            if want_shutdown:
                state = "shutdown_now"
                records = self._fence(img, b)
            elif not want_fence and caught_up:
                state = "unfenced"
                records = self._unfence(img, b)
        elif state == "unfenced":
            if want_fence:
                state = "shutdown_now" if want_shutdown else "fenced"
                records = self._fence(img, b)
            elif want_shutdown:
                if self._leads_any(img, broker_id):
                    state = "shutdown"
                    records = self._enter_controlled_shutdown(img, b)
                else:
                    state = "shutdown_now"
                    records = self._fence(img, b)
        elif not self._leads_any(img, broker_id) and self._others_caught_up(img, broker_id):
            state = "shutdown_now"
            records = self._fence(img, b)
        return ControllerResult(records, BrokerHeartbeatReply(
            is_caught_up=caught_up, is_fenced=state in ("fenced", "shutdown_now"),
            should_shut_down=state == "shutdown_now", in_controlled_shutdown=state == "shutdown"))

    def tick(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence every unfenced broker whose session expired; the reply lists them."""
        img = self.image
        records: list[Any] = []
        fenced = []
        for broker_id in sorted(img.brokers):
            b = img.brokers[broker_id]
            if b.fenced or self._has_valid_session(b, now_ms):
                continue
            recs = self._fence(img, b)
            records += recs
            fenced.append(broker_id)
            img = img.replay(recs)
        return ControllerResult(records, fenced)

    def next_deadline_ms(self) -> int | None:
        """When the next session may expire (for the caller's timer), None if never."""
        times = [s.last_contact_ms for i, s in self._sessions.items()
                 if i in self.image.brokers and not self.image.brokers[i].fenced]
        return min(times) + self.config.broker_session_timeout_ms + 1 if times else None

    def unregister_broker(self, broker_id: int) -> ControllerResult[None]:
        """UnregisterBroker: leave every ISR and leadership, then UnregisterBrokerRecord.
        Raises BROKER_ID_NOT_REGISTERED."""
        img = self.image
        b = img.brokers.get(broker_id)
        if b is None:
            raise KafkaError(Errors.BROKER_ID_NOT_REGISTERED,
                             f"Broker ID {broker_id} is not currently registered")
        records = self._leave_partitions(img, broker_id)
        records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=b.epoch))
        return ControllerResult(records, None)

    # -- topics, configs, producer ids ---------------------------------------------------

    def create_topics(self, req: Any) -> ControllerResult[Any]:
        """CreateTopics (a CreateTopicsRequest); see ``topic_ops.create_topics``."""
        return topic_ops.create_topics(self.image, self.config, self.rng, req)

    def create_partitions(self, req: Any) -> ControllerResult[Any]:
        """CreatePartitions (a CreatePartitionsRequest); see ``topic_ops``."""
        return topic_ops.create_partitions(self.image, self.config, self.rng, req)

    def delete_topics(self, targets: Sequence[tuple[str | None, UUID | None]]
                      ) -> ControllerResult[Any]:
        """DeleteTopics by (name, None) or (None, topic id); see ``topic_ops``."""
        return topic_ops.delete_topics(self.image, self.config, targets)

    def alter_configs(self, req: Any) -> ControllerResult[Any]:
        """AlterConfigs (an AlterConfigsRequest); see ``config_ops``."""
        return config_ops.alter_configs(self.image, req)

    def incremental_alter_configs(self, req: Any) -> ControllerResult[Any]:
        """IncrementalAlterConfigs (an IncrementalAlterConfigsRequest); see ``config_ops``."""
        return config_ops.incremental_alter_configs(self.image, req)

    def alter_partition(self, req: Any, version: int) -> ControllerResult[Any]:
        """AlterPartition (an AlterPartitionRequest at ``version``): a leader's ISR change;
        see ``alter_partition``."""
        return alter_partition.alter_partition(self.image, self.config, req, version)

    def elect_leaders(self, req: Any) -> ControllerResult[Any]:
        """ElectLeaders (an ElectLeadersRequest): preferred or unclean elections on
        request; see ``elections``."""
        return elections.elect_leaders(self.image, req)

    def elect_unclean_leaders(self, max_elections: int = 1000) -> ControllerResult[bool]:
        """Leaders from outside the ISR for leaderless partitions of topics that allow it
        (``unclean.leader.election.enable`` set after they lost their leader); True when
        more remain."""
        return elections.elect_unclean_leaders(self.image, self.config, max_elections)

    def alter_partition_reassignments(self, req: Any) -> ControllerResult[Any]:
        """AlterPartitionReassignments (an AlterPartitionReassignmentsRequest): start,
        change or cancel reassignments; see ``reassignment``."""
        return reassignment.alter_partition_reassignments(self.image, self.config, req)

    def list_partition_reassignments(self, req: Any) -> Any:
        """ListPartitionReassignments (a ListPartitionReassignmentsRequest): the
        reassignments in progress (a read: the response, no records)."""
        return reassignment.list_partition_reassignments(self.image, req)

    def balance_leaders(self, max_elections: int = 1000) -> ControllerResult[bool]:
        """auto.leader.rebalance.enable: leadership back to preferred replicas; the
        reply is True when more remain (call again after this write commits)."""
        return elections.balance_leaders(self.image, max_elections)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int
                              ) -> ControllerResult[ProducerIdsBlock]:
        """AllocateProducerIds: the next block of ``producer_id_block_size`` ids.
        Raises STALE_BROKER_EPOCH, or UNKNOWN_SERVER_ERROR when ids are exhausted."""
        img = self.image
        self._check_broker_epoch(img, broker_id, broker_epoch)
        first, size = img.next_producer_id, self.config.producer_id_block_size
        if first > MAX_PRODUCER_ID - size:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=first + size)
        return ControllerResult([rec], ProducerIdsBlock(broker_id, first, size))

    # -- security ----------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[Any]) -> ControllerResult[list]:
        """CreateAcls: AccessControlEntryRecords; the reply is one None-or-KafkaError per
        binding (``acl_ops.create_acls``). Raises POLICY_VIOLATION beyond one op's records."""
        records, results = acl_ops.create_acls(self.image.security, bindings)
        return ControllerResult(records, results)

    def delete_acls(self, filters: Sequence[Any]) -> ControllerResult[list]:
        """DeleteAcls: RemoveAccessControlEntryRecords; the reply per filter is its error or
        the ACLs it deletes (``acl_ops.delete_acls``)."""
        records, results = acl_ops.delete_acls(self.image.security, filters)
        return ControllerResult(records, results)

    def alter_user_scram_credentials(self, deletions: Sequence[Any], upsertions: Sequence[Any]
                                     ) -> ControllerResult[list]:
        """AlterUserScramCredentials (``scram_ops.alter_credentials``)."""
        records, results = scram_ops.alter_credentials(self.image.security, deletions,
                                                       upsertions)
        return ControllerResult(records, results)

    def alter_client_quotas(self, alterations: Sequence[Any], *, validate_only: bool = False
                            ) -> ControllerResult[list]:
        """AlterClientQuotas (``quota_ops.alter_quotas``); ``validate_only`` writes nothing."""
        records, results = quota_ops.alter_quotas(self.image.security, alterations)
        return ControllerResult([] if validate_only else records, results)

    # -- helpers -----------------------------------------------------------------------

    def _check_broker_epoch(self, img: MetadataImage, broker_id: int, epoch: int
                            ) -> BrokerRegistration:
        b = img.brokers.get(broker_id)
        if b is None:
            raise KafkaError(Errors.STALE_BROKER_EPOCH,
                             f"No broker registration found for broker {broker_id}")
        if b.epoch != epoch:
            raise KafkaError(Errors.STALE_BROKER_EPOCH,
                             f"Expected broker epoch {b.epoch}, but got broker epoch {epoch}")
        return b

    def _has_valid_session(self, b: BrokerRegistration, now_ms: int) -> bool:
        if b.fenced:
            return False
        s = self._sessions.get(b.broker_id)
        if s is None:  # not heard of since activation: give it a whole session
            s = self._sessions[b.broker_id] = _Session(now_ms)
        return s.last_contact_ms + self.config.broker_session_timeout_ms >= now_ms

    @staticmethod
    def _leads_any(img: MetadataImage, broker_id: int) -> bool:
        return any(p.leader == broker_id
                   for t in img.topics_by_id.values() for p in t.partitions.values())

    def _others_caught_up(self, img: MetadataImage, broker_id: int) -> bool:
        """Every active broker heard from has replayed the controlled shutdown record."""
        mark = self._shutdown_offsets.get(broker_id)
        if mark is None:
            return False
        return all(s.metadata_offset >= mark for i, s in self._sessions.items()
                   if i != broker_id and i in img.brokers and img.brokers[i].active)

    def _leave_partitions(self, img: MetadataImage, broker_id: int) -> list[Any]:
        """PartitionChangeRecords taking ``broker_id`` out of every ISR and leadership."""
        return list(topic_ops.isr_changes(
            img, self.config, lambda p: broker_id in p.isr or p.leader == broker_id,
            remove=broker_id))

    def _fence(self, img: MetadataImage, b: BrokerRegistration) -> list[Any]:
        records = self._leave_partitions(img, b.broker_id)
        records.append(BrokerRegistrationChangeRecord(
            broker_id=b.broker_id, broker_epoch=b.epoch, fenced=FENCE))
        return records

    def _unfence(self, img: MetadataImage, b: BrokerRegistration) -> list[Any]:
        records: list[Any] = [BrokerRegistrationChangeRecord(
            broker_id=b.broker_id, broker_epoch=b.epoch, fenced=UNFENCE)]
        records += topic_ops.isr_changes(img, self.config, lambda p: p.leader == NO_LEADER,
                                         add=b.broker_id)
        return records

    def _enter_controlled_shutdown(self, img: MetadataImage, b: BrokerRegistration
                                   ) -> list[Any]:
        records = self._leave_partitions(img, b.broker_id)
        records.append(BrokerRegistrationChangeRecord(
            broker_id=b.broker_id, broker_epoch=b.epoch, in_controlled_shutdown=1))
        return records

