"""Client quota enforcement: what KafkaApis does around a handler when quotas are set.

``Broker.client_quotas`` is a ``ClientQuotas`` while ``broker.security_image.quotas`` holds
any quota, None otherwise: the dispatcher's whole cost for a broker without quotas is that
one attribute test. With quotas, ``ClientQuotas.run`` replaces the bare handler call for a
request on a broker listener (controller listeners are not client traffic):

- Fetch from a consumer (not a follower, whose fetches are replication): ``max_bytes`` is
  capped to what the consumer may take in one quota window (``consumer_byte_rate *
  (quota.window.num - 1) * quota.window.size.seconds``) before the handler runs; after, the
  response's encoded size is recorded against ``consumer_byte_rate``. When throttled, the
  response carries no data (the records not sent are taken back from the rate), as Kafka's
  ``getThrottledResponse``.
- Produce: the request's size (its frame) against ``producer_byte_rate``.
- Every request but the inter-broker ones: the time the handler itself ran (its coroutine's
  steps, not the time it waited: a long-polling fetch parked for 500 ms costs what it
  computed) as a percentage of one thread against ``request_percentage``; not for Produce
  with acks=0, as Kafka.
- CreateTopics, CreatePartitions and DeleteTopics: ``controller_mutation_rate`` in partitions
  (``spool.broker.mutation_quota``).

The throttle time is the largest of those; when above 0 it goes into the response's
``throttle_time_ms`` (at versions that have it) and the connection is muted for that long
(``Connection.throttle``): the client is told to wait (KIP-219) and is made to.

Not done: Kafka also counts the network threads' time of each request to
``request_percentage``; here only the handler's time is counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Generator
from typing import Any

from spool.broker.config import BrokerConfig
from spool.broker.server import FileRegion
from spool.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    Quotas,
)

PRODUCE_KEY = 0
FETCH_KEY = 1
REPLICA_STATE_VERSION = 15  # Fetch v15+ carries the follower's id in replica_state
# inter-broker APIs on broker listeners (Kafka's sendResponseExemptThrottle)
EXEMPT_KEYS = frozenset({
    4, 5, 6, 7,  # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown
    27,  # WriteTxnMarkers
    56, 58, 62, 63, 67,  # AlterPartition, Envelope, BrokerRegistration/Heartbeat, ...
})
NANOS_TO_PERCENTAGE = 100.0 / 1e9  # one thread busy for a second is 100 (%)


class _Timed:
    """Runs a coroutine and adds up the time its own steps took (``ns``)."""

    __slots__ = ("coro", "ns")

    def __init__(self, coro: Awaitable) -> None:
        self.coro = coro
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro.__await__()
        send, throw = coro.send, coro.throw
        value: Any = None
        error: BaseException | None = None
        clock = time.perf_counter_ns
        while True:
            t0 = clock()
            try:
                step = send(value) if error is None else throw(error)
            except StopIteration as stop:
                self.ns += clock() - t0
                return stop.value
            except BaseException:
                self.ns += clock() - t0
                raise
            self.ns += clock() - t0
            try:
                value, error = (yield step), None
            except BaseException as e:  # (cancellation, thrown into the handler)
                value, error = None, e


def _consumer_fetch(request: Any, version: int) -> bool:
    if version >= REPLICA_STATE_VERSION:
        return request.replica_state.replica_id < 0
    return request.replica_id < 0


def _encoded_size(response: Any, version: int) -> int:
    out: list = []
    response.encode(version, out)
    return sum(len(c) for c in out)


def _empty_fetch(response: Any) -> None:
    """Drop the data of a throttled fetch: no partitions (closing their file regions)."""
    for topic in response.responses:
        for p in topic.partitions:
            if isinstance(p.records, FileRegion):
                p.records.close()
    response.responses = []


async def _unmuted(conn: Any) -> None:
    """Wait while ``conn`` is muted: a request read before the mute (pipelined behind the
    one that was throttled) runs after it, as Kafka reads no request of a muted channel."""
    loop = asyncio.get_running_loop()
    while True:
        wait = conn.muted_until - loop.time()
        if wait <= 0 or conn.closed:
            return
        await asyncio.sleep(wait)


class ClientQuotas:
    """The broker's quota managers (one per quota key) and their enforcement."""

    def __init__(self, config: BrokerConfig, clock: Any = None) -> None:
        samples = config.get_int("quota.window.num")
        window_s = config.get_int("quota.window.size.seconds")
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s,
                                          max_throttle_ms=window_s * 1000)
        self.controller_mutation = ControllerMutationQuotaManager(
            config.get_int("controller.quota.window.num"),
            config.get_int("controller.quota.window.size.seconds"))
        self.quotas: Quotas = {}
        self._monotonic = clock.monotonic if clock is not None else time.monotonic

    def now_ms(self) -> int:
        return int(self._monotonic() * 1000)

    async def run(self, spec: Any, ctx: Any, request: Any, size: int) -> Any:
        """Run the handler under the client's quotas; answer its response (None: none)."""
        api_key = spec.api_key
        if api_key in EXEMPT_KEYS:
            return await spec.fn(ctx, request)
        quotas = self.quotas
        user = ctx.principal.name
        client_id = ctx.client_id
        version = ctx.api_version
        consumer_fetch = api_key == FETCH_KEY and _consumer_fetch(request, version)
        if api_key == FETCH_KEY and not consumer_fetch:
            return await spec.fn(ctx, request)  # replication: not a client quota
        conn = ctx.conn
        if conn.muted_until:
            await _unmuted(conn)
        throttle = 0
        if api_key == PRODUCE_KEY:  # its size is known now: counted before the next request
            throttle = self.produce.record(quotas, user, client_id, size, self.now_ms())
            if throttle > 0:
                conn.throttle(throttle)
        elif consumer_fetch:
            cap = self.fetch.max_value_in_window(quotas, user, client_id)
            if cap is not None and cap < request.max_bytes:
                request.max_bytes = max(1, int(cap))
        timed = self.request.resolve(quotas, user, client_id) is not None
        if timed:
            run = _Timed(spec.fn(ctx, request))
            response = await run
        else:
            response = await spec.fn(ctx, request)
        now = self.now_ms()
        if api_key == PRODUCE_KEY and request.acks == 0:
            timed = False
        if timed:
            throttle = max(throttle, self.request.record(
                quotas, user, client_id, run.ns * NANOS_TO_PERCENTAGE, now))
        if consumer_fetch and response is not None:
            fetched = _encoded_size(response, version)
            over = self.fetch.record(quotas, user, client_id, fetched, now)
            throttle = max(throttle, over)
            if throttle > 0:
                self.fetch.unrecord(quotas, user, client_id, fetched, now)
                _empty_fetch(response)
        if throttle > 0:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle)
            ctx.conn.throttle(throttle)
        return response
