"""``MetadataLoader``: committed metadata-log entries in, published ``MetadataImage``s out.

The one seam between whatever follows ``__cluster_metadata`` and whatever acts on
it (Kafka's ``MetadataLoader``, a ``RaftClient.Listener``). The follower is the
quorum's driver: a voter's on a controller or combined node, an observer's on a
broker-only node; either way it calls the loader, on its event loop, in log order:

    handle_commit(entries)            committed ``LogEntry``s (``spool.cluster.raft.store``)
                                      past the last ones handed over: ``value`` a framed
                                      metadata record (``spool.protocol.metadata_records``),
                                      None for the quorum's own control entries
    handle_snapshot(snapshot_id, values)
                                      the image is replaced by a snapshot's: the
                                      record values (framed, as above) of offsets
                                      [0, snapshot_id.end_offset)
    handle_leader_change(leader_id, epoch)
                                      the quorum has a new leader (-1: none known)

After each call that changed the image or the leader, every publisher's
``on_metadata_update(old, new, leader)`` runs, in the order they were added, with
the image before and after and the leader as last known. A publisher added later
gets the current image at once (``old`` empty). Publishers must not raise: one that
does is logged and the others still run (the image moves on regardless, as in
Kafka, where a faulty publisher is reported, not retried).

``offset`` is the offset of the last record applied (-1: none); the broker reports
it in its heartbeats as its metadata offset. A record the image cannot apply (a
corrupt log) raises ``MetadataReplayError`` from ``handle_commit`` and leaves the
image as it was before that call: the caller stops following, as Kafka's loader
faults.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from spool.cluster.image import MetadataDelta, MetadataImage
from spool.protocol.metadata_records import decode_record

log = logging.getLogger("spool.cluster.loader")


class LeaderAndEpoch(NamedTuple):
    leader_id: int
    epoch: int


class MetadataPublisher(Protocol):
    def on_metadata_update(self, old: MetadataImage, new: MetadataImage,
                           leader: LeaderAndEpoch) -> None:
        """A new image (``new is old`` when only the leader changed)."""


class MetadataLoader:
    """Builds images from committed entries and hands them to publishers (module doc)."""

    def __init__(self, cluster_id: str | None = None) -> None:
        self.image = MetadataImage(cluster_id=cluster_id)
        self.leader = LeaderAndEpoch(-1, 0)
        self._publishers: list[MetadataPublisher] = []

    @property
    def offset(self) -> int:
        return self.image.offset

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        self._publishers.append(publisher)
        self._publish_to(publisher, MetadataImage(cluster_id=self.image.cluster_id), self.image)

    def remove_publisher(self, publisher: MetadataPublisher) -> None:
        self._publishers.remove(publisher)

    def handle_commit(self, entries: Iterable[Any]) -> None:
        delta = MetadataDelta(self.image)
        any_entry = False
        for entry in entries:
            offset, value = entry.offset, entry.value
            if offset <= delta.offset:
                continue  # handed over twice (a driver's retry): applied already
            any_entry = True
            if value is None:  # a control entry: it moves the offset only
                delta.offset = offset
                continue
            record, _ = decode_record(value)
            delta.replay(record, offset)
        if any_entry:
            self._update(delta.apply())

    def handle_snapshot(self, snapshot_id: Any, values: Iterable[bytes]) -> None:
        delta = MetadataDelta(MetadataImage(cluster_id=self.image.cluster_id))
        for value in values:
            delta.replay(decode_record(value)[0])
        delta.offset = snapshot_id.end_offset - 1
        self._update(delta.apply())

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        leader = LeaderAndEpoch(leader_id, epoch)
        if leader == self.leader:
            return
        self.leader = leader
        for p in list(self._publishers):
            self._publish_to(p, self.image, self.image)

    def _update(self, new: MetadataImage) -> None:
        old, self.image = self.image, new
        for p in list(self._publishers):
            self._publish_to(p, old, new)

    def _publish_to(self, p: MetadataPublisher, old: MetadataImage, new: MetadataImage) -> None:
        try:
            p.on_metadata_update(old, new, self.leader)
        except Exception:
            log.exception("metadata publisher %r failed at offset %d", p, new.offset)
