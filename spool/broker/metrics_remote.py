"""High watermarks of partitions this broker holds no replica of, for consumer lag.

A group coordinator's groups commit offsets of any partition; where the coordinator
holds no replica (a cluster with more brokers than the topic's replication factor),
``spool.broker.metrics_lag`` asks ``RemoteHighWatermarks``:

- ``get(topic, partition)``: the high watermark the partition's leader last answered,
  or None (never asked, or it did not answer).
- ``refresh(wanted)``: called by each scrape with the partitions it missed locally; in
  the background, on the event loop, one ListOffsets (LATEST, read_uncommitted: the
  high watermark, as kafka-exporter asks) goes to each partition's leader over the
  inter-broker listener. The next scrape shows the answers: such a lag is one scrape
  interval old, and absent from the first scrape. One round at a time; partitions no
  longer wanted are forgotten; an error or an unreachable leader leaves the partition
  out (its last answer is dropped) until a later round answers.
- ``close()`` (the broker's shutdown): stops a round in flight, closes the connections.

Outside a running event loop (a scrape from another thread, as unit tests do) nothing
is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from spool.broker.peer_clients import PeerClients
from spool.net.client import ClientError
from spool.protocol._generated import ListOffsetsRequest
from spool.protocol._generated import list_offsets_request as lreq

log = logging.getLogger("spool.metrics")

LATEST = -1
LIST_OFFSETS_VERSION = 7
TopicPartition = tuple[str, int]


class RemoteHighWatermarks:
    """The high watermarks of partitions held elsewhere (module doc)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.known: dict[TopicPartition, int] = {}
        self._round: asyncio.Task | None = None
        self._clients = PeerClients(broker, "metrics")
        self._closed = False

    def get(self, topic: str, partition: int) -> int | None:
        return self.known.get((topic, partition))

    def refresh(self, wanted: set[TopicPartition]) -> None:
        for tp in [tp for tp in self.known if tp not in wanted]:
            del self.known[tp]
        if not wanted or self._closed or (self._round is not None and not self._round.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._round = loop.create_task(self._ask_all(set(wanted)))

    async def _ask_all(self, wanted: set[TopicPartition]) -> None:
        broker = self.broker
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, p in sorted(wanted):
            part = broker.view.partition(topic, p)
            if part is None or part.leader < 0 or part.leader == broker.node_id:
                self.known.pop((topic, p), None)
                continue
            by_leader.setdefault(part.leader, []).append((topic, p))
        await asyncio.gather(*(self._ask(leader, tps) for leader, tps in by_leader.items()))

    async def _ask(self, leader: int, tps: list[TopicPartition]) -> None:
        for tp in tps:  # until answered again
            self.known.pop(tp, None)
        broker = self.broker
        ep = broker.view.broker(leader, broker.cluster.inter_broker_listener_name)
        if ep is None:
            return
        client = self._clients.for_endpoint(ep)
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            lreq.ListOffsetsTopic(name=t, partitions=[
                lreq.ListOffsetsPartition(partition_index=p, timestamp=LATEST) for p in ps])
            for t, ps in topics.items()])
        try:
            resp = await client.request(req, LIST_OFFSETS_VERSION)
        except (ClientError, ConnectionError, TimeoutError, OSError) as e:
            log.debug("high watermarks from broker %d for the lag metrics: %s", leader, e)
            return
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.offset >= 0:
                    self.known[(t.name, p.partition_index)] = p.offset

    async def close(self) -> None:
        self._closed = True
        if self._round is not None:
            self._round.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._round
        await self._clients.close()
