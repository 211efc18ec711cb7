"""The worker's configuration: Kafka Connect's worker keys, read and checked.

``WorkerConfig.load(path, overrides, *, standalone)`` reads a Java ``.properties`` file
(``path``; None: none) then ``overrides`` (``key=value`` strings, later ones win) and
checks them against Kafka Connect's worker keys (DistributedConfig, or StandaloneConfig
when ``standalone``); ``WorkerConfig.from_props(props, *, standalone)`` does the same for
a dict. A bad value or a missing required key raises ``api.ConfigError`` with Kafka's
messages (``Missing required configuration "group.id" which has no default value.``);
an unknown key raises ``ConfigError`` naming it (``spool connect`` exits 2), except the
prefixed keys passed on: ``producer.``, ``consumer.``, ``admin.``, the converters'
(``key.converter.``...), client security (``ssl.``, ``sasl.``), ``listeners.https.``,
``config.providers.``, ``metrics.`` and ``metric.``.

Required: distributed: ``group.id``, ``config.storage.topic``, ``offset.storage.topic``,
``status.storage.topic``; standalone: ``offset.storage.file.filename``. Defaults are
Kafka's except where Spool's differ, said here: ``listeners`` is
``http://127.0.0.1:8083``; ``*.storage.replication.factor`` is -1 (the broker's
``default.replication.factor``; Kafka's is 3, too many for a one-broker Spool);
``key.converter``/``value.converter`` are JsonConverter (Kafka 3.x has no default);
``connect.protocol`` is accepted but only ``eager`` rebalancing is done (everything
stops, then what is assigned starts), so ``scheduled.rebalance.max.delay.ms`` has no
effect.

Reading it: ``get(key)`` (typed: int, bool, list, str; the default when unset),
``raw`` (the given strings), ``client_config(role)`` for confluent-kafka (role
``producer``, ``consumer`` or ``admin``: ``bootstrap.servers``, ``client.id``, the
security keys as librdkafka names them (``sasl.jaas.config``'s username and password
become ``sasl.username``/``sasl.password``, a PEM trust store ``ssl.ca.location``
(a PKCS12 trust store is refused at load: librdkafka reads PEM only), a PKCS12 key store
``ssl.keystore.*``), then
the role's ``<role>.``-prefixed keys with the prefix stripped, which win),
``internal_client_config()`` (the same without any role's keys: the internal topics'
clients), ``converter_config(which)`` (``key``/``value``/``header``: the converter's own keys,
prefix stripped), ``security`` (a ``spool.security.client_config.ClientSecurity`` for
spool.net), ``rest_listen`` ``(host, port)`` of the first listener, ``rest_url``
(``http://host:port`` as advertised: ``rest.advertised.*`` else the listener's, with
0.0.0.0/empty host made the machine's name), ``worker_id`` (``host:port`` of
``rest_url``). Immutable once loaded; safe to share between threads.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spool.connect.api import (
    BOOLEAN,
    CLASS,
    HIGH,
    INT,
    LIST,
    LONG,
    LOW,
    MEDIUM,
    SHORT,
    STRING,
    ConfigDef,
    ConfigError,
    at_least,
    in_values,
    parse_value,
)
from spool.security.client_config import ClientConfigError, ClientSecurity, parse_jaas
from spool.util.properties import parse_properties

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
ROLES = ("producer", "consumer", "admin")

# prefixes whose keys are passed on, not checked here
PASSTHROUGH_PREFIXES = ("producer.", "consumer.", "admin.", "key.converter.",
                        "value.converter.", "header.converter.", "ssl.", "sasl.",
                        "listeners.https.", "admin.listeners.https.", "config.providers.",
                        "metrics.", "metric.", "rest.extension.")
# client keys (Kafka's CommonClientConfigs in WorkerConfig) passed to every client
CLIENT_KEYS = ("client.dns.lookup", "metadata.max.age.ms", "reconnect.backoff.ms",
               "reconnect.backoff.max.ms", "retry.backoff.ms", "request.timeout.ms",
               "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
               "connections.max.idle.ms", "receive.buffer.bytes", "send.buffer.bytes",
               "retry.backoff.max.ms", "metadata.recovery.strategy",
               "metadata.recovery.rebootstrap.trigger.ms", "enable.metrics.push")
# librdkafka's names for the Java clients' (None: not passed on: librdkafka has none)
_LIBRDKAFKA = {"client.dns.lookup": None, "reconnect.backoff.ms": "reconnect.backoff.ms",
               "reconnect.backoff.max.ms": "reconnect.backoff.max.ms",
               "retry.backoff.ms": "retry.backoff.ms",
               "request.timeout.ms": None, "socket.connection.setup.timeout.ms":
               "socket.connection.setup.timeout.ms",
               "socket.connection.setup.timeout.max.ms": None,
               "connections.max.idle.ms": "connections.max.idle.ms",
               "receive.buffer.bytes": "socket.receive.buffer.bytes",
               "send.buffer.bytes": "socket.send.buffer.bytes",
               "metadata.max.age.ms": "metadata.max.age.ms",
               "retry.backoff.max.ms": "retry.backoff.max.ms",
               "metadata.recovery.strategy": "metadata.recovery.strategy",
               "metadata.recovery.rebootstrap.trigger.ms": None,
               "enable.metrics.push": "enable.metrics.push"}


def _common() -> ConfigDef:
    d = ConfigDef()
    d.define("bootstrap.servers", LIST, "localhost:9092", HIGH,
             "host:port pairs of the Spool (Kafka) brokers to bootstrap from")
    d.define("client.id", STRING, "", LOW, "A prefix of the clients' ids")
    d.define("key.converter", CLASS, JSON_CONVERTER, HIGH,
             "Converter class for record keys (connectors may override it)")
    d.define("value.converter", CLASS, JSON_CONVERTER, HIGH,
             "Converter class for record values (connectors may override it)")
    d.define("header.converter", CLASS, SIMPLE_HEADER_CONVERTER, LOW,
             "HeaderConverter class for record headers")
    d.define("offset.flush.interval.ms", LONG, 60000, LOW,
             "How often source tasks' offsets (and sink tasks' consumer offsets) are "
             "committed", validator=at_least(0))
    d.define("offset.flush.timeout.ms", LONG, 5000, LOW,
             "How long an offset flush may take before it is cancelled",
             validator=at_least(0))
    d.define("task.shutdown.graceful.timeout.ms", LONG, 5000, LOW,
             "How long tasks are given to stop before they are abandoned",
             validator=at_least(0))
    d.define("listeners", LIST, "http://127.0.0.1:8083", LOW,
             "The REST API's listeners (http://host:port)")
    d.define("rest.host.name", STRING, None, LOW, "Deprecated: use listeners")
    d.define("rest.port", INT, None, LOW, "Deprecated: use listeners")
    d.define("rest.advertised.host.name", STRING, None, LOW,
             "The host name other workers and statuses use for this worker")
    d.define("rest.advertised.port", INT, None, LOW, "The advertised REST port")
    d.define("rest.advertised.listener", STRING, None, LOW,
             "http or https: which listener is advertised",
             validator=_optional(in_values("http", "https")))
    d.define("access.control.allow.origin", STRING, "", LOW, "CORS origins (not served)")
    d.define("access.control.allow.methods", STRING, "", LOW, "CORS methods (not served)")
    d.define("admin.listeners", LIST, None, LOW, "Listeners of the admin endpoints")
    d.define("rest.extension.classes", LIST, "", LOW, "REST extensions (none supported)")
    d.define("response.http.headers.config", STRING, "", LOW, "Extra response headers")
    d.define("plugin.path", LIST, None, LOW,
             "Accepted for Kafka's files: plugins are found through Python entry points")
    d.define("plugin.discovery", STRING, "hybrid_warn", LOW,
             "Kafka's plugin discovery mode (entry points are always used here)",
             validator=in_values("only_scan", "hybrid_warn", "hybrid_fail", "service_load"))
    d.define("config.providers", LIST, "", LOW, "Config providers (none supported)")
    d.define("connector.client.config.override.policy", STRING, "All", MEDIUM,
             "Which producer./consumer./admin.override.* keys connectors may set",
             validator=in_values("All", "None", "Principal"))
    d.define("topic.creation.enable", BOOLEAN, True, LOW,
             "Whether source connectors may create their topics")
    d.define("security.protocol", STRING, "PLAINTEXT", MEDIUM,
             "How the clients connect to the brokers",
             validator=in_values("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    d.define("metrics.recording.level", STRING, "INFO", LOW, "Accepted, unused")
    d.define("auto.include.jmx.reporter", BOOLEAN, True, LOW, "Accepted, unused")
    for key in CLIENT_KEYS:
        d.define(key, STRING, None, LOW, "A client setting passed to every client")
    return d


def _distributed() -> ConfigDef:
    d = _common()
    d.define("group.id", STRING, importance=HIGH,
             doc="The Connect cluster this worker belongs to (its group)")
    d.define("config.storage.topic", STRING, importance=HIGH,
             doc="The topic connector configurations are stored in")
    d.define("offset.storage.topic", STRING, importance=HIGH,
             doc="The topic source connectors' offsets are stored in")
    d.define("status.storage.topic", STRING, importance=HIGH,
             doc="The topic connector and task statuses are stored in")
    for what, partitions in (("config", None), ("offset", 25), ("status", 5)):
        d.define(f"{what}.storage.replication.factor", SHORT, -1, LOW,
                 f"Replication factor of {what}.storage.topic (-1: the broker's default)",
                 validator=_replication)
        if partitions is not None:
            d.define(f"{what}.storage.partitions", INT, partitions, LOW,
                     f"Partitions of {what}.storage.topic (-1: the broker's default)",
                     validator=_partitions)
    d.define("session.timeout.ms", INT, 10000, HIGH,
             "A worker not heard from for this long leaves the group")
    d.define("heartbeat.interval.ms", INT, 3000, HIGH, "How often workers heartbeat")
    d.define("rebalance.timeout.ms", INT, 60000, HIGH,
             "How long workers have to rejoin during a rebalance")
    d.define("worker.sync.timeout.ms", INT, 3000, MEDIUM,
             "How long a worker waits to catch up with the config topic")
    d.define("worker.unsync.backoff.ms", INT, 300000, MEDIUM,
             "How long a worker out of sync waits before rejoining")
    d.define("scheduled.rebalance.max.delay.ms", INT, 300000, LOW,
             "Accepted; rebalancing is eager here, so it has no effect")
    d.define("connect.protocol", STRING, "sessioned", LOW,
             "Accepted; rebalancing is eager (Kafka's default protocol) whatever it says",
             validator=in_values("eager", "compatible", "sessioned"))
    d.define("exactly.once.source.support", STRING, "disabled", HIGH,
             "KIP-618: source tasks write their records and offsets in one transaction "
             "when enabled", validator=in_values("disabled", "preparing", "enabled"))
    d.define("inter.worker.key.generation.algorithm", STRING, "HmacSHA256", LOW, "Unused")
    d.define("inter.worker.key.size", INT, None, LOW, "Unused")
    d.define("inter.worker.key.ttl.ms", INT, 3600000, LOW, "Unused")
    d.define("inter.worker.signature.algorithm", STRING, "HmacSHA256", LOW, "Unused")
    d.define("inter.worker.verification.algorithms", LIST, "HmacSHA256", LOW, "Unused")
    return d


def _standalone() -> ConfigDef:
    d = _common()
    d.define("offset.storage.file.filename", STRING, importance=HIGH,
             doc="The file source connectors' offsets are stored in")
    return d


def _optional(check: Any) -> Any:
    def run(name: str, value: Any) -> None:
        if value is not None:
            check(name, value)
    return run


def _replication(name: str, value: int) -> None:
    if value < 1 and value != -1:
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "Replication factor must be positive, or -1 to use the "
                                  "broker's default"]})


def _partitions(name: str, value: int) -> None:
    if value < 1 and value != -1:
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "Number of partitions must be positive, or -1 to use the "
                                  "broker's default"]})


DISTRIBUTED = _distributed()
STANDALONE = _standalone()


class WorkerConfig:
    """A checked worker configuration (module doc)."""

    def __init__(self, raw: Mapping[str, str], values: dict[str, Any], standalone: bool,
                 security: ClientSecurity) -> None:
        self.raw = dict(raw)
        self._values = values
        self.standalone = standalone
        self.security = security

    # ---- loading

    @classmethod
    def load(cls, path: str | None, overrides: Iterable[str] = (), *,
             standalone: bool) -> WorkerConfig:
        props: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"cannot read worker config {path}: "
                                  f"{getattr(e, 'strerror', None) or e}") from None
            props.update(parse_properties(text))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r}: expected key=value")
            props[key.strip()] = value
        return cls.from_props(props, standalone=standalone)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], *, standalone: bool) -> WorkerConfig:
        definition = STANDALONE if standalone else DISTRIBUTED
        raw = {k: str(v) for k, v in props.items()}
        errors: dict[str, list[str]] = {}
        unknown = sorted(k for k in raw if k not in definition.keys
                         and not k.startswith(PASSTHROUGH_PREFIXES))
        for k in unknown:
            mode = "standalone" if standalone else "distributed"
            errors[k] = [f"Unknown configuration '{k}' (not a {mode} worker key)"]
        values = definition.validate(raw)
        for name, cv in values.items():
            if cv.errors:
                errors[name] = cv.errors
        try:
            security = ClientSecurity.from_properties(
                {k: v for k, v in raw.items()
                 if k == "security.protocol" or k.startswith(("ssl.", "sasl."))})
        except ClientConfigError as e:
            errors.setdefault("security.protocol", []).append(str(e))
            security = ClientSecurity()
        if str(raw.get("ssl.truststore.type", "")).strip().upper() == "PKCS12":
            errors.setdefault("ssl.truststore.type", []).append(
                "Invalid value PKCS12 for configuration ssl.truststore.type: the worker's "
                "clients (librdkafka) read PEM trust stores only")
        if errors:
            raise ConfigError(errors)
        typed = {n: cv.value if n in raw or cv.value is None
                 else parse_value(definition.keys[n], cv.value) for n, cv in values.items()}
        config = cls(raw, typed, standalone, security)
        config._check_listeners()
        return config

    def _check_listeners(self) -> None:
        for listener in self.get("listeners") or []:
            u = urlsplit(listener)
            if u.scheme not in ("http", "https") or u.port is None:
                raise ConfigError({"listeners": [
                    f"Invalid value {listener} for configuration listeners: "
                    "expected http://host:port"]})

    # ---- reading

    def get(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        return self.raw.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def client_config(self, role: str) -> dict[str, Any]:
        """confluent-kafka's configuration for a client of ``role`` (module doc)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        prefix = f"{role}."
        return {**self.internal_client_config(),
                **{k[len(prefix):]: v for k, v in self.raw.items() if k.startswith(prefix)}}

    def internal_client_config(self) -> dict[str, Any]:
        """The clients of the internal topics: bootstrap, client keys and security only
        (no ``producer.``/``consumer.``/``admin.`` keys, as Kafka's KafkaBasedLog)."""
        conf: dict[str, Any] = {"bootstrap.servers": ",".join(self.get("bootstrap.servers"))}
        if self.get("client.id"):
            conf["client.id"] = self.get("client.id")
        for key in CLIENT_KEYS:
            rd = _LIBRDKAFKA.get(key)
            if key in self.raw and rd is not None:
                conf[rd] = self.raw[key]
        conf.update(librdkafka_security(self.raw))
        return conf

    def converter_config(self, which: str) -> dict[str, str]:
        """The ``<which>.converter.*`` keys with the prefix stripped."""
        prefix = f"{which}.converter."
        return {k[len(prefix):]: v for k, v in self.raw.items() if k.startswith(prefix)}

    @property
    def rest_listen(self) -> tuple[str, int]:
        listeners = self.get("listeners")
        if "listeners" not in self.raw and ("rest.port" in self.raw
                                            or "rest.host.name" in self.raw):
            return (self.get("rest.host.name") or "127.0.0.1", self.get("rest.port") or 8083)
        u = urlsplit(listeners[0])
        return (u.hostname or "0.0.0.0", u.port if u.port is not None else 8083)

    @property
    def rest_url(self) -> str:
        host, port = self.rest_listen
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        host = self.get("rest.advertised.host.name") or host
        port = self.get("rest.advertised.port") or port
        scheme = self.get("rest.advertised.listener") or "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    @property
    def worker_id(self) -> str:
        u = urlsplit(self.rest_url)
        return f"{u.hostname}:{u.port}"

    def __repr__(self) -> str:
        mode = "standalone" if self.standalone else f"group {self.get('group.id')}"
        return f"WorkerConfig({mode}, bootstrap {self.get('bootstrap.servers')})"


def librdkafka_security(props: Mapping[str, str]) -> dict[str, Any]:
    """Java client security keys (``security.protocol``, ``ssl.*``, ``sasl.*``) as
    librdkafka's: PLAIN/SCRAM credentials from ``sasl.jaas.config``, a PEM trust store as
    ``ssl.ca.location``, a PKCS12 key store as ``ssl.keystore.*``; keys librdkafka has no
    equivalent of are left out."""
    protocol = str(props.get("security.protocol", "PLAINTEXT")).strip().upper()
    conf: dict[str, Any] = {}
    if protocol == "PLAINTEXT":
        return conf
    conf["security.protocol"] = protocol.lower()
    if protocol in ("SSL", "SASL_SSL"):
        if props.get("ssl.truststore.location"):
            conf["ssl.ca.location"] = props["ssl.truststore.location"]
        if props.get("ssl.keystore.location"):
            conf["ssl.keystore.location"] = props["ssl.keystore.location"]
            conf["ssl.keystore.password"] = props.get("ssl.keystore.password", "")
        if "ssl.endpoint.identification.algorithm" in props:
            alg = props["ssl.endpoint.identification.algorithm"].strip()
            conf["ssl.endpoint.identification.algorithm"] = alg or "none"
        if props.get("ssl.cipher.suites"):
            conf["ssl.cipher.suites"] = props["ssl.cipher.suites"]
    if protocol.startswith("SASL_"):
        conf["sasl.mechanism"] = props.get("sasl.mechanism", "GSSAPI")
        if props.get("sasl.jaas.config"):
            opts = parse_jaas(props["sasl.jaas.config"])[0].options
            if "username" in opts:
                conf["sasl.username"] = opts["username"]
            if "password" in opts:
                conf["sasl.password"] = opts["password"]
    return conf


__all__ = ["WorkerConfig", "DISTRIBUTED", "STANDALONE", "JSON_CONVERTER",
           "SIMPLE_HEADER_CONVERTER", "PASSTHROUGH_PREFIXES", "librdkafka_security"]
