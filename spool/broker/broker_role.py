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

In the broker process (``BrokerRole.of(broker)``, before the quorum starts):
the loader is a listener of the node's ``RaftDriver`` (``broker.quorum``), the
channel reaches the driver's current leader through ``spool.net.client``
(``NodeClient``), producer ids come from the controller
(``ControllerProducerIdManager``), and ``broker.view`` is an empty
``ClusterView`` until the first image. ``join()`` runs in the background once the
listeners accept (a combined node's controller listener must serve its own
quorum): between catching up and asking to be unfenced it starts the
coordinators' timers; their partitions load as this broker becomes their leader.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spool.broker.cluster_view import ClusterView
from spool.broker.controller_channel import ControllerChannel
from spool.broker.lifecycle import BrokerLifecycleManager
from spool.broker.metadata_publisher import BrokerMetadataPublisher
from spool.broker.producer_ids import ControllerProducerIdManager
from spool.cluster.image import MetadataImage
from spool.cluster.loader import MetadataLoader
from spool.net.client import NodeClient

log = logging.getLogger("spool.broker.role")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
FORWARD_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms default, for forwarded admin requests


def _protocol(broker: Any, listener: str) -> str:
    """The security protocol of ``listener`` (registered with the broker's endpoint)."""
    pmap = getattr(getattr(broker, "config", None), "protocol_map", None) or {}
    return pmap.get(listener, "PLAINTEXT")


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
            listeners=[(n, h, p, SECURITY_PROTOCOL_IDS[_protocol(broker, n)])
                       for n, h, p in listeners], rack=rack,
            metadata_offset=lambda: self.publisher.applied_offset,
            heartbeat_interval_ms=heartbeat_interval_ms, request_timeout_ms=request_timeout_ms)
        self._joining: asyncio.Task | None = None

    @classmethod
    def of(cls, broker: Any) -> BrokerRole:
        """The broker role of ``broker`` (a node with ``broker`` in ``process.roles``),
        its loader added to ``broker.quorum`` (module doc)."""
        cc = broker.cluster
        loader = MetadataLoader(broker.cluster_id)
        broker.quorum.add_listener(loader)

        def leader() -> int:
            driver = broker.quorum.driver
            return -1 if driver is None else driver.leader_id

        channel = ControllerChannel(cc.voters, leader, lambda host, port: NodeClient(
            host, port, client_id=f"spool-broker-{broker.node_id}",
            request_timeout_ms=cc.request_timeout_ms, security=broker.controller_security))
        listeners = [(lst.name, *broker.advertised_address_of(lst))
                     for lst in cc.advertised_broker_listeners]
        role = cls(broker, loader, channel, cluster_id=broker.cluster_id, listeners=listeners,
                   rack=cc.rack, heartbeat_interval_ms=cc.broker_heartbeat_interval_ms,
                   request_timeout_ms=cc.request_timeout_ms)
        broker.view = ClusterView(MetadataImage(cluster_id=broker.cluster_id), listeners[0][0])
        for runtime in (broker.groups, broker.transactions, broker.share_state):
            runtime.topic.hold()  # coordinator partitions load once caught up
        broker.ready_for_clients = asyncio.Event()  # set once unfenced (dispatch: rule 5)
        broker.controller_channel = channel
        broker.request_timeout_s = FORWARD_TIMEOUT_S
        broker.producer_ids = ControllerProducerIdManager(
            channel, broker.node_id, lambda: role.lifecycle.broker_epoch, FORWARD_TIMEOUT_S)
        return role

    def join_in_background(self) -> None:
        """``start`` with the coordinators, as a task (its failure is logged)."""
        self._joining = asyncio.ensure_future(self.start(self._start_coordinators))
        self._joining.add_done_callback(_log_failure)

    async def _start_coordinators(self) -> None:
        """The coordinators: the leaderships held while catching up load now, later ones
        at once (``Broker.leadership_changed``); then their timers."""
        b = self.broker
        b.groups.topic.release()
        b.transactions.topic.release()
        b.share_state.topic.release()
        b.groups.start()
        b.transactions.start()
        b.share_state.start()
        b.producer_ids.prefetch()  # registered: the first InitProducerId need not wait

    async def start(self, on_caught_up=None) -> None:
        self.loader.add_publisher(self.publisher)
        self.lifecycle.start()
        await self.lifecycle.initial_catch_up
        await self.publisher.wait_applied(self.loader.offset)
        log.info("broker %d caught up with the metadata log at offset %d",
                 self.broker.node_id, self.loader.offset)
        if on_caught_up is not None:
            await on_caught_up()
        self.lifecycle.set_ready_to_unfence()
        await self.lifecycle.initial_unfenced
        if self.broker.ready_for_clients is not None:
            self.broker.ready_for_clients.set()

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
        if self._joining is not None and not self._joining.done():
            self._joining.cancel()
        self.loader.remove_publisher(self.publisher)
        await self.publisher.stop()
        await self.channel.close()
        return done


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the broker did not join the cluster", exc_info=task.exception())
