"""Transaction markers for partitions another broker leads (a cluster), as WriteTxnMarkers.

Kafka's ``TransactionMarkerChannelManager``, reduced to what the transaction
runtime (``spool.broker.txn_runtime``) needs: it appends the markers of the
partitions this broker leads itself and hands the others here.

- ``remote(topic, partition)``: whether the broker's view has another broker (or
  none) leading the partition: its marker goes over the network. Always False on
  a single node.
- ``await send(m, commit, coordinator_epoch, todo)``: one WriteTxnMarkers (v2) per
  leader for the remote partitions of ``todo``, to the leader's endpoint on
  ``inter.broker.listener.name``; returns the partitions of ``todo`` still without
  a marker: local ones (not its business), remote ones whose leader is unknown,
  unreachable or answered a retriable error. UNKNOWN_TOPIC_OR_PARTITION and
  INVALID_PRODUCER_EPOCH count as done, as for local markers (``MARKER_MOOT``).
  The caller retries with backoff, as it does for local appends.

One connection per leader endpoint (``spool.net.client.NodeClient``), closed by
``close()``. On the event loop only.
"""

from __future__ import annotations

import logging
from typing import Any

from spool.broker.peer_clients import PeerClients
from spool.protocol._generated import WriteTxnMarkersRequest
from spool.protocol._generated.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from spool.protocol.errors import Errors, error_name

log = logging.getLogger("spool.transactions")

WRITE_TXN_MARKERS_VERSION = 2  # v2: the marker's transaction version (KIP-890 strict epoch)
MOOT = frozenset({Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_PRODUCER_EPOCH})
TIMEOUT_MS = 30_000

TP = tuple[str, int]


class TxnMarkerChannel:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._clients = PeerClients(broker, "txn", TIMEOUT_MS)

    def remote(self, topic: str, partition: int) -> bool:
        view = self.broker.view
        if view is None or not view.clustered:
            return False
        part = view.partition(topic, partition)
        return part is not None and part.leader != self.broker.node_id

    async def send(self, m: Any, commit: bool, coordinator_epoch: int,
                   todo: set[TP]) -> set[TP]:
        left = {tp for tp in todo if not self.remote(*tp)}
        if left == todo:
            return left
        by_leader: dict[int, list[TP]] = {}
        view = self.broker.view
        for tp in sorted(todo - left):
            part = view.partition(*tp)
            by_leader.setdefault(part.leader, []).append(tp)
        listener = self.broker.cluster.inter_broker_listener_name
        for leader, tps in by_leader.items():
            ep = view.broker(leader, listener) if leader >= 0 else None
            if ep is None:
                left.update(tps)
                continue
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            req = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
                producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                transaction_result=commit, coordinator_epoch=coordinator_epoch,
                transaction_version=2 if m.client_tv >= 2 else 0,
                topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in topics.items()])])
            client = self._clients.for_endpoint(ep)
            try:
                resp = await client.request(req, WRITE_TXN_MARKERS_VERSION)
            except (ConnectionError, TimeoutError) as e:
                log.warning("markers of %s to broker %d not sent (will retry): %s",
                            m.transactional_id, leader, e)
                left.update(tps)
                continue
            for result in resp.markers:
                for t in result.topics:
                    for p in t.partitions:
                        if p.error_code in MOOT:
                            log.error("marker for %s to %s-%d skipped: %s", m.transactional_id,
                                      t.name, p.partition_index, error_name(p.error_code))
                        elif p.error_code:
                            log.warning("marker for %s to %s-%d on broker %d failed (will "
                                        "retry): %s", m.transactional_id, t.name,
                                        p.partition_index, leader, error_name(p.error_code))
                            left.add((t.name, p.partition_index))
        return left

    async def close(self) -> None:
        await self._clients.close()
