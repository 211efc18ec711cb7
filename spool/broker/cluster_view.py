"""``ClusterView``: the ``MetadataView`` of a broker in a cluster, over one ``MetadataImage``.

Built by the broker's metadata publisher (``spool.broker.metadata_publisher``)
from each published image and the quorum leader it knows; handlers read it
through ``broker.view`` (``spool.broker.metadata_view`` says what they read).
The image is immutable, so a view is a consistent snapshot; a new image means a
new view.

Kafka's answers (``KRaftMetadataCache``), kept here:

- live brokers are the registered, unfenced ones (a broker in controlled
  shutdown is still listed); a broker without an endpoint on the requested
  listener is left out;
- a replica is offline when its broker is not registered, is fenced, or has
  no endpoint on the broker's default listener (Kafka checks the requested
  listener; with the same listener names on every broker, as ``advertised.listeners``
  are usually written, the two agree);
- the controller id told to clients is the active controller when it is a live
  broker too (a combined node) and this broker's last request to it did not
  fail; else this broker itself, when live (it forwards what a controller
  would be asked); else a random live broker; -1 when no broker is live.
  Kafka 4 always answers a random live broker (a client cannot reach a
  controller-only node). We name the real controller where a client can use
  it, but never one known to be gone: librdkafka's admin client sends
  CreateTopics to the Metadata's controller and, while that broker is down,
  waits for it until the request times out, without asking for metadata
  again (a fresh AdminClient right after a kill -9 of the controller waited
  its full 30 s).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping

from spool.broker.metadata_view import BrokerEndpoint, PartitionView, TopicView
from spool.cluster.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    PartitionRegistration,
)


class ClusterView:
    """A ``MetadataView`` over ``image`` (module doc). ``default_listener`` answers
    ``listener=None``; ``controller_id`` is the quorum leader as last known (-1: none)."""

    clustered = True

    def __init__(self, image: MetadataImage, default_listener: str,
                 active_controller: int | Callable[[], int] = -1, *, self_id: int = -1,
                 reachable: Callable[[int], bool] | None = None) -> None:
        self.image = image
        self.default_listener = default_listener
        # the quorum leader: as known now (a callable: a broker's view lives until the next
        # image, and a leader change alone publishes none) or as given
        self._active = active_controller if callable(active_controller) else (
            lambda: active_controller)
        self.self_id = self_id
        self.reachable = reachable or (lambda _node: True)

    @property
    def active_controller(self) -> int:
        return self._active()

    def _live(self) -> list:
        return [b for _, b in sorted(self.image.brokers.items()) if not b.fenced]

    def brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        name = listener or self.default_listener
        out = []
        for b in self._live():
            e = b.listener(name)
            if e is not None:
                out.append(BrokerEndpoint(b.broker_id, e.host, e.port, b.rack))
        return out

    def fenced_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        name = listener or self.default_listener
        out = []
        for _, b in sorted(self.image.brokers.items()):
            e = b.listener(name) if b.fenced else None
            if e is not None:
                out.append(BrokerEndpoint(b.broker_id, e.host, e.port, b.rack))
        return out

    def broker(self, node_id: int, listener: str | None = None) -> BrokerEndpoint | None:
        b = self.image.brokers.get(node_id)
        if b is None or b.fenced:
            return None
        e = b.listener(listener or self.default_listener)
        return None if e is None else BrokerEndpoint(b.broker_id, e.host, e.port, b.rack)

    def controller_id(self) -> int:
        live = [b.broker_id for b in self._live()]
        active = self.active_controller
        if active in live and self.reachable(active):
            return active
        if self.self_id in live:
            return self.self_id
        return random.choice(live) if live else -1

    def topic_names(self) -> list[str]:
        return sorted(self.image.topics_by_name)

    def _offline(self, reg: PartitionRegistration, listener: str) -> tuple[int, ...]:
        brokers = self.image.brokers
        return tuple(r for r in reg.replicas
                     if (b := brokers.get(r)) is None or b.fenced or b.listener(listener) is None)

    def _partition(self, index: int, reg: PartitionRegistration) -> PartitionView:
        return PartitionView(index, reg.leader, reg.leader_epoch, reg.replicas, reg.isr,
                             self._offline(reg, self.default_listener))

    def topic(self, name: str) -> TopicView | None:
        t = self.image.topics_by_name.get(name)
        if t is None:
            return None
        return TopicView(name, t.topic_id,
                         [self._partition(i, r) for i, r in sorted(t.partitions.items())],
                         self.topic_configs(name))

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self.image.topics_by_name.get(name)
        return None if t is None else t.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def partition_count(self, name: str) -> int:
        t = self.image.topics_by_name.get(name)
        return 0 if t is None else len(t.partitions)

    def partition(self, topic: str, index: int) -> PartitionView | None:
        t = self.image.topics_by_name.get(topic)
        reg = None if t is None else t.partitions.get(index)
        return None if reg is None else self._partition(index, reg)

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.image.config(TOPIC_RESOURCE, name))

    def broker_configs(self, node_id: int) -> dict[str, str]:
        merged: dict[str, str] = dict(self.image.config(BROKER_RESOURCE, ""))
        merged.update(self.image.config(BROKER_RESOURCE, str(node_id)))
        return merged

    def broker_resource_configs(self, name: str) -> dict[str, str]:
        return dict(self.image.config(BROKER_RESOURCE, name))

    def resource_configs(self, resource_type: int) -> dict[str, dict[str, str]]:
        return {r.name: dict(v) for r, v in self.image.configs.items()
                if r.type == resource_type}

    def resource_config(self, resource_type: int, name: str) -> dict[str, str]:
        return dict(self.image.config(resource_type, name))

    def finalized_features(self) -> dict[str, int]:
        return dict(self.image.features)

    def features_epoch(self) -> int:
        return self.image.offset

    def configs_of(self, name: str) -> Mapping[str, str]:
        """The topic's overrides without a copy (for the storage side)."""
        return self.image.config(TOPIC_RESOURCE, name)
