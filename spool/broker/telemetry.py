"""Client telemetry (KIP-714): who pushes which metrics, and what they pushed.

``ClientMetricsManager`` is Kafka's (``ClientMetricsManager``), over the broker's
CLIENT_METRICS resources (``spool.cluster.client_metrics``; read from ``broker.view``
at each request, so a change applies to the next request of every client):

- GetTelemetrySubscriptions: a zero ``client_instance_id`` gets a new random one. The
  client instance (kept by id; forgotten ``max(60 s, 3 x push interval)`` after its last
  request, or when 16,384 are kept; Kafka also forgets it when its connection closes,
  Spool waits for the expiry) is matched against every subscription (client_id
  from the request header, software name/version from the connection's ApiVersions,
  source address and port): its metrics are the union of the matching subscriptions'
  (``*`` if one says ``*``), its push interval the smallest (default 300,000 ms). The
  answer: the id, a subscription id (a hash of metrics and interval, per instance), the
  accepted compressions (zstd, lz4, gzip, snappy), the interval, ``telemetry.max.bytes``,
  delta temporality. Asked again before the interval is over: THROTTLING_QUOTA_EXCEEDED.
  When the subscriptions change, the instance is matched again at its next request
  (and starts afresh: that request is not throttled).
- PushTelemetry: a zero or reserved id is INVALID_REQUEST; after a terminating push,
  INVALID_REQUEST; before the interval (unless terminating, or the first push after a
  Get) THROTTLING_QUOTA_EXCEEDED; another subscription id UNKNOWN_SUBSCRIPTION_ID (the
  client then asks again); an unknown compression UNSUPPORTED_COMPRESSION_TYPE; more
  than ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE; a payload that does not decompress or
  decode INVALID_RECORD. Accepted payloads go to the ``TelemetryStore``.

``TelemetryStore`` keeps each accepted push in memory (``Push``: when, which client, the
decompressed OTLP bytes and their decoded data points) for ``spool.telemetry.retention.ms``
and within ``spool.telemetry.retention.bytes`` (the oldest go first). It is the one place
readers take them from: ``pushes()``, ``as_json()`` (``spool telemetry show`` and the
admin endpoint, ``spool.broker.admin_http``); a metrics exporter (issue 18) reads it too.

Time comes from the broker's clock; state is touched on the event loop only.
"""

from __future__ import annotations

import secrets
import uuid
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spool.cluster.client_metrics import (
    ALL_METRICS,
    CLIENT_METRICS_RESOURCE,
    DEFAULT_INTERVAL_MS,
    Subscription,
    subscriptions,
)
from spool.protocol._generated import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)
from spool.protocol.errors import Errors, KafkaError
from spool.protocol.otlp import DataPoint, decode_metrics
from spool.records.compression import CODEC_NAMES, decompress

ACCEPTED_COMPRESSION = [4, 3, 1, 2]  # zstd, lz4, gzip, snappy: Kafka's order
CACHE_MAX_SIZE = 16_384
CACHE_EXPIRY_MS = 60_000
ZERO_UUID = uuid.UUID(int=0)
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED


@dataclass
class ClientInstance:
    """A client instance as the broker knows it (Kafka's ``ClientMetricsInstance``)."""

    client_instance_id: uuid.UUID
    attributes: dict[str, str]
    subscription_id: int
    metrics: list[str]
    push_interval_ms: int
    basis: tuple[Subscription, ...]  # the subscriptions it was matched against
    last_get_ms: int = -(1 << 62)
    last_push_ms: int = -(1 << 62)
    last_seen_ms: int = 0
    terminating: bool = False


@dataclass(frozen=True)
class Push:
    """One accepted PushTelemetry."""

    received_ms: int
    client_instance_id: str
    attributes: dict[str, str]
    subscription_id: int
    compression: str
    terminating: bool
    payload: bytes  # OTLP MetricsData, decompressed
    points: list[DataPoint] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"received_ms": self.received_ms, "client_instance_id": self.client_instance_id,
                **self.attributes, "subscription_id": self.subscription_id,
                "compression": self.compression, "terminating": self.terminating,
                "bytes": len(self.payload),
                "metrics": [{"name": p.name, "kind": p.kind, "value": p.value,
                             "time_unix_nano": p.time_unix_nano, "attributes": p.attributes}
                            for p in self.points]}


class TelemetryStore:
    """Accepted pushes, oldest first, bounded in time and bytes (module doc)."""

    def __init__(self, retention_ms: int, retention_bytes: int, now_ms: Callable[[], int]):
        self.retention_ms = retention_ms
        self.retention_bytes = retention_bytes
        self.now_ms = now_ms
        self._pushes: deque[Push] = deque()
        self._bytes = 0

    def add(self, push: Push) -> None:
        self._pushes.append(push)
        self._bytes += len(push.payload)
        self._expire()

    def _expire(self) -> None:
        horizon = self.now_ms() - self.retention_ms
        while self._pushes and (self._pushes[0].received_ms < horizon
                                or self._bytes > self.retention_bytes):
            self._bytes -= len(self._pushes.popleft().payload)

    def pushes(self, client_instance_id: str | None = None) -> list[Push]:
        self._expire()
        return [p for p in self._pushes
                if client_instance_id is None or p.client_instance_id == client_instance_id]

    def as_json(self) -> list[dict[str, Any]]:
        return [p.as_json() for p in self.pushes()]


def _subscription_id(metrics: list[str], interval_ms: int, instance: uuid.UUID) -> int:
    h = zlib.crc32(f"{sorted(metrics)}{interval_ms}".encode()) ^ (instance.int & 0xFFFFFFFF)
    return h - (1 << 32) if h >= 1 << 31 else h


class ClientMetricsManager:
    """GetTelemetrySubscriptions and PushTelemetry (module doc). ``configs()``: the
    CLIENT_METRICS resources now (name -> values)."""

    def __init__(self, configs: Callable[[], dict[str, dict[str, str]]], max_bytes: int,
                 store: TelemetryStore, now_ms: Callable[[], int]) -> None:
        self.configs = configs
        self.max_bytes = max_bytes
        self.store = store
        self.now_ms = now_ms
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    @classmethod
    def of(cls, broker) -> ClientMetricsManager:
        cfg = broker.config
        store = TelemetryStore(cfg.get_int("spool.telemetry.retention.ms"),
                               cfg.get_int("spool.telemetry.retention.bytes"),
                               broker.clock.now_ms)
        return cls(lambda: broker.view.resource_configs(CLIENT_METRICS_RESOURCE),
                   cfg.get_int("telemetry.max.bytes"), store, broker.clock.now_ms)

    # -- the client instances ------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str],
                  now: int) -> ClientInstance:
        self._forget_expired(now)
        subs = tuple(subscriptions(self.configs()))
        inst = self._instances.get(instance_id)
        if inst is None or inst.basis != subs:
            inst = self._matched(instance_id, inst.attributes if inst else attributes, subs)
            self._instances[instance_id] = inst
            while len(self._instances) > CACHE_MAX_SIZE:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        return inst

    def _forget_expired(self, now: int) -> None:
        """Instances are kept least recently seen first: look only at those idle for more
        than a minute (the shortest expiry), not at every instance."""
        expired = []
        for iid, inst in self._instances.items():
            idle = now - inst.last_seen_ms
            if idle <= CACHE_EXPIRY_MS:
                break
            if idle > 3 * inst.push_interval_ms:
                expired.append(iid)
        for iid in expired:
            del self._instances[iid]

    def _matched(self, instance_id: uuid.UUID, attributes: dict[str, str],
                 subs: tuple[Subscription, ...]) -> ClientInstance:
        interval, metrics, everything = DEFAULT_INTERVAL_MS, set(), False
        client = {**attributes, "client_instance_id": str(instance_id)}
        for s in subs:
            if s.matches(client):
                everything = everything or ALL_METRICS in s.metrics
                metrics.update(s.metrics)
                interval = min(interval, s.interval_ms)
        wanted = [ALL_METRICS] if everything else sorted(metrics)
        # a re-evaluated instance starts afresh, as Kafka's (no throttle on its next request)
        return ClientInstance(instance_id, attributes,
                              _subscription_id(wanted, interval, instance_id), wanted, interval,
                              subs)

    # -- the requests --------------------------------------------------------------------

    def get_subscriptions(self, req, attributes: dict[str, str]
                          ) -> GetTelemetrySubscriptionsResponse:
        now = self.now_ms()
        instance_id = req.client_instance_id
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = uuid.UUID(bytes=secrets.token_bytes(16), version=4)
            while instance_id in self._instances:
                instance_id = uuid.UUID(bytes=secrets.token_bytes(16), version=4)
        inst = self._instance(instance_id, attributes, now)
        if now - max(inst.last_get_ms, inst.last_push_ms) < inst.push_interval_ms:
            return GetTelemetrySubscriptionsResponse(
                throttle_time_ms=0, error_code=Errors.THROTTLING_QUOTA_EXCEEDED,
                client_instance_id=ZERO_UUID, subscription_id=0, accepted_compression_types=[],
                push_interval_ms=0, telemetry_max_bytes=0, delta_temporality=False,
                requested_metrics=[])
        inst.last_get_ms = now
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=0, client_instance_id=instance_id,
            subscription_id=inst.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION),
            push_interval_ms=inst.push_interval_ms, telemetry_max_bytes=self.max_bytes,
            delta_temporality=True, requested_metrics=list(inst.metrics))

    def push(self, req, attributes: dict[str, str]) -> PushTelemetryResponse:
        instance_id = req.client_instance_id
        if instance_id is None or instance_id in RESERVED_UUIDS:
            return _push_error(Errors.INVALID_REQUEST)
        now = self.now_ms()
        inst = self._instance(instance_id, attributes, now)
        try:
            self._check_push(req, inst, now)
        except KafkaError as e:
            return _push_error(e.code)
        finally:
            inst.terminating = bool(req.terminating)
        data = bytes(req.metrics or b"")
        if data:
            try:
                # telemetry.max.bytes bounds what is sent, as Kafka's; the inflated payload
                # has the records' decompression-bomb bound
                payload = decompress(req.compression_type, data) \
                    if req.compression_type else data
                points = decode_metrics(payload)
            except (KafkaError, ValueError, UnicodeDecodeError):
                return _push_error(Errors.INVALID_RECORD)
            self.store.add(Push(now, str(instance_id), dict(inst.attributes),
                                req.subscription_id,
                                CODEC_NAMES.get(req.compression_type, "none"),
                                bool(req.terminating), payload, points))
        return PushTelemetryResponse(throttle_time_ms=0, error_code=0)

    def _check_push(self, req, inst: ClientInstance, now: int) -> None:
        if inst.terminating:
            raise KafkaError(Errors.INVALID_REQUEST, "terminated")
        accept = inst.last_get_ms > inst.last_push_ms or \
            now - inst.last_push_ms >= inst.push_interval_ms
        if accept:
            inst.last_push_ms = now
        elif not req.terminating:
            raise KafkaError(Errors.THROTTLING_QUOTA_EXCEEDED, "before the push interval")
        if req.subscription_id != inst.subscription_id:
            raise KafkaError(Errors.UNKNOWN_SUBSCRIPTION_ID, "unknown subscription id")
        if req.compression_type not in CODEC_NAMES:
            raise KafkaError(Errors.UNSUPPORTED_COMPRESSION_TYPE, "unknown compression")
        if req.metrics is not None and len(req.metrics) > self.max_bytes:
            raise KafkaError(Errors.TELEMETRY_TOO_LARGE, "too large")


def _push_error(code: int) -> PushTelemetryResponse:
    return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
