"""``MetadataView``: the one read-only picture of the cluster that handlers answer from.

Metadata, DescribeCluster, DescribeTopicPartitions, FindCoordinator, the leadership checks of
Produce/Fetch/ListOffsets/OffsetForLeaderEpoch/DeleteRecords and
DescribeConfigs read the broker's current view (``broker.view``) and
nothing else, whichever way the broker runs:

- ``SingleNodeView`` (``process.roles`` unset): today's single node over
  ``spool.storage.metadata``. One broker, this one; it is the controller;
  every partition has replicas = ISR = [this node] and leader epoch 0; a
  partition whose log does not exist yet (its creation still running, or
  left uncreated by the partition limit) has leader -1, which Metadata
  reports as LEADER_NOT_AVAILABLE.
- ``spool.broker.cluster_view.ClusterView`` (``process.roles`` set): the
  ``MetadataImage`` built from the committed metadata log, replaced whole
  each time the broker publishes a new image.

``topic(name)`` returns the same ``TopicView`` object for as long as the topic is unchanged
(the single node caches them by the metadata store's version and the log manager's
generation; a cluster view is immutable and caches them for its life), so a handler may
cache what it builds from one by identity (Metadata does, ``spool.broker.handlers.metadata``).

A view is a snapshot as far as one call goes: each method answers from one
consistent state; two calls may see two states (the single node's store
changes under it, a cluster broker publishes new images). Handlers that
need one partition's leader and epoch together take them from one
``partition`` call.

Endpoints: a broker is listed with the host and port of the listener
name the request came in on (Kafka answers with the endpoints of the same
listener name); ``listener=None`` means the first advertised listener.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    """One broker as a client sees it: where to reach it on one listener, and its rack."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionView:
    """One partition: its leader (-1: none), leader epoch, replicas, ISR, offline replicas."""

    partition_index: int
    leader: int
    leader_epoch: int
    replicas: Sequence[int]
    isr: Sequence[int]
    offline_replicas: Sequence[int] = ()


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: uuid.UUID
    partitions: Sequence[PartitionView]
    configs: Mapping[str, str] = field(default_factory=dict)


class MetadataView(Protocol):
    """What handlers may know about the cluster (module doc)."""

    #: False for the single node; True when the view comes from a cluster's metadata log.
    clustered: bool

    def brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """The live (unfenced) brokers, by node id, with their ``listener`` endpoint."""

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """The registered but fenced brokers, by node id (DescribeCluster v2 shows them)."""

    def broker(self, node_id: int, listener: str | None = None) -> BrokerEndpoint | None:
        """One live broker's ``listener`` endpoint, or None."""

    def controller_id(self) -> int:
        """The node id clients are told is the controller (-1: none known)."""

    def topic_names(self) -> list[str]:
        """Every topic, sorted."""

    def topic(self, name: str) -> TopicView | None:
        """One topic with all its partitions, or None."""

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The id of the topic named ``name``, or None."""

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, or None."""

    def partition_count(self, name: str) -> int:
        """How many partitions ``name`` has (0: no such topic)."""

    def partition(self, topic: str, index: int) -> PartitionView | None:
        """One partition, or None if the topic or partition does not exist."""

    def topic_configs(self, name: str) -> dict[str, str]:
        """The topic's config overrides ({} if none or no such topic)."""

    def broker_configs(self, node_id: int) -> dict[str, str]:
        """Dynamic broker configs: the cluster-wide default, then ``node_id``'s own."""

    def broker_resource_configs(self, name: str) -> dict[str, str]:
        """The values stored for one BROKER resource: a node id, or "" (the cluster-wide
        default), without the other layer."""

    def resource_configs(self, resource_type: int) -> dict[str, dict[str, str]]:
        """Every config resource of a type other than topic and broker (CLIENT_METRICS,
        16...): name -> its stored values."""

    def resource_config(self, resource_type: int, name: str) -> dict[str, str]:
        """One config resource of a type other than topic and broker (a GROUP, 32...): its
        stored values ({} if none)."""

    def finalized_features(self) -> dict[str, int]:
        """Finalized feature levels by name (FeatureLevelRecords; absent = level 0).
        ``spool.cluster.features.finalized_level`` is the way to read one."""

    def features_epoch(self) -> int:
        """The metadata offset the finalized features are as of (ApiVersions'
        finalized_features_epoch)."""


class SingleNodeView:
    """The single node's view over its ``MetadataStore`` and ``LogManager`` (module doc).

    ``endpoint(listener)`` gives this broker's advertised (host, port) on a listener
    (it knows the bound port when the configured one is 0)."""

    clustered = False

    def __init__(self, node_id: int, metadata: Any, logs: Any, endpoint) -> None:
        self.node_id = node_id
        self._metadata = metadata
        self._logs = logs
        self._endpoint = endpoint
        self._led = {}  # cache of this node's PartitionView by partition index (all epoch 0)
        self._topics: dict[str, TopicView] = {}  # topic() answers, valid while _version is
        self._version: tuple = ()

    def _me(self, listener: str | None) -> BrokerEndpoint:
        host, port = self._endpoint(listener)
        return BrokerEndpoint(self.node_id, host, port, None)

    def brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        return [self._me(listener)]

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        return []

    def broker(self, node_id: int, listener: str | None = None) -> BrokerEndpoint | None:
        return self._me(listener) if node_id == self.node_id else None

    def controller_id(self) -> int:
        return self.node_id

    def topic_names(self) -> list[str]:
        return sorted(self._metadata.topic_names())

    def _partition(self, name: str, index: int) -> PartitionView:
        if self._logs.get(name, index) is None:
            return PartitionView(index, NO_LEADER, -1, (self.node_id,), ())
        led = self._led.get(index)
        if led is None:
            led = self._led[index] = PartitionView(index, self.node_id, 0, (self.node_id,),
                                                   (self.node_id,))
        return led

    def topic(self, name: str) -> TopicView | None:
        version = (self._metadata.version(), self._logs.generation)  # before what it covers
        if version != self._version:
            self._topics, self._version = {}, version
        cached = self._topics.get(name)
        if cached is not None:
            return cached
        t = self._metadata.topic(name)
        if t is None:
            return None
        view = TopicView(name, uuid.UUID(t.topic_id),
                         tuple(self._partition(name, i) for i in range(t.partitions)), t.configs)
        self._topics[name] = view
        return view

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self._metadata.topic(name)
        return None if t is None else uuid.UUID(t.topic_id)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._metadata.topic_name(str(topic_id))

    def partition_count(self, name: str) -> int:
        t = self._metadata.topic(name)
        return t.partitions if t else 0

    def partition(self, topic: str, index: int) -> PartitionView | None:
        if self._logs.get(topic, index) is not None:  # the hot path: no metadata copy
            return self._partition(topic, index)
        if not 0 <= index < self.partition_count(topic):
            return None
        return self._partition(topic, index)

    def topic_configs(self, name: str) -> dict[str, str]:
        t = self._metadata.topic(name)
        return dict(t.configs) if t else {}

    def broker_configs(self, node_id: int) -> dict[str, str]:
        return self._metadata.broker_config(str(node_id))

    def broker_resource_configs(self, name: str) -> dict[str, str]:
        own, cluster_default = self._metadata.broker_config_layers(name)
        return own if name else cluster_default

    def resource_configs(self, resource_type: int) -> dict[str, dict[str, str]]:
        return self._metadata.resource_configs(resource_type)

    def resource_config(self, resource_type: int, name: str) -> dict[str, str]:
        return self._metadata.resource_config(resource_type, name)

    def finalized_features(self) -> dict[str, int]:
        return self._metadata.finalized_features()[0]

    def features_epoch(self) -> int:
        return self._metadata.finalized_features()[1]
