"""Client quotas, as Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager compute them (pure: values and times in, throttle times out).

Quotas are configured per entity (``SecurityImage.quotas``: an entity is a sorted tuple of
``(entity_type, name)``, ``name`` None for ``<default>``; entity types ``user`` and
``client-id``) with the keys ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate``. For one key, a connection of user
``u`` (the principal's name: ``ANONYMOUS`` on a listener without authentication) and client id
``c`` takes the first entity of Kafka's documented precedence that has that key::

    1. user=u, client-id=c          5. user=<default>, client-id=<default>
    2. user=u, client-id=<default>  6. user=<default>
    3. user=u                       7. client-id=c
    4. user=<default>, client-id=c  8. client-id=<default>

and the level that matched decides who shares one rate ("metric tags" in Kafka): levels 1, 2,
4, 5 count per (u, c); levels 3 and 6 count per user, all its client ids together; levels 7
and 8 count per client id, all users together. A quota set at ``user=<default>`` is thus one
quota *per user*, not one for all users. As in Kafka, a client id of ``""`` under client-id
quotas only (levels 7-8) has no quota (its tags are empty).

Rates (``Rate``, Kafka's ``Rate`` over a ``WindowedSum``): ``quota.window.num`` samples of
``quota.window.size.seconds`` each; a sample is complete when its window has passed, and one
with no event for ``num * size`` is forgotten. The rate is the sum of the samples over the
time since the oldest one started, counted as at least ``num - 1`` whole windows (so a fresh
client may send ``quota * (num - 1) * size`` at once before being throttled). A value is
recorded first and checked after; when the rate ``O`` is over the quota ``T``, the throttle
time is the delay that brings it back::

    throttle_ms = round((O - T) / T * window_ms)      (O*W / (W + X) = T, solved for X)

``request_percentage`` (handler time as a percentage of one thread, over the same windows)
caps its throttle at one window (``quota.window.size.seconds``), as ClientRequestQuotaManager
does; the byte rates are not capped.

``controller_mutation_rate`` (partitions created or deleted per second, KIP-599) uses a token
bucket (Kafka's ``TokenBucket``) over ``controller.quota.window.num`` x
``controller.quota.window.size.seconds``: it refills at the quota, holds at most
``quota * num * size`` tokens, and is exceeded once below zero; throttle = ``-tokens / quota``
seconds. A *strict* quota (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuses a
mutation with THROTTLING_QUOTA_EXCEEDED when the bucket is already exceeded *before* it (so
one mutation may overdraw it); a *permissive* one (older versions) accepts every mutation and
only reports the throttle time.

Lifecycle: one ``ClientQuotaManager`` per key for the broker's life; its rates live as long
as their client is active (dropped after an hour without a record, as Kafka's sensors); a
quota changed in the image applies from the next record, on the rates already accumulated.
Not thread-safe: the broker calls it from its event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping

from spool.util.inet import java_host_address

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
              CONTROLLER_MUTATION_RATE)
USER = "user"
CLIENT_ID = "client-id"
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # Kafka's InactiveSensorExpirationTimeSeconds
_PURGE_EVERY_MS = 60 * 1000
INT32_MAX = 2**31 - 1  # max.connection.creation.rate's default: no limit

Entity = tuple[tuple[str, str | None], ...]
Quotas = Mapping[Entity, Mapping[str, float]]
Tags = tuple[str, str]  # (user, client id); "" for "not part of the rate's identity"


def has_client_quotas(quotas: Quotas) -> bool:
    """Whether any entity has one of ``QUOTA_KEYS`` (an ip's ``connection_creation_rate`` is
    not a client quota)."""
    return any(k in QUOTA_KEYS for values in quotas.values() for k in values)


def quota_metric_tags(quotas: Quotas, key: str, user: str, client_id: str) -> Tags:
    """Kafka's DefaultQuotaCallback.quotaMetricTags: whose rate ``(user, client_id)`` counts in."""

    def has(entity: Entity) -> bool:
        q = quotas.get(entity)
        return q is not None and key in q

    u, c = user, client_id
    if has(((CLIENT_ID, c), (USER, u))) or has(((CLIENT_ID, None), (USER, u))):
        return (u, c)
    if has(((USER, u),)):
        return (u, "")
    if has(((CLIENT_ID, c), (USER, None))) or has(((CLIENT_ID, None), (USER, None))):
        return (u, c)
    if has(((USER, None),)):
        return (u, "")
    return ("", c)


def quota_limit(quotas: Quotas, key: str, tags: Tags) -> float | None:
    """Kafka's DefaultQuotaCallback.quotaLimit: the quota of the rate with these tags, or None."""
    u, c = tags
    if u and c:
        order: tuple[Entity, ...] = (((CLIENT_ID, c), (USER, u)), ((CLIENT_ID, None), (USER, u)),
                                     ((CLIENT_ID, c), (USER, None)),
                                     ((CLIENT_ID, None), (USER, None)))
    elif u:
        order = (((USER, u),), ((USER, None),))
    elif c:
        order = (((CLIENT_ID, c),), ((CLIENT_ID, None),))
    else:
        return None
    for entity in order:
        q = quotas.get(entity)
        if q is not None and key in q:
            return float(q[key])
    return None


class Rate:
    """Kafka's ``Rate`` over a ``WindowedSum``: per second, over ``samples`` windows."""

    __slots__ = ("samples", "window_ms", "_starts", "_lasts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        # parallel lists, one entry per sample (one more than ``samples``: Kafka's
        # "overlapping sample" placeholder)
        self._starts: list[int] = []
        self._lasts: list[int] = []
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._new(now_ms)
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:  # complete: advance
            i = self._current = (i + 1) % (self.samples + 1)
            if i >= len(self._starts):
                self._new(now_ms)
            else:
                self._starts[i] = self._lasts[i] = now_ms
                self._values[i] = 0.0
        self._values[i] += value
        self._lasts[i] = now_ms

    def _new(self, now_ms: int) -> None:
        self._starts.append(now_ms)
        self._lasts.append(now_ms)
        self._values.append(0.0)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, last in enumerate(self._lasts):
            if now_ms - last >= expire:
                self._starts[i] = self._lasts[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate divides by: since the oldest sample, at least ``samples - 1``
        windows, at least 1 ms."""
        self._purge(now_ms)
        if not self._starts:
            self._new(now_ms)
        elapsed = now_ms - min(self._starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        window = self.window_size_ms(now_ms)  # (purges first)
        return sum(self._values) / (window / 1000.0)

    @property
    def last_record_ms(self) -> int:
        return max(self._lasts) if self._lasts else 0


class TokenBucket:
    """Kafka's ``TokenBucket``: refills at ``quota`` per second up to ``quota * samples * window``."""

    __slots__ = ("samples", "window_ms", "tokens", "last_update_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self.tokens = 0.0
        self.last_update_ms = 0

    def _refill(self, quota: float, now_ms: int) -> None:
        burst = self.samples * self.window_ms / 1000.0 * quota
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_update_ms) / 1000.0)
        self.last_update_ms = now_ms

    def measure(self, quota: float, now_ms: int) -> float:
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, value: float, quota: float, now_ms: int) -> None:
        self._refill(quota, now_ms)
        burst = self.samples * self.window_ms / 1000.0 * quota
        self.tokens = min(burst, self.tokens - value)

    @property
    def last_record_ms(self) -> int:
        return self.last_update_ms


class ClientQuotaManager:
    """One quota key's rates and throttle times (Kafka's ClientQuotaManager for one QuotaType).

    ``record`` answers 0 when the client has no quota for this key (and then records
    nothing). ``quotas`` is the image's mapping; resolutions are cached per mapping object,
    so pass the image's own (immutable) mapping, not a copy made per call.
    """

    def __init__(self, key: str, samples: int = 11, window_s: int = 1,
                 max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = max(1, samples)
        self.window_ms = max(1, window_s) * 1000
        self.max_throttle_ms = max_throttle_ms
        self.rates: dict[Tags, Rate] = {}
        self._resolved: dict[tuple[str, str], tuple[Tags, float] | None] = {}
        self._resolved_for: object = None
        self._last_purge_ms = 0

    def resolve(self, quotas: Quotas, user: str, client_id: str) -> tuple[Tags, float] | None:
        """(whose rate, quota) for this client, or None when no quota applies."""
        if quotas is not self._resolved_for:
            self._resolved, self._resolved_for = {}, quotas
        try:
            return self._resolved[(user, client_id)]
        except KeyError:
            pass
        tags = quota_metric_tags(quotas, self.key, user, client_id)
        limit = quota_limit(quotas, self.key, tags)
        found = None if limit is None else (tags, limit)
        if len(self._resolved) >= 10000:
            self._resolved.clear()
        self._resolved[(user, client_id)] = found
        return found

    def _rate(self, tags: Tags, now_ms: int) -> Rate:
        if now_ms - self._last_purge_ms >= _PURGE_EVERY_MS:
            self._last_purge_ms = now_ms
            idle = [t for t, r in self.rates.items()
                    if now_ms - r.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]
            for t in idle:
                del self.rates[t]
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, quotas: Quotas, user: str, client_id: str, value: float,
               now_ms: int) -> int:
        """Record ``value`` and answer the throttle time in ms (0: within the quota)."""
        found = self.resolve(quotas, user, client_id)
        if found is None:
            return 0
        tags, limit = found
        rate = self._rate(tags, now_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        if limit <= 0:
            throttle = float(self.max_throttle_ms if self.max_throttle_ms is not None
                             else self.samples * self.window_ms)
        else:
            throttle = (observed - limit) / limit * rate.window_size_ms(now_ms)
        ms = round(throttle)
        if self.max_throttle_ms is not None:
            ms = min(ms, self.max_throttle_ms)
        return int(ms)

    def unrecord(self, quotas: Quotas, user: str, client_id: str, value: float,
                 now_ms: int) -> None:
        """Take back a value recorded (a throttled fetch answers no data: Kafka's
        ``unrecordQuotaSensor``)."""
        found = self.resolve(quotas, user, client_id)
        if found is not None:
            self._rate(found[0], now_ms).record(-value, now_ms)

    def max_value_in_window(self, quotas: Quotas, user: str, client_id: str) -> float | None:
        """``quota * (samples - 1) * window``: the most one request may take without being
        throttled for sure (Kafka caps a consumer's fetch ``max_bytes`` with it); None if no
        quota."""
        found = self.resolve(quotas, user, client_id)
        if found is None:
            return None
        return found[1] * (self.samples - 1) * self.window_ms / 1000.0


class ThrottlingQuotaExceeded(Exception):
    """A strict controller mutation quota refused a mutation (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(f"throttled for {throttle_time_ms} ms")
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuota:
    """One request's view of a client's mutation bucket (Kafka's Strict/Permissive
    ControllerMutationQuota): ``record(partitions, now)`` per topic; ``throttle_time_ms``
    after."""

    __slots__ = ("bucket", "limit", "strict", "_throttle_ms", "_recorded_ms")

    def __init__(self, bucket: TokenBucket, limit: float, strict: bool) -> None:
        self.bucket = bucket
        self.limit = limit
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def _over(self, now_ms: int) -> int | None:
        tokens = self.bucket.measure(self.limit, now_ms)
        if tokens >= 0:
            return None
        return round(-tokens / self.limit * 1000) if self.limit > 0 else 2**31 - 1

    def record(self, permits: float, now_ms: int) -> None:
        """Count ``permits`` mutations. Strict: raise ``ThrottlingQuotaExceeded`` (and count
        nothing) when the bucket is already exceeded."""
        if self.strict:
            over = self._over(now_ms)
            if over is not None:
                self._throttle_ms, self._recorded_ms = over, now_ms
                raise ThrottlingQuotaExceeded(over)
            self.bucket.record(permits, self.limit, now_ms)
            return
        self.bucket.record(permits, self.limit, now_ms)
        over = self._over(now_ms)
        if over is not None:
            self._throttle_ms, self._recorded_ms = over, now_ms

    @property
    def is_exceeded(self) -> bool:
        return self.strict and self._throttle_ms > 0

    def throttle_time_ms(self, now_ms: int) -> int:
        """The throttle recorded, less the time since (Kafka's ``throttleTime``)."""
        return max(0, self._throttle_ms - (now_ms - self._recorded_ms))


class ControllerMutationQuotaManager:
    """``controller_mutation_rate``: a token bucket per client (tags as the other quotas)."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        self.key = CONTROLLER_MUTATION_RATE
        self.samples = max(1, samples)
        self.window_ms = max(1, window_s) * 1000
        self.buckets: dict[Tags, TokenBucket] = {}
        self._resolver = ClientQuotaManager(CONTROLLER_MUTATION_RATE, samples, window_s)

    def quota_for(self, quotas: Quotas, user: str, client_id: str,
                  strict: bool) -> ControllerMutationQuota | None:
        """This client's quota for one request, or None when it has none."""
        found = self._resolver.resolve(quotas, user, client_id)
        if found is None:
            return None
        tags, limit = found
        bucket = self.buckets.get(tags)
        if bucket is None:
            if len(self.buckets) >= 10000:
                self.buckets.clear()
            bucket = self.buckets[tags] = TokenBucket(self.samples, self.window_ms)
        return ControllerMutationQuota(bucket, limit, strict)


CONNECTION_CREATION_RATE = "connection_creation_rate"
IP = "ip"


def ip_connection_rates(quotas: Quotas) -> tuple[dict[str, float], float | None]:
    """``connection_creation_rate`` per IP (as ``spool.util.inet.java_host_address`` prints
    it, the form the server takes the client's address in) and the ``ip=<default>`` one."""
    per_ip: dict[str, float] = {}
    default: float | None = None
    for entity, values in quotas.items():
        rate = values.get(CONNECTION_CREATION_RATE)
        if rate is None or len(entity) != 1 or entity[0][0] != IP:
            continue
        name = entity[0][1]
        if name is None:
            default = float(rate)
        else:
            per_ip[java_host_address(name)] = float(rate)
    return per_ip, default


class ConnectionQuotas:
    """The IP connection creation rates, as Kafka's ``ConnectionQuotas``
    (``recordIpConnectionMaybeThrottle``).

    A new connection from ``host`` is recorded in that IP's ``Rate`` (``quota.window.num``
    windows of ``quota.window.size.seconds``; so a fresh IP may open ``quota * (num - 1) *
    size`` connections at once); when the rate is then over the IP's quota the connection
    is taken back out of the rate and refused: ``record`` answers the throttle time
    (``(O - T) / T * window``, at most one window, Kafka's ``maxThrottleTimeMs``), for
    which Kafka holds the socket before closing it. 0: accepted. An IP without a quota of
    its own takes the ``ip=<default>`` one; with neither, nothing is recorded. Not
    thread-safe (the event loop's).
    """

    def __init__(self, quotas: Quotas, samples: int = 11, window_s: int = 1) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_s) * 1000
        self.rates: dict[str, Rate] = {}
        self._last_purge_ms = 0
        self.per_ip: dict[str, float] = {}
        self.default: float | None = None
        self.update(quotas)

    def update(self, quotas: Quotas) -> None:
        """New quotas from the image; the rates accumulated so far are kept."""
        self.per_ip, self.default = ip_connection_rates(quotas)

    @property
    def enabled(self) -> bool:
        return bool(self.per_ip) or self.default is not None

    def record(self, host: str, now_ms: int) -> int:
        """Record a connection from ``host``: 0 if accepted, else the throttle time (ms)."""
        limit = self.per_ip.get(host, self.default)
        if limit is None:
            return 0
        if now_ms - self._last_purge_ms >= _PURGE_EVERY_MS:
            self._last_purge_ms = now_ms
            for idle in [h for h, r in self.rates.items()
                         if now_ms - r.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]:
                del self.rates[idle]
        rate = self.rates.get(host)
        if rate is None:
            rate = self.rates[host] = Rate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        observed = rate.measure(now_ms)
        if observed <= limit:
            return 0
        rate.record(-1.0, now_ms)  # not accepted: not counted
        throttle = (observed - limit) / limit * rate.window_size_ms(now_ms)
        return max(1, min(round(throttle), self.window_ms))


class BrokerConnectionRate:
    """``max.connection.creation.rate``: the broker-wide connection creation rate (Kafka's
    ``brokerConnectionRateSensor``). Unlike an IP's, a connection over it is not refused:
    it is counted, and the acceptor waits the throttle time (at most one window) before it
    serves it and accepts the next, as Kafka's ``waitForConnectionSlot``."""

    def __init__(self, limit: float, samples: int = 11, window_s: int = 1) -> None:
        self.limit = limit
        self.window_ms = max(1, window_s) * 1000
        self.rate = Rate(max(1, samples), self.window_ms)

    def record(self, now_ms: int) -> int:
        """Count a connection: the time (ms) the acceptor waits, 0 within the rate."""
        self.rate.record(1.0, now_ms)
        observed = self.rate.measure(now_ms)
        if observed <= self.limit:
            return 0
        if self.limit <= 0:
            return self.window_ms
        throttle = (observed - self.limit) / self.limit * self.rate.window_size_ms(now_ms)
        return max(1, min(round(throttle), self.window_ms))

    def unrecord(self, now_ms: int) -> None:
        """Take back a connection an IP quota refused (Kafka's ``updateListenerMetrics``)."""
        self.rate.record(-1.0, now_ms)
