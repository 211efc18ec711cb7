"""CLIENT_METRICS config resources (type 16, KIP-714): telemetry subscriptions.

A subscription is a config resource named by the operator (``kafka-client-metrics.sh
--alter --name N``, or IncrementalAlterConfigs on resource type 16) with Kafka's keys
(``ClientMetricsConfigs``)::

    metrics      list  metric name prefixes to push; "*" = all; empty = none   (default [])
    interval.ms  int   push interval, 100..3600000                             (default 300000)
    match        list  key=regex pairs a client must all match (Java ``matches``:
                       the whole value); keys: client_instance_id, client_id,
                       client_software_name, client_software_version,
                       client_source_address, client_source_port              (default [])

Values are stored as ConfigRecords (resource type 16) like any other config: in the
metadata log on a cluster, the single node's metadata store otherwise. A resource with
no values left is gone. ``validate(name, merged)`` is Kafka's check of a resource's
whole new set: an empty name or unknown key is INVALID_REQUEST ("Subscription name
can't be empty", "Unknown client metrics configuration: k"), an interval outside the
range INVALID_REQUEST, an unparsable value or match pattern INVALID_CONFIG ("Illegal
client matching pattern: p"). ``subscriptions(configs)`` turns the stored values into
``Subscription``s; ``Subscription.matches(client)`` is Kafka's match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from spool.protocol.errors import Errors, KafkaError

CLIENT_METRICS_RESOURCE = 16
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_KEYS = frozenset({"client_instance_id", "client_id", "client_software_name",
                        "client_software_version", "client_source_address",
                        "client_source_port"})
DOCS = {METRICS: "Subscription metrics list", INTERVAL_MS: "Push interval in milliseconds",
        MATCH: "Client match pattern list"}
TYPES = {METRICS: "list", INTERVAL_MS: "int", MATCH: "list"}


def parse_list(value: str) -> list[str]:
    """A Kafka LIST value: comma-separated, trimmed, "" = []."""
    return [] if not value.strip() else [v.strip() for v in value.split(",")]


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """Kafka's ``parseMatchingPatterns``: INVALID_CONFIG for a pattern it refuses."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_KEYS:
            raise KafkaError(Errors.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise KafkaError(Errors.INVALID_CONFIG,
                             f"Illegal client matching pattern: {pattern}") from None
    return out


def _interval(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                f"{INTERVAL_MS}: Not a number of type INT") from None


def validate(name: str, merged: Mapping[str, str]) -> None:
    """Kafka's ``ClientMetricsConfigs.validate`` of a resource's whole new set (module doc)."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Subscription name can't be empty")
    for key in merged:
        if key not in KEYS:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in merged:
        interval = _interval(merged[INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise KafkaError(Errors.INVALID_REQUEST,
                             f"Invalid value {interval} for {INTERVAL_MS}, interval must be "
                             f"between 100 and 3600000 (1 hour)")
    if MATCH in merged:
        parse_match(parse_list(merged[MATCH]))


@dataclass(frozen=True)
class Subscription:
    """One CLIENT_METRICS resource, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]

    def matches(self, client: Mapping[str, str]) -> bool:
        """Every pattern fully matches the client's value of its key (no patterns: all)."""
        return all(client.get(k) is not None and p.fullmatch(client[k]) is not None
                   for k, p in self.match.items())


def subscription(name: str, values: Mapping[str, str]) -> Subscription:
    return Subscription(
        name, tuple(parse_list(values.get(METRICS, ""))),
        _interval(values[INTERVAL_MS]) if INTERVAL_MS in values else DEFAULT_INTERVAL_MS,
        parse_match(parse_list(values.get(MATCH, ""))))


def subscriptions(configs: Mapping[str, Mapping[str, str]]) -> list[Subscription]:
    """Every stored resource (name -> values) as a Subscription, by name; a resource whose
    stored values no longer parse is skipped."""
    out = []
    for name in sorted(configs):
        try:
            out.append(subscription(name, configs[name]))
        except KafkaError:
            continue
    return out
