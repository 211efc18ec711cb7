"""Broker configuration the Kafka way: ``server.properties`` keys, overrides, defaults.

``BrokerConfig.load(path, overrides)`` reads a Java-properties file (``key=value``
or ``key: value``, ``#``/``!`` comments, backslash line continuation) and then
``--override key=value`` pairs. Every known key has a static default (so
``make run`` needs no file) and a type; unknown keys are kept (Kafka warns and
ignores them) so topic-level ``log.*`` defaults can be passed to storage.
Values are kept as strings, the way DescribeConfigs reports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message says which key."""


# key -> (default, type, documentation). Types: int, long, bool, string, list, double.
BROKER_KEYS: dict[str, tuple[str | None, str, str]] = {
    "node.id": ("0", "int", "The id of this broker."),
    "broker.id": ("0", "int", "Alias of node.id."),
    "listeners": ("PLAINTEXT://127.0.0.1:9092", "list", "Addresses the broker binds."),
    "advertised.listeners": (None, "list", "Addresses given to clients; defaults to listeners."),
    "log.dirs": ("./data", "list", "Directories holding the partition logs."),
    "log.dir": ("./data", "string", "Used when log.dirs is not set."),
    "num.partitions": ("1", "int", "Partitions of an auto-created topic."),
    "default.replication.factor": ("1", "int", "Replication factor of auto-created topics."),
    "auto.create.topics.enable": ("true", "bool", "Create unknown topics on metadata requests."),
    "delete.topic.enable": ("true", "bool", "Allow DeleteTopics."),
    "socket.request.max.bytes": ("104857600", "int", "Largest request the broker reads."),
    "connections.max.idle.ms": ("600000", "long", "Idle connections are closed after this."),
    "queued.max.requests": ("500", "int", "In-flight requests per connection before reading pauses."),
    "offsets.topic.num.partitions": ("50", "int", "Partitions of __consumer_offsets."),
    "offsets.topic.replication.factor": ("1", "short", "Replication factor of __consumer_offsets."),
    "transaction.state.log.num.partitions": ("50", "int", "Partitions of __transaction_state."),
    "transaction.max.timeout.ms": ("900000", "int", "Largest transaction.timeout.ms a producer may ask for."),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "10000", "int", "How often open transactions are checked against their timeout."),
    "transactional.id.expiration.ms": ("604800000", "int", "Idle transactional ids are forgotten after this."),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "3600000", "int", "How often expired transactional ids are removed."),
    "producer.id.expiration.ms": ("86400000", "int", "Idle producer ids are forgotten by partitions after this."),
    "producer.id.expiration.check.interval.ms": ("600000", "int", "How often producer ids are expired."),
    "group.initial.rebalance.delay.ms": ("3000", "int", "Delay before the first rebalance."),
    "group.min.session.timeout.ms": ("6000", "int", "Shortest session timeout a member may ask for."),
    "group.max.session.timeout.ms": ("1800000", "int", "Longest session timeout a member may ask for."),
    "group.max.size": ("2147483647", "int", "Most members in one consumer group."),
    "offsets.retention.minutes": ("10080", "int", "How long an empty group keeps its offsets."),
    "offsets.retention.check.interval.ms": ("600000", "long", "How often offset retention runs."),
    "offset.metadata.max.bytes": ("4096", "int", "Largest metadata string of a committed offset."),
    "log.retention.check.interval.ms": ("300000", "long", "How often retention runs."),
    "log.flush.scheduler.interval.ms": ("9223372036854775807", "long", "How often flush.ms is checked."),
    "num.io.threads": ("8", "int", "Threads for blocking storage work."),
    "fetch.max.bytes": ("57671680", "int", "Largest fetch response."),
    "replica.fetch.wait.max.ms": ("500", "int", "Follower long-poll wait (replication later)."),
    "cluster.id": ("spool-cluster-0000000", "string", "The cluster id reported to clients."),
}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text into a dict (later keys win)."""
    out: dict[str, str] = {}
    logical: list[str] = []
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        lines.append("".join(logical))
        logical = []
    if logical:
        lines.append("".join(logical))
    for line in lines:
        seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
        if not seps:
            out[line.strip()] = ""
            continue
        i = min(seps)
        out[line[:i].strip()] = line[i + 1 :].strip()
    return out


@dataclass
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    result = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        if "://" not in item:
            raise ConfigError(f"listener {item!r} is not NAME://host:port")
        name, rest = item.split("://", 1)
        parts = urlsplit("//" + rest)
        try:
            port = parts.port
        except ValueError as e:
            raise ConfigError(f"listener {item!r} has a bad port") from e
        if port is None:
            raise ConfigError(f"listener {item!r} has no port")
        result.append(Listener(name.upper(), parts.hostname or "0.0.0.0", port))
    if not result:
        raise ConfigError("no listeners configured")
    return result


@dataclass
class BrokerConfig:
    """The broker's effective configuration: static defaults, then file, then overrides."""

    values: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # key -> STATIC_BROKER_CONFIG|DEFAULT

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        cfg = cls()
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
            cfg.update(parse_properties(text))
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not key=value")
            k, v = item.split("=", 1)
            cfg.update({k.strip(): v.strip()})
        cfg.validate()
        return cfg

    def update(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            self.values[k] = v
            self.sources[k] = "STATIC_BROKER_CONFIG"

    def get(self, key: str) -> str | None:
        if key in self.values:
            return self.values[key]
        if key == "node.id" and "broker.id" in self.values:
            return self.values["broker.id"]
        if key == "log.dirs" and "log.dir" in self.values:
            return self.values["log.dir"]
        if key == "advertised.listeners":
            return self.get("listeners")
        spec = BROKER_KEYS.get(key)
        return spec[0] if spec else None

    def get_int(self, key: str) -> int:
        v = self.get(key)
        try:
            return int(v)  # type: ignore[arg-type]
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{key}={v!r} is not an integer") from e

    def get_bool(self, key: str) -> bool:
        v = (self.get(key) or "").lower()
        if v not in ("true", "false"):
            raise ConfigError(f"{key}={v!r} is not true or false")
        return v == "true"

    def get_list(self, key: str) -> list[str]:
        return [s.strip() for s in (self.get(key) or "").split(",") if s.strip()]

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners") or "")

    @property
    def advertised_listeners(self) -> list[Listener]:
        return parse_listeners(self.get("advertised.listeners") or "")

    @property
    def log_dirs(self) -> list[str]:
        return self.get_list("log.dirs")

    def log_defaults(self) -> dict[str, str]:
        """Broker-level keys that set topic defaults (``log.*``, ``message.*``...)."""
        return {k: v for k, v in self.values.items() if k not in BROKER_KEYS}

    def validate(self) -> None:
        for key, (_, typ, _) in BROKER_KEYS.items():
            if key not in self.values:
                continue
            if typ in ("int", "long", "short"):
                self.get_int(key)
            elif typ == "bool":
                self.get_bool(key)
        self.listeners  # noqa: B018 - parse to validate
        self.advertised_listeners  # noqa: B018
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
