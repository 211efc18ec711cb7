"""``BrokerRole``: the broker part of a cluster node, started and stopped in Kafka's order.

What a node with ``broker`` in ``process.roles`` runs beside its server (Kafka's
``BrokerServer``). Whoever follows the metadata log (the quorum's driver: an
observer on a broker-only node, the voter itself on a combined node) hands the
committed entries to ``loader`` (a ``MetadataLoader``); this role adds its
publisher to it and talks to the active controller through ``channel``.

Start-up (``await start()``), as Kafka's broker:

1. the ``BrokerMetadataPublisher`` joins the loader: from now on every image is
   ``broker.view`` and drives the local logs;
2. the ``BrokerLifecycleManager`` registers (advertised broker listeners with the
   ports actually bound, rack) and heartbeats with the applied metadata offset;
3. once the controller says the broker caught up to its own registration, and the
   local logs of that image exist, the broker asks to be unfenced;
4. ``start()`` returns when the controller has unfenced it: leaders may be placed
   here and clients are sent here.

Shutdown (``await shutdown(timeout_s)``, on SIGTERM): a controlled shutdown first
(heartbeats with want_shut_down until the controller has moved this broker's
leaderships away and says it may stop), bounded by ``timeout_s``: past it the
broker stops anyway, logged, as Kafka does once its retries are spent; then the
heartbeats stop and the local-log work in flight ends.

Not wired into ``Broker.start`` yet: the metadata follower (the quorum's driver)
that feeds ``loader`` and the request client behind ``channel`` come with the
quorum runtime.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spool.broker.lifecycle import BrokerLifecycleManager
from spool.broker.metadata_publisher import BrokerMetadataPublisher

log = logging.getLogger("spool.broker.role")

PLAINTEXT = 0  # SecurityProtocol id


class BrokerRole:
    def __init__(self, broker: Any, loader: Any, channel: Any, *, cluster_id: str,
                 listeners: list[tuple[str, str, int]], rack: str | None,
                 heartbeat_interval_ms: int, request_timeout_ms: int = 30_000) -> None:
        """``listeners``: (name, host, port) of the advertised broker listeners, the
        first being the one a request of unknown listener is answered for."""
        self.broker = broker
        self.loader = loader
        self.channel = channel
        self.publisher = BrokerMetadataPublisher(broker, listeners[0][0])
        self.lifecycle = BrokerLifecycleManager(
            channel, node_id=broker.node_id, cluster_id=cluster_id,
            listeners=[(n, h, p, PLAINTEXT) for n, h, p in listeners], rack=rack,
            metadata_offset=lambda: self.publisher.applied_offset,
            heartbeat_interval_ms=heartbeat_interval_ms, request_timeout_ms=request_timeout_ms)

    async def start(self) -> None:
        self.loader.add_publisher(self.publisher)
        self.lifecycle.start()
        await self.lifecycle.initial_catch_up
        await self.publisher.wait_applied(self.loader.offset)
        log.info("broker %d caught up with the metadata log at offset %d",
                 self.broker.node_id, self.loader.offset)
        self.lifecycle.set_ready_to_unfence()
        await self.lifecycle.initial_unfenced

    async def shutdown(self, timeout_s: float) -> bool:
        """Controlled shutdown, then stop; whether the controller let it go in time."""
        self.lifecycle.begin_controlled_shutdown()
        done = True
        try:
            await asyncio.wait_for(asyncio.shield(self.lifecycle.controlled_shutdown_finished),
                                   timeout_s)
        except TimeoutError:
            done = False
            log.warning("broker %d: the controlled shutdown did not finish in %.1f s; "
                        "stopping anyway", self.broker.node_id, timeout_s)
        await self.lifecycle.stop()
        self.loader.remove_publisher(self.publisher)
        await self.publisher.stop()
        return done
