"""``BrokerMetadataPublisher``: a cluster broker acting on each new metadata image.

The broker's ``MetadataPublisher`` (``spool.cluster.loader``; Kafka's
``BrokerMetadataPublisher``). For every image the loader publishes:

1. **The view first.** ``broker.view`` becomes a ``ClusterView`` of the new image
   and the quorum leader, at once, on the event loop: every handler from then on
   answers from it (brokers, leaders, ISR, configs); ``broker.security_image``
   becomes the image's ACLs, SCRAM credentials and quotas at the same moment.
2. **Then the local logs**, from ``local_changes(old, new, node id)`` (Kafka's
   ``TopicsDelta.localChanges``), in the executor (file work never runs on the
   loop), one image at a time and in image order:

   - a partition this broker is a replica of, new or changed (leader or
     follower), gets a local log if it has none: the folder already on disk if
     there is one of the same topic id (a restart: ``LogManager.open_existing``,
     its data kept; one of an older topic of that name is moved aside), else
     a new one, with the topic id in its ``partition.metadata`` (``LogManager.create_partitions`` with the topic's overrides, as
     the single node creates them); folders the image gives this broker no
     replica for are never opened nor removed;
   - a replica it no longer holds (RemoveTopicRecord, or moved away) is deleted:
     ``LogManager.delete_partition`` renames it ``-delete``, removed after
     ``file.delete.delay.ms`` by the background thread, as DeleteTopics does today;
   - topic config overrides and dynamic broker configs (ConfigRecords) are handed
     to the log manager, so retention, segment size and the cleaner follow them.

   Until a partition's log exists, ``broker.replicas`` answers
   NOT_LEADER_OR_FOLLOWER (retriable): clients refresh and retry.
3. **Then the replicas** (``ReplicaManager.apply_changes``, on the loop, once the
   logs exist): leaders and followers, the follower fetcher, the leadership
   listeners (the coordinators).
4. **A deleted topic's committed offsets** go from the groups this broker
   coordinates (``GroupRuntime.delete_topic_offsets``, Kafka's
   ``onPartitionsDeleted``): a topic created again under the name starts afresh.

A failure to create or delete a log (a full disk) is logged and left for the next
start to repair: the image, not the disk, is the truth, and ``reconcile`` runs
``apply_image`` on the whole image at start-up.

``applied_offset`` is the offset of the last image whose local changes are done;
``wait_applied(offset)`` waits for it (the lifecycle manager asks to be unfenced
only once the logs of what it caught up to exist).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from spool.broker.cluster_view import ClusterView
from spool.broker.dynamic_config import apply_changes
from spool.cluster.image import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigResource, MetadataImage
from spool.cluster.loader import LeaderAndEpoch
from spool.cluster.local_changes import LocalReplicaChanges, local_changes

log = logging.getLogger("spool.broker.metadata")


def apply_local_changes(logs: Any, image: MetadataImage, changes: LocalReplicaChanges,
                        node_id: int) -> tuple[int, int, int]:
    """Open, create and delete this broker's logs as ``changes`` say (blocking: the
    executor). Returns (opened, created, deleted)."""
    deleted = 0
    for tp in sorted(changes.deletes):
        deleted += bool(logs.delete_partition(tp.topic, tp.partition))
    by_topic: dict[tuple[str, Any], list[int]] = {}
    for tp in (*changes.leaders, *changes.followers):
        if logs.get(tp.topic, tp.partition) is None:
            by_topic.setdefault((tp.topic, tp.topic_id), []).append(tp.partition)
    opened = created = 0
    for (topic, topic_id), parts in sorted(by_topic.items(), key=lambda kv: kv[0][0]):
        overrides = dict(image.config(TOPIC_RESOURCE, topic))
        logs.set_topic_overrides(topic, overrides)
        found = logs.open_existing(topic, sorted(parts), topic_id)
        new = sorted(set(parts) - set(found))
        if new:
            logs.create_partitions(topic, new, overrides, topic_id)
        opened += len(found)
        created += len(new)
    return opened, created, deleted


def expected_partitions(image: MetadataImage, node_id: int) -> set[tuple[str, int]]:
    """Every (topic, partition) this broker holds a replica of in ``image``."""
    return {(t.name, p) for t in image.topics_by_id.values()
            for p, reg in t.partitions.items() if node_id in reg.replicas}


def _changed_configs(old: MetadataImage, new: MetadataImage) -> set[ConfigResource]:
    if old.configs is new.configs:
        return set()
    keys = set(old.configs) | set(new.configs)
    return {k for k in keys if old.configs.get(k) != new.configs.get(k)}


class BrokerMetadataPublisher:
    """Publishes each image to the broker's handlers and local logs (module doc)."""

    def __init__(self, broker: Any, default_listener: str) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.default_listener = default_listener
        self.leader = LeaderAndEpoch(-1, 0)
        self.image = MetadataImage()
        self.applied_offset = -1
        self._tail: asyncio.Future | None = None  # the last queued local-change step
        self._applied = asyncio.Condition()
        self._dynamic: dict[str, str] = {}  # the dynamic broker config last applied
        self._cleanups: set[asyncio.Task] = set()  # deleted topics' offsets being removed

    def on_metadata_update(self, old: MetadataImage, new: MetadataImage,
                           leader: LeaderAndEpoch) -> None:
        self.leader = leader
        self.image = new
        self.broker.security_image = new.security  # ACLs, SCRAM, quotas: at once, too
        channel = self.broker.controller_channel
        self.broker.view = ClusterView(
            new, self.default_listener,
            leader.leader_id if channel is None else channel.controller_id,
            self_id=self.node_id, reachable=self.broker.controller_reachable)
        if new is old:
            return
        changes = local_changes(old, new, self.node_id)
        configs = _changed_configs(old, new)
        prev = self._tail
        self._tail = asyncio.ensure_future(self._apply(prev, new, changes, configs))
        if old.topics_by_id is not new.topics_by_id and self.broker.groups is not None:
            self._drop_offsets(old, new)

    def _drop_offsets(self, old: MetadataImage, new: MetadataImage) -> None:
        """Step 4 (module doc), in the background."""
        deleted = {t.name for tid, t in old.topics_by_id.items() if tid not in new.topics_by_id}
        if deleted:
            task = asyncio.ensure_future(self.broker.groups.delete_topic_offsets(deleted))
            self._cleanups.add(task)
            task.add_done_callback(self._cleanups.discard)

    async def _apply(self, prev: asyncio.Future | None, image: MetadataImage,
                     changes: LocalReplicaChanges, configs: set[ConfigResource]) -> None:
        if prev is not None:
            await asyncio.wait({prev})
        logs = self.broker.storage.logs
        try:
            if configs:
                self._apply_configs(logs, image, configs)
            if changes:
                opened, created, deleted = await self.broker.run_blocking(
                    apply_local_changes, logs, image, changes, self.node_id)
                if opened or created or deleted:
                    log.info("metadata at offset %d: local logs: %d opened, %d created, "
                             "%d deleted", image.offset, opened, created, deleted)
        except Exception:
            log.exception("applying the metadata image at offset %d to the local logs failed",
                          image.offset)
        try:
            replicas = getattr(self.broker, "replicas", None)
            if changes and replicas is not None:
                replicas.apply_changes(image, changes)
        except Exception:
            log.exception("applying the metadata image at offset %d to the replicas failed",
                          image.offset)
        async with self._applied:
            self.applied_offset = max(self.applied_offset, image.offset)
            self._applied.notify_all()

    def _apply_configs(self, logs: Any, image: MetadataImage,
                       changed: set[ConfigResource]) -> None:
        for res in changed:
            if res.type == TOPIC_RESOURCE and image.topic(res.name) is not None:
                logs.set_topic_overrides(res.name, dict(image.config(TOPIC_RESOURCE, res.name)))
            elif res.type == BROKER_RESOURCE and res.name in ("", str(self.node_id)):
                dynamic = dynamic_broker_config(image, self.node_id)
                logs.set_dynamic_broker_config(dynamic)
                apply_changes(self.broker, self._dynamic, dynamic)
                self._dynamic = dict(dynamic)

    async def wait_applied(self, offset: int) -> None:
        """Until the local changes of the image at ``offset`` (or later) are done."""
        async with self._applied:
            await self._applied.wait_for(lambda: self.applied_offset >= offset)

    async def stop(self) -> None:
        """Wait for the local changes in flight (before the log manager closes); offsets
        cleanups still waiting for their append are dropped."""
        for task in list(self._cleanups):
            task.cancel()
        if self._tail is not None:
            await asyncio.wait({self._tail})


def dynamic_broker_config(image: MetadataImage, node_id: int) -> Mapping[str, str]:
    """The dynamic broker configs for ``node_id``: cluster default, then its own."""
    merged = dict(image.config(BROKER_RESOURCE, ""))
    merged.update(image.config(BROKER_RESOURCE, str(node_id)))
    return merged
