"""What DescribeConfigs shows: every key with its value, source, synonyms, type, doc.

Topic keys come from ``spool.storage.config.TOPIC_CONFIGS`` resolved
through topic overrides, dynamic broker values, static broker values and
defaults. Broker keys are the broker's own (``BROKER_KEYS``), the storage
layer's broker-only keys, and the broker synonyms of every topic key
(``log.retention.ms``...). ``DYNAMIC_TOPIC_DEFAULTS`` are the broker keys
AlterConfigs may change at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spool.broker.config import BROKER_KEYS
from spool.storage.config import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_OF,
    TOPIC_CONFIGS,
    ConfigSource,
    describe_topic_configs,
    format_value,
)

DYNAMIC_TOPIC_DEFAULTS = frozenset(BROKER_SYNONYM_OF)


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: str
    read_only: bool = False
    doc: str = ""
    synonyms: tuple[tuple[str, str, ConfigSource], ...] = ()


def topic_entries(
    overrides: Mapping[str, str],
    dynamic_broker: Mapping[str, str],
    static_broker: Mapping[str, str],
) -> list[ConfigEntry]:
    out = []
    for v in describe_topic_configs(overrides, dynamic_broker, static_broker):
        key = TOPIC_CONFIGS[v.name]
        out.append(ConfigEntry(v.name, v.value, v.source, key.type, False, key.doc, v.synonyms))
    return out


def broker_entries(
    dynamic_broker: Mapping[str, str], static_broker: Mapping[str, str]
) -> list[ConfigEntry]:
    entries: dict[str, ConfigEntry] = {}
    for name, key in BROKER_KEYS.items():
        if key.internal:
            continue
        if name in static_broker:
            entries[name] = ConfigEntry(name, static_broker[name],
                                        ConfigSource.STATIC_BROKER_CONFIG, key.type, True, key.doc)
        else:
            default = None if key.default is None else format_value(key, key.default)
            entries[name] = ConfigEntry(name, default, ConfigSource.DEFAULT_CONFIG, key.type,
                                        True, key.doc)
    for name, key in BROKER_CONFIGS.items():
        if name in entries:
            continue
        if name in static_broker:
            entries[name] = ConfigEntry(name, static_broker[name],
                                        ConfigSource.STATIC_BROKER_CONFIG, key.type, True, key.doc)
        else:
            entries[name] = ConfigEntry(name, format_value(key, key.default),
                                        ConfigSource.DEFAULT_CONFIG, key.type, True, key.doc)
    for name, (topic_key, scale) in BROKER_SYNONYM_OF.items():
        key = TOPIC_CONFIGS[topic_key]
        if name in dynamic_broker:
            value, source = dynamic_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG
        elif name in static_broker:
            value, source = static_broker[name], ConfigSource.STATIC_BROKER_CONFIG
        elif scale == 1:
            value, source = format_value(key, key.default), ConfigSource.DEFAULT_CONFIG
        elif scale == max(s.scale for s in key.synonyms) and key.default % scale == 0:
            # Kafka's default sits on the coarsest unit: log.retention.hours=168.
            value, source = str(key.default // scale), ConfigSource.DEFAULT_CONFIG
        else:
            value, source = None, ConfigSource.DEFAULT_CONFIG
        entries[name] = ConfigEntry(name, value, source, key.type, False, key.doc)
    return [entries[n] for n in sorted(entries)]
