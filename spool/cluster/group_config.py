"""GROUP config resources (type 32, KIP-848/KIP-932): per-group settings, Kafka's ``GroupConfig``.

A group config is set on a group id with IncrementalAlterConfigs or AlterConfigs
(``kafka-configs.sh --entity-type groups``) and stored as ConfigRecords with resource
type 32, like any other config: in the metadata log on a cluster, the single node's
metadata store otherwise. A group need not exist to carry configs; a resource with no
values left is gone. The keys (Kafka 4.2's ``GroupConfig`` plus KIP-1240's two share
keys; the ``streams.*`` keys are not served: Spool has no streams groups)::

    key                               type    unset: the broker key (or the default)
    consumer.session.timeout.ms       int     group.consumer.session.timeout.ms
    consumer.heartbeat.interval.ms    int     group.consumer.heartbeat.interval.ms
    share.session.timeout.ms          int     group.share.session.timeout.ms
    share.heartbeat.interval.ms       int     group.share.heartbeat.interval.ms
    share.record.lock.duration.ms     int     group.share.record.lock.duration.ms
    share.delivery.count.limit        int     group.share.delivery.count.limit
    share.partition.max.record.locks  int     group.share.partition.max.record.locks
    share.auto.offset.reset           string  latest  (earliest, latest, by_duration:<ISO-8601>)
    share.isolation.level             string  read_uncommitted  (or read_committed)

``validate(name, values, broker)`` is Kafka's check of a resource's whole new set
(``ControllerConfigurationValidator`` + ``GroupConfig.validate``): an empty name is
INVALID_REQUEST "Default group resources are not allowed."; an unknown key is
INVALID_CONFIG "Unknown group config name: k"; a value that does not parse or breaks
the key's own floor (``atLeast(1)``, ``atLeast(1000)`` for the lock duration) is
INVALID_CONFIG naming the key, the value and what is allowed (Spool's wording); with
``broker`` (a getter of the broker's keys) each timing is bounded by the broker's
``group.consumer.min/max.*`` and ``group.share.min/max.*`` keys, worded as Kafka
("consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms"), and a session timeout must exceed its
heartbeat interval, both taken with the broker's values where the group sets none.
The delivery count limit and the record locks are bounded as the broker keys are
(2..10, 100..10000). Without ``broker`` (the controller, which trusts the broker that
forwarded the request to have checked the bounds, as for BROKER resources) only names
and values are checked.

``effective(key, values, broker)`` is a group's value of a key: its own, else the
broker key's, else the static default, parsed (int or str).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import Check, ConfigKey, at_least, one_of, parse_value

GROUP_RESOURCE = 32
BrokerGetter = Callable[[str], "str | None"]

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{0,9}))?S)?)?",
                       re.IGNORECASE)


def parse_by_duration(value: str) -> int | None:
    """Milliseconds of ``by_duration:<ISO-8601 duration>`` (Java's ``Duration.parse``,
    non-negative: ``by_duration:PT1H``), else None."""
    prefix, _, text = value.partition(":")
    if prefix.lower() != "by_duration" or not text:
        return None
    m = _DURATION.fullmatch(text.strip())
    if m is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        return None
    days, hours, minutes, seconds, frac = m.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
    return ms + int(seconds or 0) * 1000 + int(((frac or "") + "000")[:3])


_AUTO_OFFSET_RESET = Check("latest, earliest or by_duration:<ISO-8601 duration, e.g. PT1H>",
                           lambda v: v in ("latest", "earliest")
                           or parse_by_duration(v) is not None, replaces_type=True)


@dataclass(frozen=True)
class GroupKey:
    """One group config key: its definition and the broker key that is its value unset."""

    key: ConfigKey
    broker_key: str | None
    bounds: tuple[str, str] | None  # broker keys of its floor and ceiling


def _k(name: str, type_: str, default: object, check: Check | None, broker_key: str | None,
       bounds: tuple[str, str] | None, doc: str) -> GroupKey:
    return GroupKey(ConfigKey(name, type_, default, (), check, doc), broker_key, bounds)


KEYS: dict[str, GroupKey] = {g.key.name: g for g in (
    _k(CONSUMER_SESSION_TIMEOUT_MS, "int", 45000, at_least(1),
       "group.consumer.session.timeout.ms",
       ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
       "The timeout to detect client failures when using the consumer group protocol."),
    _k(CONSUMER_HEARTBEAT_INTERVAL_MS, "int", 5000, at_least(1),
       "group.consumer.heartbeat.interval.ms",
       ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
       "The heartbeat interval given to the members of a consumer group."),
    _k(SHARE_SESSION_TIMEOUT_MS, "int", 45000, at_least(1), "group.share.session.timeout.ms",
       ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
       "The timeout to detect client failures when using the share group protocol."),
    _k(SHARE_HEARTBEAT_INTERVAL_MS, "int", 5000, at_least(1),
       "group.share.heartbeat.interval.ms",
       ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
       "The heartbeat interval given to the members of a share group."),
    _k(SHARE_RECORD_LOCK_DURATION_MS, "int", 30000, at_least(1000),
       "group.share.record.lock.duration.ms",
       ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
       "The record acquisition lock duration in milliseconds for share groups."),
    _k(SHARE_DELIVERY_COUNT_LIMIT, "int", 5, at_least(2), "group.share.delivery.count.limit",
       None, "The maximum number of delivery attempts for a record delivered to a share "
       "group."),
    _k(SHARE_PARTITION_MAX_RECORD_LOCKS, "int", 2000, at_least(100),
       "group.share.partition.max.record.locks", None,
       "Share-partition record lock limit."),
    _k(SHARE_AUTO_OFFSET_RESET, "string", "latest", _AUTO_OFFSET_RESET, None, None,
       "The strategy to initialize the share-partition start offset."),
    _k(SHARE_ISOLATION_LEVEL, "string", "read_uncommitted",
       one_of("read_committed", "read_uncommitted"), None, None,
       "Controls how to read records written transactionally."),
)}
FIXED_BOUNDS = {SHARE_DELIVERY_COUNT_LIMIT: (2, 10), SHARE_PARTITION_MAX_RECORD_LOCKS: (100, 10000)}
SESSION_OVER_HEARTBEAT = ((CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
                          (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS))


def key_type(name: str) -> str | None:
    """A group key's type (int, string), None for a name that is not one."""
    g = KEYS.get(name)
    return None if g is None else g.key.type


def broker_value(name: str, broker: BrokerGetter | None) -> int | str:
    """The value a group that does not set ``name`` has: the broker key's, else the
    default."""
    g = KEYS[name]
    raw = broker(g.broker_key) if broker is not None and g.broker_key else None
    return g.key.default if raw is None else parse_value(g.key, raw)


def effective(name: str, values: Mapping[str, str], broker: BrokerGetter | None) -> int | str:
    """The group's value of ``name`` (module doc). KeyError for a key that is not a group
    config."""
    g = KEYS[name]
    raw = values.get(name)
    if raw is not None:
        try:
            return parse_value(g.key, raw)
        except KafkaError:  # stored before a rule changed: the broker's value
            pass
    return broker_value(name, broker)


def validate(group: str, values: Mapping[str, str], broker: BrokerGetter | None) -> None:
    """Kafka's check of a GROUP resource's whole new set (module doc)."""
    if not group:
        raise KafkaError(Errors.INVALID_REQUEST, "Default group resources are not allowed.")
    for key in values:
        if key not in KEYS:
            raise KafkaError(Errors.INVALID_CONFIG, f"Unknown group config name: {key}")
    parsed = {k: parse_value(KEYS[k].key, v) for k, v in values.items()}
    if broker is None:
        return
    for key, value in parsed.items():
        bounds = KEYS[key].bounds
        if bounds is not None:
            low, high = (int(broker(b) or 0) for b in bounds)
            if value < low:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"{key} must be greater than or equal to {bounds[0]}")
            if value > high:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"{key} must be less than or equal to {bounds[1]}")
        elif key in FIXED_BOUNDS:
            low, high = FIXED_BOUNDS[key]
            if not low <= value <= high:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"{key} must be between {low} and {high} (inclusive)")
    for session, heartbeat in SESSION_OVER_HEARTBEAT:
        if session in parsed or heartbeat in parsed:
            s = parsed.get(session, broker_value(session, broker))
            h = parsed.get(heartbeat, broker_value(heartbeat, broker))
            if s <= h:  # type: ignore[operator]
                raise KafkaError(Errors.INVALID_CONFIG, f"{session} must be greater than "
                                 f"{heartbeat}")
