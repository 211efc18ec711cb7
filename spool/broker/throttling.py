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
- CreateTopics, CreatePartitions and DeleteTopics: ``controller_mutation_rate``, in
  partitions created or deleted, counted topic by topic before the handler runs. Strict
  (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): once the client's bucket is
  exhausted, the remaining topics are taken out of the request and answered
  THROTTLING_QUOTA_EXCEEDED ("The throttling quota has been exceeded."); older versions are
  permissive: everything is done and the client is only throttled. Unlike Kafka, which
  counts on the controller after each topic's validation, a topic refused later for another
  reason (authorization, a bad config) has been counted; and on a cluster each broker keeps
  its own buckets for the requests it receives.

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
from spool.protocol._generated.create_partitions_response import CreatePartitionsTopicResult
from spool.protocol._generated.create_topics_response import CreatableTopicResult
from spool.protocol._generated.delete_topics_response import DeletableTopicResult
from spool.protocol.errors import Errors
from spool.security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    Quotas,
    ThrottlingQuotaExceeded,
)

PRODUCE_KEY = 0
FETCH_KEY = 1
CREATE_TOPICS_KEY = 19
DELETE_TOPICS_KEY = 20
CREATE_PARTITIONS_KEY = 37
# controller_mutation_rate: strict (THROTTLING_QUOTA_EXCEEDED) from these versions on,
# permissive (accepted, only throttled) before, as ControllerMutationQuotaManager.newQuotaFor
STRICT_SINCE = {CREATE_TOPICS_KEY: 6, DELETE_TOPICS_KEY: 5, CREATE_PARTITIONS_KEY: 3}
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
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


def _mutations(api_key: int, ctx: Any, request: Any) -> tuple[str, list, list]:
    """(request field, its items, partitions each creates or deletes) of a topic mutation.

    Items that will fail anyway (a topic that exists, for CreateTopics; one that does not,
    for DeleteTopics and CreatePartitions; no increase) count 0: Kafka applies the quota
    after a topic's validation."""
    view = ctx.broker.view
    if api_key == CREATE_TOPICS_KEY:
        default_n = ctx.broker.config.get_int("num.partitions")
        counts = [0 if view.topic(t.name) is not None
                  else t.num_partitions if t.num_partitions > 0
                  else len(t.assignments) if t.assignments else default_n
                  for t in request.topics]
        return "topics", request.topics, counts
    if api_key == CREATE_PARTITIONS_KEY:
        counts = [max(0, t.count - view.partition_count(t.name))
                  if view.topic(t.name) is not None else 0 for t in request.topics]
        return "topics", request.topics, counts
    if ctx.api_version >= 6:  # DeleteTopics by name or id
        names = [t.name if t.name else view.topic_name(t.topic_id) for t in request.topics]
        field, items = "topics", request.topics
    else:
        names = list(request.topic_names)
        field, items = "topic_names", request.topic_names
    counts = [view.partition_count(n) if n and view.topic(n) is not None else 0 for n in names]
    return field, items, counts


def _apply_mutation_quota(quota: Any, api_key: int, ctx: Any, request: Any,
                          now_ms: int) -> list:
    """Count each topic's partitions; a strict quota refuses those past the limit, which
    are taken out of the request (the handler never sees them) and returned."""
    field, items, counts = _mutations(api_key, ctx, request)
    kept, refused = [], []
    for item, n in zip(items, counts, strict=True):
        if n > 0:
            try:
                quota.record(n, now_ms)
            except ThrottlingQuotaExceeded:
                refused.append(item)
                continue
        kept.append(item)
    if refused:
        setattr(request, field, kept)
    return refused


def _add_refusals(api_key: int, response: Any, refused: list) -> None:
    code, message = Errors.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE
    if api_key == CREATE_TOPICS_KEY:
        response.topics.extend(CreatableTopicResult(
            name=t.name, error_code=code, error_message=message, num_partitions=-1,
            replication_factor=-1, configs=None) for t in refused)
    elif api_key == CREATE_PARTITIONS_KEY:
        response.results.extend(CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=message) for t in refused)
    else:
        response.responses.extend(
            DeletableTopicResult(name=t, error_code=code, error_message=message)
            if isinstance(t, str) else
            DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code,
                                 error_message=message)
            for t in refused)


async def _unmuted(conn: Any) -> None:
    """Wait while ``conn`` is muted: a request read before the mute (pipelined behind the
    one that was throttled) runs after it, as Kafka reads no request of a muted channel."""
    loop = asyncio.get_running_loop()
    while True:
        wait = conn.muted_until - loop.time()
        if wait <= 0 or conn.closed or conn.gone:
            return
        await asyncio.sleep(min(wait, 1.0))  # (a hang-up ends the wait within a second)


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
        mutation = refused = None
        fetch_quota = False
        if api_key in STRICT_SINCE:
            mutation = self.controller_mutation.quota_for(
                quotas, user, client_id, strict=version >= STRICT_SINCE[api_key])
            if mutation is not None:
                refused = _apply_mutation_quota(mutation, api_key, ctx, request,
                                                self.now_ms())
        if api_key == PRODUCE_KEY:  # its size is known now: counted before the next request
            throttle = self.produce.record(quotas, user, client_id, size, self.now_ms())
            if throttle > 0:
                conn.throttle(throttle)
        elif consumer_fetch:
            cap = self.fetch.max_value_in_window(quotas, user, client_id)
            fetch_quota = cap is not None
            if fetch_quota and cap < request.max_bytes:
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
            # encoded (a second time) only for a client with a consumer_byte_rate
            fetched = _encoded_size(response, version) if fetch_quota else 0
            if fetch_quota:
                throttle = max(throttle, self.fetch.record(quotas, user, client_id, fetched,
                                                           now))
            if throttle > 0:  # throttled for any quota: no data (getThrottledResponse)
                if fetch_quota:
                    self.fetch.unrecord(quotas, user, client_id, fetched, now)
                _empty_fetch(response)
        if mutation is not None:
            if refused and response is not None:
                _add_refusals(api_key, response, refused)
            throttle = max(throttle, mutation.throttle_time_ms(now))
        if throttle > 0:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle)
            ctx.conn.throttle(throttle)
        return response
