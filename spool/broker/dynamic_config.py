"""Dynamic broker configs: which keys AlterConfigs may change on a BROKER resource, as Kafka 4.2.

A BROKER resource is a node id (that broker's own values, DYNAMIC_BROKER_CONFIG)
or "" (the cluster-wide default every broker reads, DYNAMIC_DEFAULT_BROKER_CONFIG).
Each key's update mode is in the one config table (``ConfigKey.dynamic``,
``spool.broker.config``): Kafka's ``DynamicBrokerConfig`` reconfigurable sets, the
first broker synonym of every topic key (``log.retention.ms``, ``message.max.bytes``:
DynamicLogConfig) and ``listener.name.<listener>.<key>`` for a key a listener
reconfigures (per broker; ``<listener>.<mechanism>.sasl.jaas.config`` too).

``check_broker_configs`` is Kafka's broker-side check (``ConfigAdminManager``,
``DynamicBrokerConfig.validateConfigs``) of the values a resource would hold,
INVALID_REQUEST with Kafka's messages:

- a name that is neither "" nor this broker's id: "Unexpected broker id, expected
  0, but received 1" (a client sends a broker's keys to that broker);
- a key that needs a restart: "Cannot update these configs dynamically: Set(log.dirs)"
  (Spool's read-only keys and Kafka's others, ``KAFKA_READ_ONLY_KEYS``);
- a TLS store key without a listener prefix: "These security configs can be
  dynamically updated only per-listener using the listener prefix: Set(...)";
- a bad value (Spool's wording: the key, the value and what is allowed);
- a per-broker key on "": "Cannot update these configs at default cluster level,
  broker id must be specified: Set(...)";
- a thread count below half or above double the current one (Kafka's
  DynamicThreadPool rule).

A key nobody defines is accepted, as Kafka keeps custom keys for plugins; the
broker log names it (with a "did you mean" hint). ``apply_changes`` acts on what
the running broker can take (``max.connections``, ``max.connections.per.ip``; topic
defaults such as ``log.retention.ms`` and ``message.max.bytes`` reach every log
through the log manager; the cleaner reads its buffer and backoff keys each time).
TLS listeners' keys (``listener.name.<l>.ssl.keystore.location``...) are checked by
building the context (INVALID_REQUEST "Validation of dynamic config update of
SSLFactory failed: ...") and applied to new connections (``_reload_tls``); Kafka's
check that a new certificate keeps the old one's subject and names
(``ssl.allow.dn.changes``) is not made.
``note_changes`` logs each change a broker sees: applied, or stored only
(Spool does not act on it: SASL, quotas, thread pools, listeners...).
Password values never reach the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from spool.broker.config import (
    KAFKA_READ_ONLY_KEYS,
    LISTENER_MECHANISM_CONFIGS,
    LISTENER_PREFIX,
    TLS_PROTOCOLS,
    BrokerConfig,
    ConfigError,
    all_known_keys,
    known_key,
)
from spool.broker.sasl_listener import is_sasl_key, sasl_listeners
from spool.protocol.errors import Errors, KafkaError
from spool.security.tls import KEYS as TLS_KEYS
from spool.storage.config import (
    CLUSTER_WIDE,
    DYNAMIC_TOPIC_DEFAULTS,
    PER_BROKER,
    did_you_mean,
    parse_value,
)

log = logging.getLogger("spool.broker.dynamic_config")

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix
LISTENER_ONLY = frozenset((
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"))
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    ("max.connections", "max.connection.creation.rate", "num.network.threads"))
THREAD_POOLS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                "background.threads")


def _base(name: str) -> str | None:
    """The key a ``listener.name.<listener>.`` name sets, or None if not prefixed."""
    m = LISTENER_PREFIX.fullmatch(name)
    if m is None:
        return None
    base = m.group(2)
    return next((k for k in LISTENER_MECHANISM_CONFIGS if base.endswith("." + k)), base)


def update_mode(name: str) -> str:
    """Kafka 4.2's update mode of a broker key: "" (read-only), per-broker, cluster-wide."""
    base = _base(name)
    if base is not None:
        if base in LISTENER_MECHANISM_CONFIGS or update_mode(base):
            return CLUSTER_WIDE if base in CLUSTER_LEVEL_LISTENER_CONFIGS else PER_BROKER
        return ""
    if name in DYNAMIC_TOPIC_DEFAULTS:
        return CLUSTER_WIDE
    key = known_key(name)
    return key.dynamic if key is not None else ""


def is_known(name: str) -> bool:
    """A key Kafka 4.2 or Spool defines (else a custom key, kept for plugins)."""
    base = _base(name)
    key = base if base is not None else name
    return known_key(key) is not None or key in KAFKA_READ_ONLY_KEYS or (
        base in LISTENER_MECHANISM_CONFIGS)


def _tls_key(name: str) -> bool:
    """A key a TLS listener's context is built from (listener-prefixed or not)."""
    return (_base(name) or name) in TLS_KEYS


def is_applied(name: str) -> bool:
    """Spool acts on a change of this dynamic key while it runs."""
    if name in DYNAMIC_TOPIC_DEFAULTS or _tls_key(name) or is_sasl_key(name):
        return True
    key = known_key(name)
    return key is not None and key.applied


def is_sensitive(name: str) -> bool:
    """A password, or a key Spool has no type for: never shown, as Kafka hides a key of
    unknown type."""
    key = known_key(_base(name) or name)
    return key is None or key.type == "password"


def _set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def _refuse(names: list[str], message: str) -> None:
    if names:
        raise KafkaError(Errors.INVALID_REQUEST, f"{message}: {_set(names)}")


def check_resource_name(name: str, node_id: int) -> None:
    """A BROKER resource this broker may change: "" or its own id (Kafka's messages)."""
    if not name:
        return
    try:
        given = int(name)
    except ValueError:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Node id must be an integer, but it is: {name}") from None
    if given != node_id:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"Unexpected broker id, expected {node_id}, but received {name}")


def check_broker_configs(config: BrokerConfig, current: Mapping[str, str], name: str,
                         props: Mapping[str, str]) -> None:
    """Kafka's checks (module doc) of ``props``, the values the BROKER resource ``name``
    would hold; ``current`` is this broker's dynamic config now (both layers merged)."""
    _refuse([k for k in props if is_known(k) and not update_mode(k)],
            "Cannot update these configs dynamically")
    _refuse([k for k in props if k in LISTENER_ONLY],
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix")
    for k, v in props.items():
        key = known_key(_base(k) or k)
        if key is not None:
            try:
                parse_value(key, v, k)
            except KafkaError as e:
                raise KafkaError(Errors.INVALID_REQUEST, e.message) from None
    if not name:
        _refuse([k for k in props if update_mode(k) == PER_BROKER],
                "Cannot update these configs at default cluster level, broker id must be "
                "specified")
    for k in THREAD_POOLS:
        if k in props:
            _check_thread_count(k, int(props[k]), int(current.get(k) or config.get(k) or 1))
    if any(_tls_key(k) for k in props):
        _check_tls(config, {**current, **props})
    if any(is_sasl_key(k) for k in props):
        try:
            sasl_listeners(config, dynamic={**current, **props})
        except ConfigError as e:
            raise KafkaError(Errors.INVALID_REQUEST, f"Validation of dynamic config update "
                             f"of SaslChannelBuilder failed: {e}") from None


def _check_tls(config: BrokerConfig, dynamic: Mapping[str, str]) -> None:
    """Each TLS listener's context builds with the new values (Kafka validates the new
    keystore and truststore before accepting them)."""
    for lst in config.listeners:
        if lst.protocol in TLS_PROTOCOLS:
            try:
                config.server_tls(lst, dynamic)
            except ConfigError as e:
                raise KafkaError(Errors.INVALID_REQUEST, f"Validation of dynamic config update "
                                 f"of SSLFactory failed: {e}") from None


def _reload_tls(broker, old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """Rebuild the TLS listeners' contexts when a key they read changed: new connections
    get the new keystore, truststore, client auth...; open ones keep theirs (as Kafka).
    A context that does not build keeps the old one, logged."""
    server = getattr(broker, "server", None)
    if server is None or not server.tls:
        return
    if not any(_tls_key(k) and old.get(k) != new.get(k) for k in {*old, *new}):
        return
    for lst in broker.config.listeners:
        if lst.name in server.tls:
            try:
                server.tls[lst.name] = broker.config.server_tls(lst, new)
            except ConfigError as e:
                log.error("broker %d: TLS settings of listener %s not changed: %s",
                          broker.node_id, lst.name, e)
            else:
                log.info("broker %d: listener %s: new TLS settings for new connections",
                         broker.node_id, lst.name)


def _reload_sasl(broker, old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """Rebuild the SASL listeners' settings when a key they read changed (new connections
    get them). Settings that do not build keep the old ones, logged."""
    server = getattr(broker, "server", None)
    dispatcher = getattr(server, "dispatcher", None)
    if dispatcher is None or not getattr(dispatcher, "sasl", None):
        return
    if not any(is_sasl_key(k) and old.get(k) != new.get(k) for k in {*old, *new}):
        return
    try:
        dispatcher.reload_sasl(new)
    except ConfigError as e:
        log.error("broker %d: SASL settings not changed: %s", broker.node_id, e)
        return
    server.frame_limits = dict(dispatcher.frame_limits)
    log.info("broker %d: new SASL settings for new connections", broker.node_id)


def _check_thread_count(name: str, new: int, old: int) -> None:
    """Kafka's DynamicThreadPool rule."""
    message = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        raise KafkaError(Errors.INVALID_REQUEST, f"{message}, value should be at least 1")
    if new < old / 2:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"{message}, value should be at least half the current value {old}")
    if new > old * 2:
        raise KafkaError(Errors.INVALID_REQUEST, f"{message}, value should not be greater "
                         f"than double the current value {old}")


def apply_changes(broker, old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """This broker's dynamic config (both layers merged) went from ``old`` to ``new``: act on
    what the broker itself reads while running (the connection limits; the topic defaults
    reach the logs through the log manager), then ``note_changes``."""
    server = getattr(broker, "server", None)
    limits = ("max.connections", "max.connections.per.ip")
    if server is not None and any(old.get(k) != new.get(k) for k in limits):
        current = [int(new.get(k) or broker.config.get(k)) for k in limits]
        server.set_connection_limits(*current)
    rate = "max.connection.creation.rate"
    if server is not None and old.get(rate) != new.get(rate):
        server.set_connection_creation_rate(
            int(new.get(rate) or broker.config.get(rate)),
            broker.config.get_int("quota.window.num"),
            broker.config.get_int("quota.window.size.seconds"))
    _reload_tls(broker, old, new)
    _reload_sasl(broker, old, new)
    note_changes(broker.node_id, old, new)


def note_changes(node_id: int, old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """Log each change of this broker's dynamic config (both layers merged): applied, or
    stored and reported only; unknown keys with a hint."""
    for k in sorted(set(old) | set(new)):
        if old.get(k) == new.get(k):
            continue
        value = "(deleted)" if k not in new else (
            "[hidden]" if is_sensitive(k) else new[k])
        if not is_known(k):
            hint = did_you_mean(k, all_known_keys())
            log.warning("broker %d: dynamic config %s=%s is not a known config: kept for "
                        "plugins, Spool does not read it%s", node_id, k, value,
                        f" (did you mean {hint}?)" if hint else "")
        elif is_applied(k):
            log.info("broker %d: dynamic config %s=%s applied", node_id, k, value)
        else:
            log.warning("broker %d: dynamic config %s=%s is stored and reported, but Spool "
                        "does not act on it", node_id, k, value)
