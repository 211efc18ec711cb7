"""What DescribeConfigs shows: every key with its value, source, synonyms, type, doc.

Topic keys come from ``spool.storage.config.TOPIC_CONFIGS`` resolved
through topic overrides, dynamic broker values, static broker values and
defaults. Broker keys are the broker's own (``BROKER_KEYS``), the storage
layer's broker-only keys, and the broker synonyms of every topic key
(``log.retention.ms``...), with Kafka's sources and synonyms; which of them
AlterConfigs may change is ``spool.broker.dynamic_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spool.broker.config import BROKER_KEYS
from spool.broker.dynamic_config import LISTENER_PREFIX, is_sensitive, update_mode
from spool.storage.config import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_OF,
    TOPIC_CONFIGS,
    ConfigSource,
    describe_topic_configs,
    format_value,
)


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    type: str
    read_only: bool = False
    doc: str = ""
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    sensitive: bool = False


def topic_entries(
    overrides: Mapping[str, str],
    dynamic_broker: Mapping[str, str],
    static_broker: Mapping[str, str],
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    out = []
    for v in describe_topic_configs(overrides, dynamic_broker, static_broker, dynamic_default):
        key = TOPIC_CONFIGS[v.name]
        out.append(ConfigEntry(v.name, v.value, v.source, key.type, False, key.doc, v.synonyms))
    return out


def _default(name: str) -> str | None:
    """A broker key's static default as DescribeConfigs shows it (None: no default)."""
    if name in BROKER_SYNONYM_OF:
        topic_key, scale = BROKER_SYNONYM_OF[name]
        key = TOPIC_CONFIGS[topic_key]
        if name != key.synonyms[-1].name:
            return None  # Kafka's default sits on the last synonym: log.retention.hours=168
        return str(key.default // scale) if scale != 1 else format_value(key, key.default)
    key = BROKER_KEYS.get(name) or BROKER_CONFIGS.get(name)
    if key is None or key.default is None:
        return None
    return format_value(key, key.default)


def _synonym_names(name: str) -> list[str]:
    """Kafka's ``brokerConfigSynonyms``: the names one setting may have, highest first."""
    m = LISTENER_PREFIX.fullmatch(name)
    if m is not None:
        return [name, m.group(2)]
    if name in BROKER_SYNONYM_OF and name != "log.flush.scheduler.interval.ms":
        return [s.name for s in TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]].synonyms]
    return [name]


def _key_type(name: str) -> str:
    m = LISTENER_PREFIX.fullmatch(name)
    base = m.group(2) if m else name
    if base in BROKER_SYNONYM_OF:
        return TOPIC_CONFIGS[BROKER_SYNONYM_OF[base][0]].type
    key = BROKER_KEYS.get(base) or BROKER_CONFIGS.get(base)
    return "unknown" if key is None else key.type


def _doc(name: str) -> str:
    if name in BROKER_SYNONYM_OF:
        return TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]].doc
    key = BROKER_KEYS.get(name) or BROKER_CONFIGS.get(name)
    return "" if key is None else key.doc


def broker_entries(
    name: str, node: Mapping[str, str], cluster_default: Mapping[str, str],
    static_broker: Mapping[str, str],
) -> list[ConfigEntry]:
    """DescribeConfigs of the BROKER resource ``name``, as Kafka's ``ConfigHelper``.

    This broker's id: every key with its value and source (its own dynamic value
    DYNAMIC_BROKER_CONFIG, the cluster-wide one DYNAMIC_DEFAULT_BROKER_CONFIG, its
    properties STATIC_BROKER_CONFIG, else DEFAULT_CONFIG) and the synonyms Kafka lists
    (``log.retention.ms``, ``.minutes``, ``.hours`` in each layer, highest first). ""
    (the cluster-wide default): only the keys set there, with that layer's synonyms.
    Keys nobody defines that a dynamic layer holds are listed too, hidden, as Kafka
    does (type unknown: sensitive); so are passwords. ``read_only``: the key is not
    dynamic."""
    layers = ((node, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
              (static_broker, ConfigSource.STATIC_BROKER_CONFIG))
    if name:
        names = {n for n, k in BROKER_KEYS.items() if not k.internal}
        names |= set(BROKER_CONFIGS) | set(BROKER_SYNONYM_OF) | set(node) | set(cluster_default)
        names |= {k for k in static_broker if LISTENER_PREFIX.fullmatch(k)}
    else:
        names = set(cluster_default)
    out = []
    for n in sorted(names):
        sensitive = is_sensitive(n)
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        for layer, source in layers:
            synonyms += [(s, None if sensitive else layer[s], source)
                         for s in _synonym_names(n) if s in layer]
        for s in _synonym_names(n):
            default = _default(s)
            if default is not None:
                synonyms.append((s, None if sensitive else default, ConfigSource.DEFAULT_CONFIG))
        while synonyms and synonyms[0][0] != n:  # Kafka's dropWhile
            synonyms.pop(0)
        if not name:
            synonyms = [s for s in synonyms
                        if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        value = next((v for s, v, _ in synonyms if s == n), None)
        if value is None and not synonyms and not sensitive:
            value = _default(n)
        out.append(ConfigEntry(n, value, source, _key_type(n), not update_mode(n), _doc(n),
                               tuple(synonyms), sensitive))
    return out
