"""The cluster view of a broker's configuration: roles, quorum, listeners (KRaft's rules).

``ClusterConfig.of(config)`` parses the keys that place a node in a cluster
and checks them together the way Kafka's ``KafkaConfig.validateValues`` does,
with Kafka's messages; ``BrokerConfig.validate`` calls it, so a loaded
``BrokerConfig`` always has a valid ``config.cluster``.

Two modes:

- ``process.roles`` unset: the single node Spool always was (``make run``).
  No quorum keys may be set; every listener is a broker listener; no format
  step. ``ClusterConfig.kraft`` is False.
- ``process.roles`` = ``broker``, ``controller`` or ``broker,controller``:
  KRaft. ``node.id`` is required; ``controller.quorum.voters``
  (``{id}@{host}:{port},...``) or ``controller.quorum.bootstrap.servers``
  must name the controllers; a controller must be a voter and must listen on
  its ``controller.listener.names``; a broker-only node must not. Listener
  names in ``controller.listener.names`` map to PLAINTEXT unless
  ``listener.security.protocol.map`` is set explicitly (Kafka's default).
  The broker's ``inter.broker.listener.name`` (or the listener named after
  ``security.inter.broker.protocol``; default ``PLAINTEXT``) must be one of its
  advertised broker listeners.

Not supported yet, refused with a message: a controller without
``controller.quorum.voters`` (a dynamic quorum, KIP-853), a security
protocol not in ``SUPPORTED_PROTOCOLS`` (for controller listeners too), advertising
0.0.0.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spool.broker.config import SUPPORTED_PROTOCOLS, ConfigError, Listener
from spool.broker.peer_security import inter_broker_listener

if TYPE_CHECKING:
    from spool.broker.config import BrokerConfig

BROKER = "broker"
CONTROLLER = "controller"
PROCESS_ROLES = (BROKER, CONTROLLER)

# Kafka's Utils.HOST_PORT_PATTERN and VALID_HOST_CHARACTERS
_HOST_PORT = re.compile(r"^(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)$")
_FORM = "Each entry should be in the form `{id}@{host}:{port}`."


@dataclass(frozen=True)
class ClusterConfig:
    """Where this node sits in the cluster; every field already validated.

    ``voters`` keeps the order of ``controller.quorum.voters``. Listener lists
    are ``spool.broker.config.Listener`` (name, host, port, protocol). Times
    are milliseconds.
    """

    process_roles: frozenset[str]
    node_id: int
    voters: dict[int, tuple[str, int]]
    bootstrap_servers: list[tuple[str, int]]
    listeners: list[Listener]
    advertised_listeners: list[Listener]  # advertised.listeners, else listeners
    controller_listener_names: list[str]
    inter_broker_listener_name: str
    rack: str | None
    metadata_log_dir: str  # metadata.log.dir, else the first of log.dirs
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    initial_broker_registration_timeout_ms: int
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    metadata_max_idle_interval_ms: int
    metadata_snapshot_max_interval_ms: int
    metadata_snapshot_max_new_record_bytes: int

    # ---- roles

    @property
    def kraft(self) -> bool:
        """True when ``process.roles`` is set; False for the single node."""
        return bool(self.process_roles)

    @property
    def is_broker(self) -> bool:
        """Serves clients: the single node, or ``broker`` in ``process.roles``."""
        return not self.process_roles or BROKER in self.process_roles

    @property
    def is_controller(self) -> bool:
        """A voter of the KRaft quorum (``controller`` in ``process.roles``)."""
        return CONTROLLER in self.process_roles

    # ---- listeners

    def is_controller_listener(self, name: str) -> bool:
        return name.upper() in self.controller_listener_names

    def listener(self, name: str) -> Listener | None:
        """This node's listener called ``name`` (case-insensitive), if it binds one."""
        return next((lst for lst in self.listeners if lst.name == name.upper()), None)

    @property
    def controller_listeners(self) -> list[Listener]:
        """The listeners this node binds for the quorum (empty unless a controller)."""
        return [lst for lst in self.listeners if lst.name in self.controller_listener_names]

    @property
    def broker_listeners(self) -> list[Listener]:
        """The listeners this node binds for clients and brokers."""
        return [lst for lst in self.listeners if lst.name not in self.controller_listener_names]

    @property
    def advertised_broker_listeners(self) -> list[Listener]:
        """What this broker registers and what Metadata lists (controller listeners aside)."""
        return [lst for lst in self.advertised_listeners
                if lst.name not in self.controller_listener_names]

    @property
    def advertised_controller_listeners(self) -> list[Listener]:
        """Per controller listener name (in order): its advertised endpoint, else the bound one."""
        out = []
        for name in self.controller_listener_names:
            found = next((lst for lst in self.advertised_listeners if lst.name == name), None)
            found = found or self.listener(name)
            if found is not None:
                out.append(found)
        return out

    # ---- parsing

    @classmethod
    def of(cls, config: BrokerConfig) -> ClusterConfig:
        """Parse and check (module docstring); ConfigError with Kafka's message."""
        roles = parse_process_roles(config.get_list("process.roles"))
        voters = parse_voters(config.get_list("controller.quorum.voters"))
        bootstrap = parse_bootstrap_servers(config.get_list("controller.quorum.bootstrap.servers"))
        listeners = config.listeners
        advertised = config.advertised_listeners
        controller_names = [n.strip().upper() for n in
                            (config.get("controller.listener.names") or "").split(",") if n.strip()]
        try:
            inter = inter_broker_listener(config)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        metadata_dir = config.get("metadata.log.dir") or config.log_dirs[0]
        cc = cls(
            process_roles=roles,
            node_id=config.node_id,
            voters=voters,
            bootstrap_servers=bootstrap,
            listeners=listeners,
            advertised_listeners=advertised,
            controller_listener_names=controller_names,
            inter_broker_listener_name=inter,
            rack=config.get("broker.rack") or None,
            metadata_log_dir=metadata_dir,
            broker_session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            broker_heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
            initial_broker_registration_timeout_ms=config.get_int(
                "initial.broker.registration.timeout.ms"),
            election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
            election_backoff_max_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
            request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
            retry_backoff_ms=config.get_int("controller.quorum.retry.backoff.ms"),
            append_linger_ms=config.get_int("controller.quorum.append.linger.ms"),
            metadata_max_idle_interval_ms=config.get_int("metadata.max.idle.interval.ms"),
            metadata_snapshot_max_interval_ms=config.get_int(
                "metadata.log.max.snapshot.interval.ms"),
            metadata_snapshot_max_new_record_bytes=config.get_int(
                "metadata.log.max.record.bytes.between.snapshots"),
        )
        if roles:
            _check_kraft(cc, config)
        else:
            _check_single_node(cc, config)
        return cc


def parse_process_roles(items: list[str]) -> frozenset[str]:
    for role in items:
        if role not in PROCESS_ROLES:
            raise ConfigError(
                f"Unknown process role '{role}' (only 'broker' and 'controller' are allowed roles)")
    if len(set(items)) != len(items):
        raise ConfigError(f"Duplicate role names found in `process.roles`: {items}")
    return frozenset(items)


def _host_port(entry: str) -> tuple[str | None, int | None]:
    m = _HOST_PORT.match(entry)
    if m is None:
        return None, None
    port = int(m.group(2))
    return m.group(1), (port if port <= 65535 else None)


def parse_voters(items: list[str]) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters``: ``{id}@{host}:{port}`` entries, Kafka's messages."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in items:
        parts = entry.split("@")
        if len(parts) != 2:
            raise ConfigError(f"Invalid configuration value for controller.quorum.voters. {_FORM}")
        try:
            voter_id = int(parts[0].strip())
        except ValueError:
            raise ConfigError(
                f"Failed to parse voter ID as an integer from {parts[0]}") from None
        host, port = _host_port(parts[1].strip())
        if not host:
            raise ConfigError(f"Failed to parse host name from entry {entry} for the "
                              f"configuration controller.quorum.voters. {_FORM}")
        if port is None:
            raise ConfigError(f"Failed to parse host port from entry {entry} for the "
                              f"configuration controller.quorum.voters. {_FORM}")
        if host == "0.0.0.0":
            raise ConfigError(f"Host string ({host}) is not routeable")
        if voter_id in voters:
            raise ConfigError(f"controller.quorum.voters names voter {voter_id} twice")
        voters[voter_id] = (host, port)
    return voters


def parse_bootstrap_servers(items: list[str]) -> list[tuple[str, int]]:
    """``controller.quorum.bootstrap.servers``: ``{host}:{port}`` entries, Kafka's messages."""
    out = []
    for entry in items:
        host, port = _host_port(entry)
        what = "host name" if not host else "host port" if port is None else ""
        if what:
            raise ConfigError(
                f"Failed to parse {what} from {entry} for the configuration "
                f'controller.quorum.bootstrap.servers. Each entry should be in the form '
                f'"{{host}}:{{port}}"')
        out.append((host, port))
    return out


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _check_single_node(cc: ClusterConfig, config: BrokerConfig) -> None:
    _require(not cc.controller_listener_names,
             f"controller.listener.names must be empty when not running in KRaft mode: "
             f"{cc.controller_listener_names}")
    for key in ("controller.quorum.voters", "controller.quorum.bootstrap.servers"):
        _require(not config.get_list(key),
                 f"{key} is set but process.roles is not: set process.roles (broker, controller "
                 f"or broker,controller) to join a quorum, or remove {key} to run a single node")
    if "inter.broker.listener.name" in config.values:
        _check_inter_broker(cc, config)


def _check_kraft(cc: ClusterConfig, config: BrokerConfig) -> None:
    roles = cc.process_roles
    _require("node.id" in config.values or "broker.id" in config.values,
             "Missing configuration `node.id` which is required when `process.roles` is defined "
             "(i.e. when running in KRaft mode).")
    _require(bool(cc.voters or cc.bootstrap_servers),
             "If using process.roles, either controller.quorum.bootstrap.servers must contain the "
             "set of bootstrap controllers or controller.quorum.voters must contain a parseable "
             "set of controllers.")
    voter_ids = set(cc.voters)
    bound = {lst.name for lst in cc.listeners}
    if roles == {BROKER}:
        _require(cc.node_id not in voter_ids,
                 f"If process.roles contains just the 'broker' role, the node id {cc.node_id} "
                 f"must not be included in the set of voters "
                 f"controller.quorum.voters={_ids(voter_ids)}")
        _require(bool(cc.controller_listener_names),
                 "controller.listener.names must contain at least one value when running KRaft "
                 "with just the broker role")
        _require(not cc.controller_listeners,
                 "controller.listener.names must not contain a value appearing in the "
                 "'listeners' configuration when running KRaft with just the broker role")
        pmap = config.protocol_map
        for name in cc.controller_listener_names:
            _require(name in pmap,
                     f"Controller listener with name {name} defined in controller.listener.names "
                     f"not found in listener.security.protocol.map  (an explicit security mapping "
                     f"for each controller listener is required if listener.security.protocol.map "
                     f"is non-empty, or if there are security protocols other than PLAINTEXT in "
                     f"use)")
            _require(pmap[name] in SUPPORTED_PROTOCOLS,
                     f"controller listener {name} uses security protocol {pmap[name]}, which "
                     f"is not supported (supported: {', '.join(SUPPORTED_PROTOCOLS)})")
    else:
        if roles == {CONTROLLER}:
            _require(len(cc.controller_listeners) == len(cc.listeners),
                     "The listeners config must only contain KRaft controller listeners from "
                     "controller.listener.names when process.roles=controller")
        _require(not voter_ids or cc.node_id in voter_ids,
                 f"If process.roles contains the 'controller' role, the node id {cc.node_id} must "
                 f"be included in the set of voters controller.quorum.voters={_ids(voter_ids)}")
        _require(bool(cc.advertised_controller_listeners),
                 "controller.listener.names must contain at least one value appearing in the "
                 "'listeners' configuration when running the KRaft controller role")
        _require(all(n in bound for n in cc.controller_listener_names),
                 "controller.listener.names must only contain values appearing in the "
                 "'listeners' configuration when running the KRaft controller role")
        _require(bool(voter_ids),
                 "a controller needs controller.quorum.voters: a dynamic quorum "
                 "(controller.quorum.bootstrap.servers alone, KIP-853) is not supported yet")
    if cc.is_broker:
        _check_inter_broker(cc, config)
    for lst in cc.advertised_broker_listeners + cc.advertised_controller_listeners:
        _require(lst.host != "0.0.0.0",
                 "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                 "Use a routable IP address.")


def _check_inter_broker(cc: ClusterConfig, config: BrokerConfig) -> None:
    name = cc.inter_broker_listener_name
    _require(name in config.protocol_map,
             f"Listener with name {name} defined in inter.broker.listener.name not found in "
             f"listener.security.protocol.map.")
    names = [lst.name for lst in cc.advertised_broker_listeners]
    _require(bool(names),
             "There must be at least one broker advertised listener."
             + (" Perhaps all listeners appear in controller.listener.names?" if cc.kraft else ""))
    _require(name in names,
             f"inter.broker.listener.name must be a listener name defined in "
             f"advertised.listeners. The valid options based on currently configured listeners "
             f"are {','.join(names)}")


def _ids(ids: set[int]) -> str:
    return "Set(" + ", ".join(map(str, sorted(ids))) + ")"
