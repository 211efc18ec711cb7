"""``MetadataImage``: the cluster's metadata as an immutable snapshot of the metadata log.

An image is what replaying Kafka's metadata records (``spool.protocol._generated``'s
``TopicRecord``, ``PartitionRecord``, ``RegisterBrokerRecord``, ...) up to some offset
gives. Nothing mutates an image: ``MetadataDelta(image)`` replays records on top of one
and ``apply()`` returns the next image, sharing every topic the records did not touch
(Kafka's ``MetadataDelta``/``MetadataImage``). So a broker can publish one image to
its event loop, readers keep the snapshot they took, and a writer builds the next one
beside it. ``image.replay(records)`` is the one-call form.

What an image holds (by Kafka's names):

    features       name -> finalized level (FeatureLevelRecord; level 0 removes it)
    brokers        id -> BrokerRegistration: incarnation id, broker epoch, listeners
                   (name, host, port, security protocol), rack, fenced,
                   in controlled shutdown, supported features
    controllers    id -> ControllerRegistration (RegisterControllerRecord)
    topics         by id and by name -> TopicImage -> partition id -> PartitionRegistration
                   (replicas, isr, removing/adding replicas, leader, leader_epoch,
                   partition_epoch, leader_recovery_state)
    configs        ConfigResource(type, name) -> {key: value}: TOPIC (2) by topic name,
                   BROKER (4) by broker id, or "" for the cluster-wide default
    next_producer_id   the first id of the next block ProducerIdsRecord hands out
    security       ``spool.security.image.SecurityImage``: ACLs, SCRAM credentials, client
                   quotas (AccessControlEntryRecord, UserScramCredentialRecord,
                   ClientQuotaRecord and the removals; its rules)
    offset         the offset of the last record replayed (-1: none)

Replay rules (Kafka's): a PartitionChangeRecord field left at its "no change"
value (null lists, leader -2, leader recovery state -1) keeps the old value; a
new leader (anything but -2) bumps ``leader_epoch``; every change bumps
``partition_epoch``. RemoveTopicRecord removes the topic and its TOPIC configs.
Fencing, unfencing and controlled shutdown (FenceBrokerRecord,
UnfenceBrokerRecord, BrokerRegistrationChangeRecord) and UnregisterBrokerRecord
apply only to the registration with that broker epoch. A record about a topic,
partition or broker that does not exist is a corrupt log: ``MetadataReplayError``.
Record types the image does not track (NoOpRecord, delegation tokens, ...) are skipped.
``cluster_id`` is not in the log (it comes from ``meta.properties``); it rides along.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple
from uuid import UUID

from spool.protocol._generated.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.feature_level_record import FeatureLevelRecord
from spool.protocol._generated.fence_broker_record import FenceBrokerRecord
from spool.protocol._generated.partition_change_record import PartitionChangeRecord
from spool.protocol._generated.partition_record import PartitionRecord
from spool.protocol._generated.producer_ids_record import ProducerIdsRecord
from spool.protocol._generated.register_broker_record import RegisterBrokerRecord
from spool.protocol._generated.register_controller_record import RegisterControllerRecord
from spool.protocol._generated.remove_topic_record import RemoveTopicRecord
from spool.protocol._generated.topic_record import TopicRecord
from spool.protocol._generated.unfence_broker_record import UnfenceBrokerRecord
from spool.protocol._generated.unregister_broker_record import UnregisterBrokerRecord
from spool.security.image import SecurityDelta, SecurityImage, SecurityReplayError

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.leader: "the leader did not change"
TOPIC_RESOURCE = 2  # ConfigResource types, as the wire and ConfigRecord number them
BROKER_RESOURCE = 4
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


class MetadataReplayError(ValueError):
    """A record that cannot apply to the image it is replayed on: the log is corrupt."""


class Endpoint(NamedTuple):
    """One listener of a broker or controller (RegisterBrokerRecord.EndPoints)."""

    name: str
    host: str
    port: int
    security_protocol: int


class ConfigResource(NamedTuple):
    """A config owner: (TOPIC_RESOURCE, topic name) or (BROKER_RESOURCE, "id" or "")."""

    type: int
    name: str


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker, as its last RegisterBrokerRecord and changes left it."""

    broker_id: int
    incarnation_id: UUID
    epoch: int
    listeners: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    features: tuple[tuple[str, int, int], ...] = ()  # (name, min, max) supported

    @property
    def active(self) -> bool:
        """Unfenced and not in controlled shutdown: may lead partitions, join ISRs."""
        return not self.fenced and not self.in_controlled_shutdown

    def listener(self, name: str) -> Endpoint | None:
        return next((e for e in self.listeners if e.name == name), None)

    @classmethod
    def from_record(cls, rec: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=rec.broker_id, incarnation_id=rec.incarnation_id, epoch=rec.broker_epoch,
            listeners=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol)
                            for e in rec.end_points),
            rack=rec.rack or None, fenced=rec.fenced,
            in_controlled_shutdown=rec.in_controlled_shutdown,
            features=tuple((f.name, f.min_supported_version, f.max_supported_version)
                           for f in rec.features),
        )


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A registered controller (RegisterControllerRecord)."""

    controller_id: int
    incarnation_id: UUID
    listeners: tuple[Endpoint, ...] = ()
    features: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's replicas, ISR and leadership (Kafka's PartitionRegistration)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # 1: recovering from an unclean election

    @classmethod
    def from_record(cls, rec: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=tuple(rec.replicas), isr=tuple(rec.isr), leader=rec.leader,
            leader_epoch=rec.leader_epoch, partition_epoch=rec.partition_epoch,
            removing_replicas=tuple(rec.removing_replicas),
            adding_replicas=tuple(rec.adding_replicas),
            leader_recovery_state=rec.leader_recovery_state,
        )

    def to_record(self, topic_id: UUID, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            partition_id=partition_id, topic_id=topic_id, replicas=list(self.replicas),
            isr=list(self.isr), removing_replicas=list(self.removing_replicas),
            adding_replicas=list(self.adding_replicas), leader=self.leader,
            leader_recovery_state=self.leader_recovery_state, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
        )

    def merge(self, rec: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after ``rec`` (module doc: null/-2/-1 mean "no change")."""
        leader, epoch = self.leader, self.leader_epoch
        if rec.leader != NO_LEADER_CHANGE:
            leader, epoch = rec.leader, epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if rec.replicas is None else tuple(rec.replicas),
            isr=self.isr if rec.isr is None else tuple(rec.isr),
            leader=leader, leader_epoch=epoch, partition_epoch=self.partition_epoch + 1,
            removing_replicas=(self.removing_replicas if rec.removing_replicas is None
                               else tuple(rec.removing_replicas)),
            adding_replicas=(self.adding_replicas if rec.adding_replicas is None
                             else tuple(rec.adding_replicas)),
            leader_recovery_state=(self.leader_recovery_state if rec.leader_recovery_state == -1
                                   else rec.leader_recovery_state),
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    """A topic: its name, id and partitions (partition id -> registration)."""

    name: str
    topic_id: UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class MetadataImage:
    """The cluster metadata at ``offset`` (module doc). Never mutated: share it freely.
    Equality compares the metadata, not ``offset`` (a snapshot replays to an equal image)."""

    cluster_id: str | None = None
    offset: int = field(default=-1, compare=False)
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    controllers: Mapping[int, ControllerRegistration] = field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[UUID, TopicImage] = field(default_factory=lambda: _EMPTY)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    configs: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    total_partitions: int = field(default=0, compare=False)
    security: SecurityImage = field(default_factory=SecurityImage)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def partition(self, topic_id: UUID, partition_id: int) -> PartitionRegistration | None:
        t = self.topics_by_id.get(topic_id)
        return None if t is None else t.partitions.get(partition_id)

    def config(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The dynamic values set on one resource (no defaults merged in)."""
        return self.configs.get(ConfigResource(resource_type, name), _EMPTY)

    def replay(self, records: Iterable[Any], offset: int | None = None) -> MetadataImage:
        """The image after ``records`` (one offset each, counting up from ``self.offset + 1``
        unless ``offset`` is the first record's)."""
        delta = MetadataDelta(self)
        start = self.offset + 1 if offset is None else offset
        for i, rec in enumerate(records):
            delta.replay(rec, start + i)
        return delta.apply()


class MetadataDelta:
    """Records replayed on top of an image; ``apply()`` gives the next image.

    Copy on write: the first change to brokers, configs, features or topics copies
    that one mapping; the first change to a topic's partitions copies that topic's
    partitions only. ``apply()`` may be called more than once (each call returns an
    image of everything replayed so far); the delta must not be used from two threads.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.offset = image.offset
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._controllers: dict[int, ControllerRegistration] | None = None
        self._configs: dict[ConfigResource, Mapping[str, str]] | None = None
        self._next_producer_id = image.next_producer_id
        self._topics: dict[UUID, TopicImage] | None = None
        self._parts: dict[UUID, dict[int, PartitionRegistration]] = {}  # changed topics
        self._names_changed = False
        self._security = SecurityDelta(image.security)

    # -- replay ----------------------------------------------------------------------

    def replay(self, rec: Any, offset: int = -1) -> None:
        """Apply one metadata record; ``offset`` is its position in the log."""
        handler = _HANDLERS.get(type(rec))
        if handler is not None:
            handler(self, rec)
        else:
            try:
                self._security.replay(rec)
            except SecurityReplayError as e:
                raise MetadataReplayError(str(e)) from e
        self.offset = max(self.offset, offset)

    def _topic_map(self) -> dict[UUID, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.image.topics_by_id)
        return self._topics

    def _partitions_of(self, topic_id: UUID, what: Any) -> dict[int, PartitionRegistration]:
        parts = self._parts.get(topic_id)
        if parts is None:
            t = self._topic_map().get(topic_id)
            if t is None:
                raise MetadataReplayError(f"{what}: no topic with id {topic_id}")
            parts = self._parts[topic_id] = dict(t.partitions)
        return parts

    def _topic_record(self, rec: TopicRecord) -> None:
        topics = self._topic_map()
        if rec.topic_id in topics:
            raise MetadataReplayError(f"{rec}: topic id {rec.topic_id} exists")
        topics[rec.topic_id] = TopicImage(rec.name, rec.topic_id)
        self._parts[rec.topic_id] = {}
        self._names_changed = True

    def _partition_record(self, rec: PartitionRecord) -> None:
        self._partitions_of(rec.topic_id, rec)[rec.partition_id] = (
            PartitionRegistration.from_record(rec))

    def _partition_change(self, rec: PartitionChangeRecord) -> None:
        parts = self._partitions_of(rec.topic_id, rec)
        old = parts.get(rec.partition_id)
        if old is None:
            raise MetadataReplayError(f"{rec}: no partition {rec.partition_id}")
        parts[rec.partition_id] = old.merge(rec)

    def _remove_topic(self, rec: RemoveTopicRecord) -> None:
        t = self._topic_map().pop(rec.topic_id, None)
        if t is None:
            raise MetadataReplayError(f"{rec}: no topic with id {rec.topic_id}")
        self._parts.pop(rec.topic_id, None)
        self._names_changed = True
        resource = ConfigResource(TOPIC_RESOURCE, t.name)
        if resource in self.image.configs or (self._configs and resource in self._configs):
            self._config_map().pop(resource, None)

    def _config_map(self) -> dict[ConfigResource, Mapping[str, str]]:
        if self._configs is None:
            self._configs = dict(self.image.configs)
        return self._configs

    def _config(self, rec: ConfigRecord) -> None:
        configs = self._config_map()
        resource = ConfigResource(rec.resource_type, rec.resource_name)
        values = dict(configs.get(resource, _EMPTY))
        if rec.value is None:
            values.pop(rec.name, None)
        else:
            values[rec.name] = rec.value
        if values:
            configs[resource] = MappingProxyType(values)
        else:
            configs.pop(resource, None)

    def _feature(self, rec: FeatureLevelRecord) -> None:
        if self._features is None:
            self._features = dict(self.image.features)
        if rec.feature_level == 0:
            self._features.pop(rec.name, None)
        else:
            self._features[rec.name] = rec.feature_level

    def _broker_map(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    def _register_broker(self, rec: RegisterBrokerRecord) -> None:
        self._broker_map()[rec.broker_id] = BrokerRegistration.from_record(rec)

    def _broker(self, broker_id: int, epoch: int, rec: Any) -> BrokerRegistration:
        b = self._broker_map().get(broker_id)
        if b is None:
            raise MetadataReplayError(f"{rec}: no broker {broker_id} is registered")
        if b.epoch != epoch:
            raise MetadataReplayError(f"{rec}: broker {broker_id} has epoch {b.epoch}")
        return b

    def _unregister_broker(self, rec: UnregisterBrokerRecord) -> None:
        self._broker(rec.broker_id, rec.broker_epoch, rec)
        del self._broker_map()[rec.broker_id]

    def _fence(self, rec: FenceBrokerRecord) -> None:
        b = self._broker(rec.id, rec.epoch, rec)
        self._broker_map()[rec.id] = replace(b, fenced=True)

    def _unfence(self, rec: UnfenceBrokerRecord) -> None:
        b = self._broker(rec.id, rec.epoch, rec)
        self._broker_map()[rec.id] = replace(b, fenced=False)

    def _registration_change(self, rec: BrokerRegistrationChangeRecord) -> None:
        b = self._broker(rec.broker_id, rec.broker_epoch, rec)
        fenced = {1: True, -1: False}.get(rec.fenced, b.fenced)
        shutdown = True if rec.in_controlled_shutdown == 1 else b.in_controlled_shutdown
        self._broker_map()[rec.broker_id] = replace(
            b, fenced=fenced, in_controlled_shutdown=shutdown)

    def _register_controller(self, rec: RegisterControllerRecord) -> None:
        if self._controllers is None:
            self._controllers = dict(self.image.controllers)
        self._controllers[rec.controller_id] = ControllerRegistration(
            rec.controller_id, rec.incarnation_id,
            tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in rec.end_points),
            tuple((f.name, f.min_supported_version, f.max_supported_version)
                  for f in rec.features))

    def _producer_ids(self, rec: ProducerIdsRecord) -> None:
        if rec.next_producer_id < self._next_producer_id:
            raise MetadataReplayError(
                f"{rec}: producer ids go back from {self._next_producer_id}")
        self._next_producer_id = rec.next_producer_id

    # -- apply -----------------------------------------------------------------------

    def apply(self) -> MetadataImage:
        """The image with everything replayed so far."""
        img = self.image
        topics_by_id, topics_by_name = img.topics_by_id, img.topics_by_name
        total = img.total_partitions
        if self._topics is not None or self._parts:
            topics = self._topic_map()
            for tid, parts in self._parts.items():
                old = img.topics_by_id.get(tid)
                total += len(parts) - (0 if old is None else len(old.partitions))
                topics[tid] = replace(topics[tid], partitions=MappingProxyType(dict(parts)))
            for tid, old in img.topics_by_id.items():
                if tid not in topics:
                    total -= len(old.partitions)
            topics_by_id = MappingProxyType(dict(topics))
            if self._names_changed:
                topics_by_name = MappingProxyType({t.name: t for t in topics.values()})
            else:
                names = dict(img.topics_by_name)
                for tid in self._parts:
                    names[topics[tid].name] = topics[tid]
                topics_by_name = MappingProxyType(names)
        return MetadataImage(
            cluster_id=img.cluster_id,
            offset=self.offset,
            features=_frozen(self._features, img.features),
            brokers=_frozen(self._brokers, img.brokers),
            controllers=_frozen(self._controllers, img.controllers),
            topics_by_id=topics_by_id,
            topics_by_name=topics_by_name,
            configs=_frozen(self._configs, img.configs),
            next_producer_id=self._next_producer_id,
            total_partitions=total,
            security=self._security.apply(),
        )


def _frozen(changed: dict | None, old: Mapping) -> Mapping:
    return old if changed is None else MappingProxyType(dict(changed))


_HANDLERS = {
    TopicRecord: MetadataDelta._topic_record,
    PartitionRecord: MetadataDelta._partition_record,
    PartitionChangeRecord: MetadataDelta._partition_change,
    RemoveTopicRecord: MetadataDelta._remove_topic,
    ConfigRecord: MetadataDelta._config,
    FeatureLevelRecord: MetadataDelta._feature,
    RegisterBrokerRecord: MetadataDelta._register_broker,
    UnregisterBrokerRecord: MetadataDelta._unregister_broker,
    FenceBrokerRecord: MetadataDelta._fence,
    UnfenceBrokerRecord: MetadataDelta._unfence,
    BrokerRegistrationChangeRecord: MetadataDelta._registration_change,
    RegisterControllerRecord: MetadataDelta._register_controller,
    ProducerIdsRecord: MetadataDelta._producer_ids,
}
