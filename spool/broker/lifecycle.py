"""``BrokerLifecycleManager``: a broker's registration, heartbeats and controlled shutdown.

Kafka's ``BrokerLifecycleManager``, over a ``ControllerChannel`` (requests to the
active controller, ``spool.broker.controller_channel``). States, in order::

    STARTING   register: BrokerRegistration (node id, cluster id, incarnation id,
               advertised broker listeners, rack, supported features) until the
               controller accepts it; the answer is the broker epoch
    RECOVERY   heartbeat every ``broker.heartbeat.interval.ms`` with the metadata
               offset this broker has applied and want_fence = True until the
               broker says it is ready (``set_ready_to_unfence``: its logs for what
               it caught up to exist); ``initial_catch_up`` resolves at the first
               answer saying is_caught_up
    RUNNING    the controller unfenced it (``initial_unfenced``); heartbeats go on
    PENDING_CONTROLLED_SHUTDOWN
               ``begin_controlled_shutdown()``: heartbeats carry want_shut_down
               until the controller answers should_shut_down (it has moved the
               leaderships away), then ``controlled_shutdown_finished`` resolves
    SHUTTING_DOWN  ``stop()``: no more requests

A heartbeat answered STALE_BROKER_EPOCH (the controller does not know this
registration: e.g. a new controller whose log lost it) sends the broker back to
STARTING: it registers again with the same incarnation id, as Kafka's broker
does when its registration is gone. Any other failure (no controller reachable,
NOT_CONTROLLER, a timeout) is retried at the next beat: the channel follows the
quorum's leader. One request at a time: the loop waits ``interval`` after each
answer (a late answer delays the next beat, never doubles it up), except as
Kafka's manager does: a failed registration is retried after a backoff from
100 ms up to the interval, a broker not caught up yet asks again after 10 ms,
and becoming ready to unfence or beginning a controlled shutdown beats at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from enum import Enum

from spool.cluster import features
from spool.protocol._generated import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
)
from spool.protocol._generated.broker_registration_request import Feature, Listener
from spool.protocol.errors import Errors, error_name
from spool.util.aio import wait_event

log = logging.getLogger("spool.broker.lifecycle")

BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
# the feature levels this broker supports (spool.cluster.features: metadata.version 3.6-IV2,
# transaction.version 0-2)
SUPPORTED_FEATURES = tuple(features.supported())
RETRY_BACKOFF_S = 0.1
CATCH_UP_POLL_S = 0.01


class BrokerState(Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


class BrokerLifecycleManager:
    """Registers this broker and keeps it alive on the controller (module doc).

    ``listeners``: (name, host, port, security protocol id) of the advertised
    broker listeners. ``metadata_offset()``: the offset of the last metadata image
    the broker applied."""

    def __init__(self, channel, *, node_id: int, cluster_id: str,
                 listeners: Sequence[tuple[str, str, int, int]], rack: str | None,
                 metadata_offset: Callable[[], int], heartbeat_interval_ms: int,
                 request_timeout_ms: int = 30_000,
                 incarnation_id: uuid.UUID | None = None) -> None:
        self.channel = channel
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.listeners = list(listeners)
        self.rack = rack
        self.metadata_offset = metadata_offset
        self.interval_s = heartbeat_interval_ms / 1000.0
        self.timeout_s = request_timeout_ms / 1000.0
        self.incarnation_id = incarnation_id or uuid.uuid4()
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self._ready_to_unfence = False
        self._want_shutdown = False
        loop = asyncio.get_running_loop()
        self.initial_catch_up = loop.create_future()
        self.initial_unfenced = loop.create_future()
        self.controlled_shutdown_finished = loop.create_future()
        self._wake = asyncio.Event()
        self._delay_s = self.interval_s
        self._backoff_s = 0.0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def set_ready_to_unfence(self) -> None:
        self._ready_to_unfence = True
        self._wake.set()

    def begin_controlled_shutdown(self) -> None:
        """Heartbeat with want_shut_down from now on (``controlled_shutdown_finished``
        resolves when the controller says this broker may stop)."""
        if self.state in (BrokerState.STARTING, BrokerState.RECOVERY):
            # never unfenced: nothing to move away; Kafka stops at once too
            _resolve(self.controlled_shutdown_finished)
        self._want_shutdown = True
        if self.state is not BrokerState.SHUTTING_DOWN:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        self._wake.set()

    async def stop(self) -> None:
        self.state = BrokerState.SHUTTING_DOWN
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        while self.state is not BrokerState.SHUTTING_DOWN:
            self._delay_s = self.interval_s
            self._wake.clear()  # before the request: a wake-up during it is kept
            if self.broker_epoch < 0:
                await self._register()
            else:
                await self._heartbeat()
            await self._pause(self._delay_s)

    async def _pause(self, delay_s: float) -> None:
        await wait_event(self._wake, delay_s)

    def _retry_soon(self) -> None:
        """A failed registration: again after a backoff from 100 ms doubling up to the
        heartbeat interval (Kafka's resend backoff), not a whole interval later."""
        self._backoff_s = min(self.interval_s, max(RETRY_BACKOFF_S, 2 * self._backoff_s))
        self._delay_s = self._backoff_s

    async def _send(self, api_key: int, version: int, request):
        try:
            return await self.channel.send(api_key, version, request, self.timeout_s)
        except (TimeoutError, ConnectionError, OSError) as e:
            log.info("broker %d: %s not answered: %s", self.node_id,
                     type(request).__name__, e)
            return None

    async def _register(self) -> None:
        req = BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[Listener(name=n, host=h, port=p, security_protocol=s)
                       for n, h, p, s in self.listeners],
            features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in SUPPORTED_FEATURES],
            rack=self.rack, is_migrating_zk_broker=False, log_dirs=[],
            previous_broker_epoch=-1)
        resp = await self._send(BROKER_REGISTRATION, REGISTRATION_VERSION, req)
        if resp is None:
            self._retry_soon()
            return
        if resp.error_code:
            log.warning("broker %d: registration refused: %s", self.node_id,
                        error_name(resp.error_code))
            self._retry_soon()
            return
        self._backoff_s = 0.0
        self.broker_epoch = resp.broker_epoch
        if self.state is BrokerState.STARTING:
            self.state = BrokerState.RECOVERY
        log.info("broker %d registered with broker epoch %d (incarnation %s)",
                 self.node_id, self.broker_epoch, self.incarnation_id)
        self._wake.set()  # the first heartbeat goes at once

    async def _heartbeat(self) -> None:
        req = BrokerHeartbeatRequest(
            broker_id=self.node_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=not self._ready_to_unfence and not self._want_shutdown,
            want_shut_down=self._want_shutdown)
        resp = await self._send(BROKER_HEARTBEAT, HEARTBEAT_VERSION, req)
        if resp is None:
            return
        if resp.error_code == Errors.STALE_BROKER_EPOCH:
            log.warning("broker %d: the controller does not know broker epoch %d: "
                        "registering again", self.node_id, self.broker_epoch)
            self.broker_epoch = -1
            return
        if resp.error_code:
            log.info("broker %d: heartbeat answered %s", self.node_id,
                     error_name(resp.error_code))
            return
        if resp.is_caught_up:
            _resolve(self.initial_catch_up)
        elif not self._want_shutdown:  # catching up: ask again soon, as Kafka (10 ms)
            self._delay_s = CATCH_UP_POLL_S
        if not resp.is_fenced and self.state is BrokerState.RECOVERY:
            self.state = BrokerState.RUNNING
            log.info("broker %d is unfenced", self.node_id)
            _resolve(self.initial_unfenced)
        if self._want_shutdown and resp.should_shut_down:
            log.info("broker %d: the controller lets it shut down", self.node_id)
            _resolve(self.controlled_shutdown_finished)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
