"""Broker configuration the Kafka way: ``server.properties`` keys, overrides, defaults.

``BrokerConfig.load(path, overrides)`` reads a Java-properties file (``key=value``
or ``key: value``, ``#``/``!`` comments, backslash line continuation) and then
``--override key=value`` pairs, and checks every value it knows before anything
starts. Values are kept as strings, the way DescribeConfigs reports them.

One table, ``BROKER_KEYS``, holds the broker's own keys: name, type, default,
constraint (Kafka's ``ConfigDef`` validators) and doc, one ``ConfigKey`` per
line; adding a key is adding a line. The storage layer's broker keys
(``spool.storage.config.BROKER_CONFIGS``) and the broker synonyms of topic
keys (``log.retention.ms``...) are known too, and passed to storage.
``internal`` keys (``internal.segment.bytes.enable``, test-only) are accepted
but not listed by DescribeConfigs.

- A bad value raises ``ConfigError`` naming the key, the value and what is
  allowed (``num.partitions=abc: expected an integer >= 1``).
- An unknown key is kept out of everything and listed in ``unknown`` (Kafka
  warns "The configuration 'x' was supplied but isn't a known config.");
  ``unknown_warnings()`` gives that line with a "did you mean" hint.
- Listeners: each name maps to a security protocol through
  ``listener.security.protocol.map`` (Kafka's default maps PLAINTEXT, SSL,
  SASL_PLAINTEXT, SASL_SSL to themselves); a name without a mapping is an
  error, and so is a protocol not in ``SUPPORTED_PROTOCOLS``: Spool refuses to
  start rather than serve plaintext where security was asked for.
- Per-listener keys, Kafka's ``listener.name.<listener>.<key>`` (the listener name
  lowercased, as Kafka's ``ListenerName.configPrefix``) and, for the SASL keys in
  ``LISTENER_MECHANISM_CONFIGS``, ``listener.name.<listener>.<mechanism>.<key>``
  (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``): accepted when the base
  key is known and checked as the base key; an unknown base key is reported like any
  unknown key; an upper-case listener part is an error (Kafka would silently ignore
  it). ``listener_value(listener, key, mechanism)`` reads them in Kafka's order.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from spool.coordinator.assignors import ASSIGNORS
from spool.protocol.errors import Errors, KafkaError
from spool.replica.selector import RACK_AWARE, SELECTORS
from spool.security.authorizer import AUTHORIZER_CLASSES, parse_super_users
from spool.storage.config import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_OF,
    CLUSTER_WIDE,
    INT32_MAX,
    PER_BROKER,
    TOPIC_CONFIGS,
    Check,
    ConfigKey,
    at_least,
    between,
    did_you_mean,
    format_value,
    list_of,
    one_of,
    parse_value,
)
from spool.util.listen import parse_http_listener
from spool.util.logs import parse_levels
from spool.util.properties import parse_properties

if TYPE_CHECKING:
    from spool.broker.cluster_config import ClusterConfig
    from spool.security.tls import ServerTls


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message says which key."""


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")

LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")
# Kafka's ListenerMechanismConfigs: given per listener AND mechanism
LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                              "sasl.login.class", "sasl.server.callback.handler.class",
                              "connections.max.reauth.ms")


def _paths() -> Check:  # Kafka's ValidList.anyNonDuplicateValues(false, ...)
    return Check("a non-empty comma-separated list of paths without duplicates",
                 lambda v: bool(v) and len(set(v)) == len(v), replaces_type=True)


def _assignors() -> Check:  # Kafka: each class must load, the list must not be empty
    return Check("a non-empty list of uniform, range (or Kafka's class names of them)",
                 lambda v: bool(v) and all(a in ASSIGNORS for a in v), replaces_type=True)


def _roles() -> Check:  # Kafka's ValidList.in("broker", "controller"); empty is allowed
    return Check("a comma-separated list of broker, controller (or nothing)",
                 lambda v: all(r in ("broker", "controller") for r in v), replaces_type=True)


def _valid_metrics_listeners(listeners: list[str]) -> bool:
    # (spool.broker.metrics_http and prometheus-client load only when the key is set)
    from spool.broker.metrics_http import valid_listeners

    return valid_listeners(listeners)


def _key(name: str, type_: str, default: object, check: Check | None = None,
         doc: str = "", dynamic: str = "", applied: bool = False) -> ConfigKey:
    return ConfigKey(name, type_, default, (), check, doc, dynamic=dynamic, applied=applied)


def _dyn(name: str, type_: str, default: object, mode: str, check: Check | None = None,
         doc: str = "") -> ConfigKey:
    """A key Kafka 4.2 updates dynamically that Spool keeps and reports but does not act
    on (TLS, SASL, quotas, remote storage...: the features are not there yet)."""
    return ConfigKey(name, type_, default, (), check, doc or "Stored and reported; Spool does "
                     "not act on it yet.", dynamic=mode)


_SSL_ONE_OF_CLIENT_AUTH = Check("one of required, requested, none",
                                lambda v: v in ("required", "requested", "none"), True)


def _super_users_ok(value: str) -> bool:
    try:
        parse_super_users(value)
    except ValueError:
        return False
    return True


def _log_levels_ok(value: str) -> bool:
    try:
        parse_levels(value)
    except ValueError:
        return False
    return True


_SUPER_USERS = Check("principals as Type:name separated by ';'", _super_users_ok, True)


def _console_listener_ok(value: str) -> bool:
    if not value:
        return True
    try:
        parse_http_listener(value)
    except ValueError:
        return False
    return True


BROKER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _key("node.id", "int", 0, at_least(0), "The id of this broker."),
        _key("broker.id", "int", 0, at_least(0), "Alias of node.id."),
        _key("listeners", "list", ("PLAINTEXT://127.0.0.1:9092",), None,
             "Addresses the broker binds, NAME://host:port.", PER_BROKER),
        _key("advertised.listeners", "list", None, None,
             "Addresses given to clients; defaults to listeners.", PER_BROKER),
        _key("listener.security.protocol.map", "list",
             tuple(f"{p}:{p}" for p in SECURITY_PROTOCOLS), None,
             "Listener name -> security protocol. Only PLAINTEXT is served yet.", PER_BROKER),
        _key("log.dirs", "list", ("./data",), _paths(), "Directories holding the partition logs."),
        _key("log.dir", "string", "./data", None, "Used when log.dirs is not set."),
        _key("num.partitions", "int", 1, at_least(1), "Partitions of an auto-created topic."),
        # client quotas (spool.security.quotas, spool.broker.throttling)
        _key("quota.window.num", "int", 11, at_least(1),
             "Samples kept for client quota rates (produce, fetch, request)."),
        _key("quota.window.size.seconds", "int", 1, at_least(1),
             "The time span of each client quota sample."),
        _key("controller.quota.window.num", "int", 11, at_least(1),
             "Samples of the controller mutation quota's token bucket."),
        _key("controller.quota.window.size.seconds", "int", 1, at_least(1),
             "The time span of each controller mutation quota sample."),
        _key("max.broker.partitions", "int", 10000, at_least(1),
             "Most partitions this broker holds, all topics (internal ones too); CreateTopics, "
             "CreatePartitions and auto-creation beyond it get POLICY_VIOLATION. Lowered at "
             "run time to what the descriptor limit (ulimit -n) keeps open."),
        _key("default.replication.factor", "int", 1, at_least(1),
             "Replication factor of auto-created topics."),
        _key("auto.create.topics.enable", "boolean", True, None,
             "Create unknown topics on metadata requests."),
        _key("delete.topic.enable", "boolean", True, None, "Allow DeleteTopics."),
        _key("socket.request.max.bytes", "int", 104857600, at_least(1),
             "Largest request the broker reads."),
        _key("connections.max.idle.ms", "long", 600000, at_least(1),
             "Idle connections are closed after this."),
        _key("queued.max.requests", "int", 500, at_least(1),
             "In-flight requests per connection before reading pauses."),
        _key("queued.max.request.bytes", "long", -1, None,
             "Request bytes read and not yet answered, all connections (-1: unbounded)."),
        _key("max.connections", "int", INT32_MAX, at_least(0),
             "Connections at once; accepting pauses at the limit.", CLUSTER_WIDE, True),
        _key("max.connections.per.ip", "int", INT32_MAX, at_least(0),
             "Connections from one address; more are closed at accept.", CLUSTER_WIDE, True),
        _key("offsets.topic.num.partitions", "int", 50, at_least(1),
             "Partitions of __consumer_offsets."),
        _key("offsets.topic.replication.factor", "short", 3, at_least(1),
             "Replication factor of __consumer_offsets, capped by the brokers registered "
             "when a cluster creates it (1 on a single node)."),
        _key("transaction.state.log.num.partitions", "int", 50, at_least(1),
             "Partitions of __transaction_state."),
        _key("transaction.state.log.replication.factor", "short", 3, at_least(1),
             "Replication factor of __transaction_state, capped by the brokers registered "
             "when a cluster creates it (1 on a single node)."),
        _key("transaction.state.log.min.isr", "int", 2, at_least(1),
             "min.insync.replicas of __transaction_state (at most its replication factor)."),
        _key("transaction.max.timeout.ms", "int", 900000, at_least(1),
             "Largest transaction.timeout.ms a producer may ask for."),
        _key("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
             at_least(1), "How often open transactions are checked against their timeout."),
        _key("transaction.partition.verification.enable", "boolean", True, None,
             "Leaders ask the transaction coordinator before the first transactional batch "
             "of a transaction on a partition (KIP-890)."),
        _key("add.partitions.to.txn.retry.backoff.ms", "int", 20, at_least(1),
             "Backoff of a leader's AddPartitionsToTxn retried on CONCURRENT_TRANSACTIONS."),
        _key("add.partitions.to.txn.retry.backoff.max.ms", "int", 100, at_least(0),
             "How long a leader retries AddPartitionsToTxn on CONCURRENT_TRANSACTIONS."),
        _key("transactional.id.expiration.ms", "int", 604800000, at_least(1),
             "Idle transactional ids are forgotten after this."),
        _key("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
             at_least(1), "How often expired transactional ids are removed."),
        _key("producer.id.expiration.ms", "int", 86400000, at_least(1),
             "Idle producer ids are forgotten by partitions after this.", CLUSTER_WIDE),
        _key("producer.id.expiration.check.interval.ms", "int", 600000, at_least(1),
             "How often producer ids are expired."),
        _key("group.initial.rebalance.delay.ms", "int", 3000, at_least(0),
             "Delay before the first rebalance."),
        _key("group.min.session.timeout.ms", "int", 6000, at_least(0),
             "Shortest session timeout a member may ask for."),
        _key("group.max.session.timeout.ms", "int", 1800000, at_least(0),
             "Longest session timeout a member may ask for."),
        _key("group.max.size", "int", 1000, at_least(1),
             "Most members in one consumer group (Kafka: 2147483647, unbounded)."),
        # KIP-848 consumer groups (group.protocol=consumer), Kafka 4.2's defaults
        _key("group.coordinator.rebalance.protocols", "list", ("classic", "consumer", "share"),
             list_of("classic", "consumer", "share", "streams"),
             "The group protocols the coordinator serves."),
        _key("group.consumer.heartbeat.interval.ms", "int", 5000, at_least(1),
             "Heartbeat interval given to consumer-protocol members."),
        _key("group.consumer.min.heartbeat.interval.ms", "int", 5000, at_least(1),
             "Lowest consumer.heartbeat.interval.ms a group config may set."),
        _key("group.consumer.max.heartbeat.interval.ms", "int", 15000, at_least(1),
             "Highest consumer.heartbeat.interval.ms a group config may set."),
        _key("group.consumer.session.timeout.ms", "int", 45000, at_least(1),
             "Session timeout of consumer-protocol members."),
        _key("group.consumer.min.session.timeout.ms", "int", 45000, at_least(1),
             "Lowest consumer.session.timeout.ms a group config may set."),
        _key("group.consumer.max.session.timeout.ms", "int", 60000, at_least(1),
             "Highest consumer.session.timeout.ms a group config may set."),
        _key("group.consumer.assignors", "list", ("uniform", "range"), _assignors(),
             "Server-side assignors, the first the default (names or Kafka's class names)."),
        _key("group.consumer.max.size", "int", 2147483647, at_least(1),
             "Most members in one consumer-protocol group."),
        _key("group.consumer.migration.policy", "string", "bidirectional",
             one_of("disabled", "upgrade", "downgrade", "bidirectional"),
             "Classic <-> consumer group conversion when a member of the other protocol joins."),
        # KIP-932 share groups
        _key("group.share.enable", "boolean", True, None, "Serve share groups (KIP-932)."),
        _key("group.share.heartbeat.interval.ms", "int", 5000, at_least(1),
             "Heartbeat interval given to share-group members."),
        _key("group.share.min.heartbeat.interval.ms", "int", 5000, at_least(1),
             "Lowest share.heartbeat.interval.ms a group config may set."),
        _key("group.share.max.heartbeat.interval.ms", "int", 15000, at_least(1),
             "Highest share.heartbeat.interval.ms a group config may set."),
        _key("group.share.session.timeout.ms", "int", 45000, at_least(1),
             "Session timeout of share-group members."),
        _key("group.share.min.session.timeout.ms", "int", 45000, at_least(1),
             "Lowest share.session.timeout.ms a group config may set."),
        _key("group.share.max.session.timeout.ms", "int", 60000, at_least(1),
             "Highest share.session.timeout.ms a group config may set."),
        _key("group.share.record.lock.duration.ms", "int", 30000, at_least(1000),
             "How long a share consumer holds an acquired record before it is released."),
        _key("group.share.min.record.lock.duration.ms", "int", 15000, at_least(1000),
             "Lowest share.record.lock.duration.ms a group config may set."),
        _key("group.share.max.record.lock.duration.ms", "int", 60000, at_least(1000),
             "Highest share.record.lock.duration.ms a group config may set."),
        _key("group.share.delivery.count.limit", "int", 5, between(2, 10),
             "Deliveries of a record after which it is archived."),
        _key("group.share.partition.max.record.locks", "int", 2000, between(100, 10000),
             "Most records in flight (acquired or available below the end) per share-partition."),
        _key("group.share.max.groups", "int", 10, between(1, 100),
             "Most share groups per coordinator."),
        _key("group.share.max.size", "int", 200, between(10, 1000),
             "Most members in one share group."),
        _key("group.share.max.share.sessions", "int", 2000, at_least(1),
             "Most share sessions (KIP-932) per broker."),
        # the share coordinator (__share_group_state)
        _key("share.coordinator.state.topic.num.partitions", "int", 50, at_least(1),
             "Partitions of __share_group_state."),
        _key("share.coordinator.state.topic.replication.factor", "short", 3, at_least(1),
             "Replication factor of __share_group_state (capped at the brokers present)."),
        _key("share.coordinator.state.topic.min.isr", "short", 2, at_least(1),
             "min.insync.replicas of __share_group_state."),
        _key("share.coordinator.state.topic.segment.bytes", "int", 104857600, at_least(1),
             "segment.bytes of __share_group_state."),
        _key("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
             between(0, 500), "ShareUpdate records written before a new ShareSnapshot."),
        _key("share.coordinator.write.timeout.ms", "int", 5000, at_least(1),
             "How long the share coordinator waits for its appends to be replicated."),
        _key("share.coordinator.state.topic.prune.interval.ms", "int", 300000, at_least(1),
             "How often the share coordinator deletes the __share_group_state records below "
             "the oldest ShareSnapshot still needed."),
        _key("share.fetch.max.fetch.records", "int", 2147483647, at_least(1),
             "Most records one ShareFetch acquires per share-partition."),
        _key("offsets.retention.minutes", "int", 10080, at_least(1),
             "How long an empty group keeps its offsets."),
        _key("offsets.retention.check.interval.ms", "long", 600000, at_least(1),
             "How often offset retention runs."),
        _key("offset.metadata.max.bytes", "int", 4096, at_least(0),
             "Largest metadata string of a committed offset."),
        _key("offsets.commit.timeout.ms", "int", 5000, at_least(1),
             "How long the group coordinator waits for its appends to be replicated "
             "(acks=-1) before answering COORDINATOR_NOT_AVAILABLE."),
        _key("request.timeout.ms", "int", 30000, at_least(1),
             "How long the transaction coordinator waits for its appends and markers to be "
             "replicated (acks=-1) before answering COORDINATOR_NOT_AVAILABLE."),
        _key("log.retention.check.interval.ms", "long", 300000, at_least(1),
             "How often retention runs."),
        _key("log.flush.scheduler.interval.ms", "long", 9223372036854775807, None,
             "How often flush.ms is checked."),
        _key("num.io.threads", "int", 8, at_least(1), "Threads for blocking storage work.",
             CLUSTER_WIDE),
        _key("fetch.max.bytes", "int", 57671680, at_least(1024), "Largest fetch response."),
        _key("replica.fetch.wait.max.ms", "int", 500, at_least(0),
             "Longest wait of a follower's Fetch for replica.fetch.min.bytes at the leader."),
        _key("replica.fetch.min.bytes", "int", 1, at_least(0),
             "Least data a follower's Fetch waits for (up to replica.fetch.wait.max.ms)."),
        _key("replica.fetch.max.bytes", "int", 1048576, at_least(0),
             "Bytes a follower fetches per partition (at least one batch)."),
        _key("replica.fetch.response.max.bytes", "int", 10485760, at_least(0),
             "Bytes a follower's whole Fetch response may carry (at least one batch)."),
        _key("replica.fetch.backoff.ms", "int", 1000, at_least(0),
             "Wait of a follower after a fetch error before it fetches that partition again."),
        _key("replica.socket.timeout.ms", "int", 30000, None,
             "Timeout of a follower's requests to its leader (plus replica.fetch.wait.max.ms)."),
        _key("num.replica.fetchers", "int", 1, at_least(1),
             "Fetch loops (connections) per leader broker a follower uses.", CLUSTER_WIDE),
        _key("max.incremental.fetch.session.cache.slots", "int", 1000, at_least(0),
             "Fetch sessions (KIP-227) the broker keeps, consumers' and followers' "
             "(0: none, every Fetch is a full one)."),
        ConfigKey("internal.segment.bytes.enable", "boolean", False, (), None,
                  "Test-only: accept the topic config internal.segment.bytes (segments "
                  "below segment.bytes' 1 MiB minimum) from clients.", internal=True),
        _key("cluster.id", "string", "spool-cluster-0000000", None,
             "The cluster id reported to clients."),
        # ---- KRaft: roles, quorum, listeners (spool.broker.cluster_config checks them together)
        _key("process.roles", "list", (), _roles(),
             "The roles of this node: broker, controller, or broker,controller. Unset: one "
             "node that is its own controller, no format step (Spool's single node)."),
        _key("controller.quorum.voters", "list", (), None,
             "The controller quorum, {id}@{host}:{port},... (e.g. 1@127.0.0.1:9093)."),
        _key("controller.quorum.bootstrap.servers", "list", (), None,
             "Controllers to bootstrap from, {host}:{port},... (brokers only, for now)."),
        _key("controller.listener.names", "string", None, None,
             "Names of the listeners used by the controller; a broker uses the first to reach "
             "the controllers. Required with process.roles."),
        _key("inter.broker.listener.name", "string", None, None,
             "The listener brokers use to reach each other (default: PLAINTEXT)."),
        _key("security.inter.broker.protocol", "string", "PLAINTEXT",
             Check("one of " + ", ".join(SECURITY_PROTOCOLS), lambda v: v in SECURITY_PROTOCOLS,
                   replaces_type=True),
             "Security protocol brokers use to reach each other: names the listener of that "
             "name. Set it or inter.broker.listener.name, not both."),
        _key("sasl.mechanism.controller.protocol", "string", "GSSAPI", None,
             "SASL mechanism used to reach the controllers (on the first of "
             "controller.listener.names, when it is SASL_*); the credentials are the "
             "username/password of that listener's sasl.jaas.config for the mechanism."),
        _key("broker.rack", "string", None, None,
             "The rack of this broker; replicas of a partition are spread across racks."),
        # ---- controller: leader balancing (Kafka's ReplicationConfigs)
        _key("auto.leader.rebalance.enable", "boolean", True, None,
             "The active controller moves leadership back to each partition's preferred "
             "replica (the first) when it is in the ISR, every "
             "leader.imbalance.check.interval.seconds."),
        _key("leader.imbalance.check.interval.seconds", "long", 300, at_least(1),
             "How often the active controller balances partition leaders."),
        _key("leader.imbalance.per.broker.percentage", "int", 10, None,
             "Accepted for compatibility; as Kafka's KRaft controller, Spool balances every "
             "partition whose preferred replica can lead, whatever the ratio."),
        ConfigKey("unclean.leader.election.interval.ms", "long", 300000, (), at_least(1),
                  "How often the active controller gives leaderless partitions of topics "
                  "that now allow unclean.leader.election.enable a leader from outside the "
                  "ISR (internal in Kafka too).", internal=True),
        _key("broker.session.timeout.ms", "int", 9000, at_least(1),
             "A broker is fenced when no heartbeat arrived for this long."),
        _key("broker.heartbeat.interval.ms", "int", 2000, at_least(1),
             "Time between a broker's heartbeats to the controller."),
        _key("initial.broker.registration.timeout.ms", "int", 60000, at_least(1),
             "How long a starting broker tries to register before it exits."),
        _key("controller.quorum.election.timeout.ms", "int", 1000, at_least(1),
             "Longest wait without hearing from the leader before starting an election."),
        _key("controller.quorum.fetch.timeout.ms", "int", 2000, at_least(1),
             "A voter without a successful fetch from the leader this long becomes a "
             "candidate; a leader without fetches from a majority this long resigns."),
        _key("controller.quorum.election.backoff.max.ms", "int", 1000, at_least(1),
             "Longest backoff before a new election (binary exponential backoff)."),
        _key("controller.quorum.request.timeout.ms", "int", 2000, at_least(1),
             "How long a quorum request waits for its response."),
        _key("controller.quorum.retry.backoff.ms", "int", 20, at_least(0),
             "Wait before retrying a failed quorum request."),
        _key("controller.quorum.append.linger.ms", "int", 25, at_least(0),
             "How long the leader lets writes accumulate before flushing them."),
        _key("metadata.log.dir", "string", None, None,
             "Where the metadata log lives; the first of log.dirs when unset."),
        _key("metadata.max.idle.interval.ms", "int", 500, at_least(0),
             "How often the active controller appends a no-op record (0: never)."),
        _key("metadata.log.max.snapshot.interval.ms", "long", 3600000, at_least(0),
             "Longest time committed records wait for a snapshot (0: no time-based snapshot)."),
        _key("metadata.log.max.record.bytes.between.snapshots", "long", 20971520, at_least(1),
             "Metadata log bytes between the latest snapshot and the high watermark that "
             "trigger a new snapshot."),
        _key("metadata.log.segment.bytes", "int", 1073741824, at_least(12),
             "Largest segment of the metadata log."),
        _key("metadata.max.retention.bytes", "long", 104857600, None,
             "Metadata log and snapshots kept before old ones are deleted (soft limit)."),
        _key("metadata.max.retention.ms", "long", 604800000, None,
             "How long a metadata log segment or snapshot is kept (soft limit)."),
        _key("replica.lag.time.max.ms", "long", 30000, at_least(1),
             "A follower that has not caught up for this long leaves the ISR."),
        _key("replica.selector.class", "string", None,
             Check(f"empty or {RACK_AWARE} (the replica selectors Spool has)",
                   lambda v: not v or v.strip() in SELECTORS, replaces_type=True),
             "KIP-392: how a partition leader points a consumer (Fetch v11+ with its "
             "client.rack) to a replica to read from; unset: the leader serves everyone."),
        # ---- the rest of Kafka 4.2's dynamic broker keys (DynamicBrokerConfig's
        # reconfigurable sets): accepted, stored, reported; not acted on yet
        # listeners (DynamicListenerConfig, SocketServer): TLS; the keys with a doc are
        # acted on (spool.security.tls, also when changed dynamically), the others are not
        _dyn("ssl.keystore.type", "string", "JKS", PER_BROKER, None,
             "The keystore's format: PEM or PKCS12 (JKS is refused: convert it with keytool)."),
        _dyn("ssl.keystore.location", "string", None, PER_BROKER, None,
             "A TLS listener's keystore file: PEM (key and certificate chain) or PKCS12."),
        _dyn("ssl.keystore.password", "password", None, PER_BROKER, None,
             "The PKCS12 keystore's password."),
        _dyn("ssl.key.password", "password", None, PER_BROKER, None,
             "The password of the keystore's private key (an encrypted PEM key)."),
        _dyn("ssl.keystore.certificate.chain", "password", None, PER_BROKER, None,
             "The certificate chain inline, PEM (with ssl.keystore.type=PEM)."),
        _dyn("ssl.keystore.key", "password", None, PER_BROKER, None,
             "The private key inline, PEM PKCS#8 (with ssl.keystore.type=PEM)."),
        _dyn("ssl.truststore.type", "string", "JKS", PER_BROKER, None,
             "The truststore's format: PEM or PKCS12."),
        _dyn("ssl.truststore.location", "string", None, PER_BROKER, None,
             "The CAs client certificates are verified against (PEM or PKCS12)."),
        _dyn("ssl.truststore.password", "password", None, PER_BROKER, None,
             "The PKCS12 truststore's password."),
        _dyn("ssl.truststore.certificates", "password", None, PER_BROKER, None,
             "The trusted CA certificates inline, PEM."),
        _dyn("ssl.protocol", "string", "TLSv1.3", PER_BROKER),
        _dyn("ssl.provider", "string", None, PER_BROKER),
        _dyn("ssl.cipher.suites", "list", (), PER_BROKER, None,
             "TLS 1.2 cipher suites (IANA or OpenSSL names); a list without a TLS 1.3 suite "
             "turns TLS 1.3 off. Empty: OpenSSL's defaults."),
        _dyn("ssl.enabled.protocols", "list", ("TLSv1.2", "TLSv1.3"), PER_BROKER, None,
             "TLSv1.2 and/or TLSv1.3."),
        _dyn("ssl.keymanager.algorithm", "string", "SunX509", PER_BROKER),
        _dyn("ssl.trustmanager.algorithm", "string", "PKIX", PER_BROKER),
        _dyn("ssl.endpoint.identification.algorithm", "string", "https", PER_BROKER),
        _dyn("ssl.secure.random.implementation", "string", None, PER_BROKER),
        _dyn("ssl.client.auth", "string", "none", PER_BROKER, _SSL_ONE_OF_CLIENT_AUTH,
             "required, requested or none: whether a client certificate is asked for (mTLS; "
             "its subject names the principal)."),
        _dyn("ssl.engine.factory.class", "class", None, PER_BROKER),
        _key("ssl.principal.mapping.rules", "string", "DEFAULT", None,
             "Rules mapping a client certificate's subject (RFC 2253 distinguished name) "
             "to a principal name, Kafka's RULE:pattern/replacement/[LU], ..., DEFAULT."),
        _dyn("principal.builder.class", "class",
             "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
             PER_BROKER),
        # SASL
        ConfigKey("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", (), None,
                  "SASL mechanism this broker uses to reach the other brokers (on "
                  "inter.broker.listener.name, when it is SASL_*); the credentials are the "
                  "username/password of that listener's sasl.jaas.config for the mechanism.",
                  dynamic=PER_BROKER),
        _dyn("sasl.jaas.config", "password", None, PER_BROKER),
        _dyn("sasl.enabled.mechanisms", "list", ("GSSAPI",), PER_BROKER),
        _dyn("sasl.kerberos.service.name", "string", None, PER_BROKER),
        _dyn("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", PER_BROKER),
        _dyn("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, PER_BROKER),
        _dyn("sasl.kerberos.ticket.renew.jitter", "double", 0.05, PER_BROKER),
        _dyn("sasl.kerberos.min.time.before.relogin", "long", 60000, PER_BROKER),
        _dyn("sasl.kerberos.principal.to.local.rules", "list", ("DEFAULT",), PER_BROKER),
        _dyn("sasl.login.refresh.window.factor", "double", 0.8, PER_BROKER,
             between(0.5, 1.0)),
        _dyn("sasl.login.refresh.window.jitter", "double", 0.05, PER_BROKER,
             between(0.0, 0.25)),
        _dyn("sasl.login.refresh.min.period.seconds", "short", 60, PER_BROKER,
             between(0, 900)),
        _dyn("sasl.login.refresh.buffer.seconds", "short", 300, PER_BROKER, between(0, 3600)),
        # authorization (spool.security.authorizer; read when the broker starts)
        _key("authorizer.class.name", "string", "",
             Check("empty (no authorizer) or " + " or ".join(AUTHORIZER_CLASSES),
                   lambda v: not v or v in AUTHORIZER_CLASSES, replaces_type=True),
             "The authorizer: empty for none (every request allowed), or Kafka's "
             "StandardAuthorizer (ACLs from the metadata log)."),
        # the authorizer's own keys: Kafka hands them to it and does not list them
        # (they are not KafkaConfig keys), so DescribeConfigs does not either
        ConfigKey("super.users", "string", None, (), _SUPER_USERS,
                  "Principals allowed everything, separated by ';' (User:admin;User:broker).",
                  internal=True),
        ConfigKey("allow.everyone.if.no.acl.found", "boolean", False, (), None,
                  "Whether a resource no ACL applies to is open to everyone (else only to "
                  "super.users).", internal=True),
        # SASL, acted on (spool.broker.sasl_listener); each may be listener-prefixed
        # (listener.name.<l>.[<mechanism>.]<key>, BrokerConfig.listener_value)
        _key("sasl.server.max.receive.size", "int", 524288, at_least(1),
             "Largest SASL token (or request) read before authentication completes; a "
             "larger one fails authentication."),
        _key("connection.failed.authentication.delay.ms", "int", 100, at_least(0),
             "KIP-306: how long after a failed authentication its connection is closed (the "
             "client reads the answer first; a client retrying at once is slowed)."),
        _key("connections.max.reauth.ms", "long", 0, at_least(0),
             "KIP-368: a SASL session's lifetime; the client re-authenticates before it "
             "ends, or its connection is closed at its next request (0: sessions never end)."),
        _key("sasl.server.callback.handler.class", "class", None, None,
             "OAUTHBEARER: org.apache.kafka.common.security.oauthbearer."
             "OAuthBearerValidatorCallbackHandler validates JWTs against "
             "sasl.oauthbearer.jwks.endpoint.url; unset: unsecured JWS tokens (development)."),
        _key("sasl.oauthbearer.jwks.endpoint.url", "string", None, None,
             "Where the JWKS of the validated OAUTHBEARER tokens is: file:///path (Spool "
             "reads files only)."),
        _key("sasl.oauthbearer.expected.audience", "list", (), None,
             "A validated token's aud must include one of these (empty: not checked)."),
        _key("sasl.oauthbearer.expected.issuer", "string", None, None,
             "A validated token's iss must be this (unset: not checked)."),
        _key("sasl.oauthbearer.sub.claim.name", "string", "sub", None,
             "The claim naming a validated token's principal."),
        _key("sasl.oauthbearer.scope.claim.name", "string", "scope", None,
             "The claim holding a validated token's scopes."),
        _key("sasl.oauthbearer.clock.skew.seconds", "int", 30, at_least(0),
             "Allowed clock difference when checking a validated token's exp/iat/nbf."),
        # connections and threads
        _dyn("max.connection.creation.rate", "int", INT32_MAX, CLUSTER_WIDE, at_least(0)),
        _dyn("max.connections.per.ip.overrides", "string", "", CLUSTER_WIDE),
        _dyn("num.network.threads", "int", 3, CLUSTER_WIDE, at_least(1)),
        _dyn("background.threads", "int", 10, CLUSTER_WIDE, at_least(1)),
        _dyn("metric.reporters", "list", (), CLUSTER_WIDE),
        _dyn("transaction.partition.verification.enable", "boolean", True, CLUSTER_WIDE),
        # remote log storage (DynamicRemoteLogConfig)
        _dyn("remote.log.index.file.cache.total.size.bytes", "long", 1073741824, CLUSTER_WIDE,
             at_least(1)),
        _dyn("remote.fetch.max.wait.ms", "int", 500, CLUSTER_WIDE, at_least(1)),
        _dyn("remote.log.manager.copy.max.bytes.per.second", "long", 9223372036854775807,
             CLUSTER_WIDE, at_least(1)),
        _dyn("remote.log.manager.fetch.max.bytes.per.second", "long", 9223372036854775807,
             CLUSTER_WIDE, at_least(1)),
        _dyn("remote.list.offsets.request.timeout.ms", "long", 30000, CLUSTER_WIDE,
             at_least(1)),
        # replication quotas (QuotaConfig.brokerQuotaConfigs)
        _dyn("leader.replication.throttled.rate", "long", 9223372036854775807, CLUSTER_WIDE,
             at_least(0)),
        _dyn("follower.replication.throttled.rate", "long", 9223372036854775807,
             CLUSTER_WIDE, at_least(0)),
        _dyn("replica.alter.log.dirs.io.max.bytes.per.second", "long", 9223372036854775807,
             CLUSTER_WIDE, at_least(0)),
        # client telemetry (KIP-714): spool.broker.telemetry
        _key("telemetry.max.bytes", "int", 1048576, at_least(1),
             "The largest metrics payload a client may push (PushTelemetry)."),
        _key("spool.telemetry.retention.ms", "long", 600000, at_least(0),
             "How long pushed client metrics are kept in memory (Spool's own key)."),
        _key("spool.telemetry.retention.bytes", "long", 67108864, at_least(0),
             "Most bytes of pushed client metrics kept in memory; the oldest go first "
             "(Spool's own key)."),
        _key("spool.ssl.handshake.timeout.ms", "int", 10000, at_least(1),
             "A TLS client that has not finished its handshake this long after connecting "
             "is disconnected (Spool's own key)."),
        _key("spool.admin.http.listener", "string", None,
             Check("empty or host:port (port 0: any free one)",
                   lambda v: not v or (v.rpartition(":")[2].isdigit()
                                       and int(v.rpartition(":")[2]) < 65536),
                   replaces_type=True),
             "host:port of the read-only admin endpoint (GET /telemetry: the pushed client "
             "metrics as JSON); unset: none (Spool's own key)."),
        # issue 18: the metrics endpoint (spool.broker.metrics_http)
        _key("metrics.listeners", "list", None,
             Check("a comma-separated list of http://host:port (port 0: any free one)",
                   _valid_metrics_listeners, replaces_type=True),
             "Where GET /metrics answers the broker's metrics in Prometheus's text format, "
             "e.g. http://127.0.0.1:9404; unset: no endpoint (Spool's own key, as "
             "Kafka's listeners)."),
        # issue 18: the web console (spool.console), served from the broker process
        _key("console.listeners", "string", None,
             Check("empty or http://host:port (port 0: any free one)", _console_listener_ok,
                   replaces_type=True),
             "Where the broker serves the web console (spool.console), http://host:port; "
             "it reads this broker over its first PLAINTEXT listener. Unset: no console "
             "(Spool's own key)."),
        # issue 20: the schema registry (spool.registry), served from the broker process
        _key("schema.registry.listeners", "string", None,
             Check("empty or http://host:port (port 0: any free one)", _console_listener_ok,
                   replaces_type=True),
             "Where the broker serves the schema registry (spool.registry, Confluent's "
             "REST API), http://host:port; a client of this broker over its first PLAINTEXT "
             "listener, as `spool registry` would be. Unset: no registry (Spool's own key)."),
        _key("schema.registry.advertised.url", "string", None,
             Check("empty or http://host:port", _console_listener_ok, replaces_type=True),
             "The URL the other registries of the cluster forward writes to when this "
             "broker's is the primary; unset: schema.registry.listeners as bound (Spool's "
             "own key, as Confluent's host.name)."),
        _key("schema.registry.group.id", "string", "schema-registry", None,
             "The consumer group the registries of a cluster elect their writer in (and "
             "the writer's transactional id); Confluent's schema.registry.group.id."),
        # issue 18: logging (spool.util.logs); `spool broker --log-level` wins over it
        _key("log.level", "string", "INFO",
             Check("a level (DEBUG, INFO, WARNING, ERROR), then logger=LEVEL pairs, "
                   "comma-separated: INFO,spool.storage=DEBUG", _log_levels_ok,
                   replaces_type=True),
             "How much the broker logs, for all loggers then per logger "
             "(INFO,spool.storage=DEBUG); read at start (Spool's own key)."),
    )
}


# Kafka 4.2's other broker keys, read-only (a restart applies them), that Spool does not
# define: AlterConfigs on a BROKER resource refuses them as Kafka does ("Cannot update
# these configs dynamically"). From KafkaConfig's definitions (Kafka's AbstractKafkaConfig);
# keys Kafka 4 removed (ZooKeeper, message format) and the remote log thread pools (dynamic
# since 4.1) left out.
KAFKA_READ_ONLY_KEYS: frozenset[str] = frozenset("""
alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
alter.log.dirs.replication.quota.window.size.seconds client.quota.callback.class
controlled.shutdown.enable controlled.shutdown.max.retries
controlled.shutdown.retry.backoff.ms controller.socket.timeout.ms
create.topic.policy.class.name delegation.token.expiry.check.interval.ms
delegation.token.expiry.time.ms delegation.token.max.lifetime.ms
delegation.token.secret.key delete.records.purgatory.purge.interval.requests
early.start.listeners eligible.leader.replicas.enable
fetch.purgatory.purge.interval.requests group.coordinator.append.linger.ms
group.coordinator.threads kafka.metrics.polling.interval.secs
kafka.metrics.reporters log.dir.failure.timeout.ms log.initial.task.delay.ms
max.request.partition.size.limit
metadata.log.segment.min.bytes metadata.log.segment.ms metrics.num.samples
metrics.recording.level metrics.sample.window.ms
num.replica.alter.log.dirs.threads offsets.load.buffer.size
offsets.topic.compression.codec offsets.topic.segment.bytes
producer.purgatory.purge.interval.requests remote.log.copy.disable
remote.log.delete.on.disable remote.log.manager.copy.quota.window.num
remote.log.manager.copy.quota.window.size.seconds
remote.log.manager.fetch.quota.window.num
remote.log.manager.fetch.quota.window.size.seconds
remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.max.ms
remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter
remote.log.metadata.custom.metadata.max.bytes
remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
remote.log.metadata.manager.impl.prefix
remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks
remote.log.storage.manager.class.name remote.log.storage.manager.class.path
remote.log.storage.manager.impl.prefix remote.log.storage.system.enable
replica.socket.receive.buffer.bytes replication.quota.window.num
replication.quota.window.size.seconds sasl.client.callback.handler.class
sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.retry.backoff.max.ms
sasl.login.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
sasl.oauthbearer.token.endpoint.url security.providers
server.max.startup.time.ms share.coordinator.append.linger.ms
share.coordinator.load.buffer.size
share.coordinator.state.topic.compression.codec share.coordinator.threads
share.fetch.purgatory.purge.interval.requests
socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
socket.listen.backlog.size socket.receive.buffer.bytes socket.send.buffer.bytes
ssl.allow.dn.changes ssl.allow.san.changes
transaction.state.log.load.buffer.size transaction.state.log.segment.bytes
unstable.api.versions.enable unstable.feature.versions.enable
""".split())


def check_test_only_topic_configs(config: BrokerConfig, changes: Mapping[str, object]) -> None:
    """INVALID_CONFIG if a client sets ``internal.segment.bytes`` (test-only: tiny segments
    cost a descriptor and files each) on a broker not started with
    ``internal.segment.bytes.enable=true``. Removing it is always allowed."""
    if changes.get("internal.segment.bytes") is None:
        return
    if not config.get_bool("internal.segment.bytes.enable"):
        raise KafkaError(
            Errors.INVALID_CONFIG,
            "internal.segment.bytes is a test-only config; this broker refuses it "
            "(internal.segment.bytes.enable=false)",
        )


def known_key(name: str) -> ConfigKey | None:
    """The definition of a broker-level key: the broker's own, storage's, or a topic synonym."""
    if name in BROKER_KEYS:
        return BROKER_KEYS[name]
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name]
    if name in BROKER_SYNONYM_OF:
        return TOPIC_CONFIGS[BROKER_SYNONYM_OF[name][0]]
    return None


def split_listener_key(name: str) -> tuple[str, str | None, str] | None:
    """``listener.name.<l>[.<mechanism>].<key>`` -> (l as written, mechanism or None, key);
    None when ``name`` has no listener prefix. The mechanism form is taken only for the
    keys of ``LISTENER_MECHANISM_CONFIGS`` (``scram-sha-256.sasl.jaas.config``)."""
    m = LISTENER_PREFIX.fullmatch(name)
    if m is None:
        return None
    listener, rest = m.group(1), m.group(2)
    if known_key(rest) is None:
        mechanism, _, base = rest.partition(".")
        if base in LISTENER_MECHANISM_CONFIGS:
            return listener, mechanism, base
    return listener, None, rest


def listener_key_spec(name: str) -> ConfigKey | None:
    """The definition a listener-prefixed key is checked as (its base key's); None when
    ``name`` is not prefixed or its base key is unknown."""
    parts = split_listener_key(name)
    return None if parts is None else known_key(parts[2])


def all_known_keys() -> list[str]:
    return sorted({*BROKER_KEYS, *BROKER_CONFIGS, *BROKER_SYNONYM_OF})


@dataclass
class Listener:
    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"
    text: str = ""  # as configured, for messages


def parse_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (names case-insensitive)."""
    out: dict[str, str] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ConfigError(
                f"listener.security.protocol.map={value}: {item!r} is not NAME:PROTOCOL"
            )
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map={value}: {proto} is not a security protocol "
                f"(expected one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in out:
            raise ConfigError(f"listener.security.protocol.map={value}: {name} is mapped twice")
        out[name] = proto
    return out


def parse_listeners(
    value: str, protocol_map: dict[str, str] | None = None, key: str = "listeners"
) -> list[Listener]:
    """``NAME://host:port,...``; each name's protocol from ``protocol_map`` (Kafka's default
    when None). An unmapped name or a repeated one is a ConfigError."""
    pmap = protocol_map if protocol_map is not None else {p: p for p in SECURITY_PROTOCOLS}
    result: list[Listener] = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        if "://" not in item:
            raise ConfigError(f"{key}: listener {item!r} is not NAME://host:port")
        name, rest = item.split("://", 1)
        name = name.strip().upper()
        parts = urlsplit("//" + rest)
        try:
            port = parts.port
        except ValueError as e:
            raise ConfigError(f"{key}: listener {item!r} has a bad port (0-65535)") from e
        if port is None:
            raise ConfigError(f"{key}: listener {item!r} has no port")
        if name not in pmap:
            raise ConfigError(
                f"{key}: listener {item!r}: no security protocol is mapped to listener name "
                f"{name!r} in listener.security.protocol.map; only PLAINTEXT is supported yet"
            )
        if any(lst.name == name for lst in result):
            raise ConfigError(f"{key}: listener name {name} is used twice; each needs its own")
        result.append(Listener(name, parts.hostname or "0.0.0.0", port, pmap[name], item))
    if not result:
        raise ConfigError(f"{key}: no listeners configured")
    return result


@dataclass
class BrokerConfig:
    """The broker's effective configuration: static defaults, then file, then overrides."""

    values: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # key -> STATIC_BROKER_CONFIG|DEFAULT
    unknown: list[str] = field(default_factory=list)  # given but not known: ignored

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        cfg = cls()
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
            except UnicodeDecodeError as e:
                raise ConfigError(f"config file {path} is not UTF-8 text") from e
            # (values trimmed, as Kafka's ConfigDef trims them)
            cfg.update({k: v.strip() for k, v in parse_properties(text).items()})
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not key=value")
            k, v = item.split("=", 1)
            cfg.update({k.strip(): v.strip()})
        cfg.validate()
        return cfg

    def update(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            if known_key(k) is None and listener_key_spec(k) is None:
                if k not in self.unknown:
                    self.unknown.append(k)
                continue
            self.values[k] = v
            self.sources[k] = "STATIC_BROKER_CONFIG"

    def unknown_hints(self) -> list[tuple[str, str | None]]:
        """Each unknown key with the known key(s) it is probably a misspelling of."""
        known = all_known_keys()
        return [(k, did_you_mean(k, known)) for k in self.unknown]

    def unknown_warnings(self) -> list[str]:
        """One line per unknown key: Kafka's wording, plus a hint when a known key is close."""
        return [
            f"The configuration '{k}' was supplied but isn't a known config; it is ignored"
            + (f" (did you mean {hint}?)" if hint else "")
            for k, hint in self.unknown_hints()
        ]

    def get(self, key: str) -> str | None:
        if key in self.values:
            return self.values[key]
        if key == "node.id" and "broker.id" in self.values:
            return self.values["broker.id"]
        if key == "log.dirs" and "log.dir" in self.values:
            return self.values["log.dir"]
        if key == "advertised.listeners":
            return self.get("listeners")
        spec = known_key(key)
        if spec is None or spec.default is None:
            return None
        return format_value(spec, spec.default)

    def listener_value(self, listener_name: str, key: str, mechanism: str | None = None,
                       dynamic: Mapping[str, str] | None = None) -> str | None:
        """``key`` as the listener ``listener_name`` sees it, Kafka's lookup order:
        ``listener.name.<listener lowercased>.<mechanism lowercased>.<key>`` (when
        ``mechanism`` is given), then ``listener.name.<listener lowercased>.<key>``, then
        ``key`` itself (its default when unset). With ``dynamic`` (the broker's dynamic
        configs, both layers merged) each of those is read there first."""
        prefix = f"listener.name.{listener_name.lower()}."
        layers = (self.values,) if not dynamic else (dynamic, self.values)
        names = [prefix + key]
        if mechanism is not None:
            names.insert(0, f"{prefix}{mechanism.lower()}.{key}")
        for name in names:
            for layer in layers:
                v = layer.get(name)
                if v is not None:
                    return v
        v = dynamic.get(key) if dynamic else None
        return v if v is not None else self.get(key)

    def server_tls(self, listener: Listener,
                   dynamic: Mapping[str, str] | None = None) -> ServerTls:
        """The TLS side of an SSL or SASL_SSL listener (``spool.security.tls``), from the
        static config and ``dynamic`` (``listener_value``); its keystore and truststore
        are read now. ConfigError naming the listener."""
        from spool.security.tls import TlsConfigError, server_tls

        get = functools.partial(self.listener_value, listener.name, dynamic=dynamic)
        own = f"listener.name.{listener.name.lower()}.ssl.client.auth"
        prefixed = (dynamic or {}).get(own, self.values.get(own))
        try:
            return server_tls(get, listener.protocol, prefixed)
        except TlsConfigError as e:
            raise ConfigError(f"listener {listener.text or listener.name}: {e}") from None

    def get_int(self, key: str) -> int:
        v = self.get(key)
        try:
            return int(v)  # type: ignore[arg-type]
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{key}={v}: expected an integer") from e

    def get_bool(self, key: str) -> bool:
        v = (self.get(key) or "").lower()
        if v not in ("true", "false"):
            raise ConfigError(f"{key}={v}: expected true or false")
        return v == "true"

    def get_list(self, key: str) -> list[str]:
        return [s.strip() for s in (self.get(key) or "").split(",") if s.strip()]

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def protocol_map(self) -> dict[str, str]:
        """Listener name -> security protocol. As Kafka: with ``process.roles`` set and no
        explicit map, each ``controller.listener.names`` name maps to PLAINTEXT (unless a
        listener or controller name is SSL/SASL_*)."""
        pmap = parse_protocol_map(self.get("listener.security.protocol.map") or "")
        if not self.get_list("process.roles") or "listener.security.protocol.map" in self.values:
            return pmap
        names = [n.strip().upper() for n in (self.get("controller.listener.names") or "")
                 .split(",") if n.strip()]
        used = names + [item.split("://", 1)[0].strip().upper()
                        for item in self.get_list("listeners")]
        if any(n in SECURITY_PROTOCOLS and n != "PLAINTEXT" for n in used):
            return pmap
        return {**pmap, **{n: "PLAINTEXT" for n in names if n not in pmap}}

    @property
    def cluster(self) -> ClusterConfig:
        """The typed cluster view (roles, quorum, listeners, timeouts); see
        ``spool.broker.cluster_config``. Checked by ``validate``."""
        from spool.broker.cluster_config import ClusterConfig  # (it imports this module)

        return ClusterConfig.of(self)

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners") or "", self.protocol_map)

    @property
    def advertised_listeners(self) -> list[Listener]:
        return parse_listeners(
            self.get("advertised.listeners") or "", self.protocol_map, "advertised.listeners"
        )

    @property
    def log_dirs(self) -> list[str]:
        return self.get_list("log.dirs")

    def log_defaults(self) -> dict[str, str]:
        """The keys the storage layer reads: topic defaults (``log.*``, ``message.*``...)
        and its broker-only keys (``num.partitions``...)."""
        return {k: v for k, v in self.values.items() if k in BROKER_SYNONYM_OF or k in BROKER_CONFIGS}

    def validate(self) -> None:
        """Every known key's value, then the listeners; ConfigError on the first bad one."""
        for key, raw in self.values.items():
            spec = known_key(key)
            if spec is None:
                spec = listener_key_spec(key)
                listener = LISTENER_PREFIX.fullmatch(key)
                if listener is not None and listener.group(1) != listener.group(1).lower():
                    raise ConfigError(
                        f"{key}: listener names are lowercase in listener.name.<listener>. "
                        f"keys (listener.name.{listener.group(1).lower()}."
                        f"{listener.group(2)}); Kafka would ignore this key")
            if spec is None:
                continue
            try:
                parse_value(spec, raw, key)
            except KafkaError as e:
                raise ConfigError(e.message) from None
        if "node.id" in self.values and "broker.id" in self.values and (
            int(self.values["node.id"]) != int(self.values["broker.id"])
        ):
            raise ConfigError(
                f"node.id={self.values['node.id']} and broker.id={self.values['broker.id']} "
                f"differ; set one of them"
            )
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        listeners = self.listeners
        for lst in listeners:
            if lst.protocol not in SUPPORTED_PROTOCOLS:
                raise ConfigError(
                    f"listener {lst.text} uses security protocol {lst.protocol}, which Spool "
                    f"does not serve yet (it serves {', '.join(SUPPORTED_PROTOCOLS)}), and "
                    f"Spool will not serve it as plaintext"
                )
            if lst.protocol in TLS_PROTOCOLS:
                self.server_tls(lst)
        from spool.broker.sasl_listener import sasl_listeners  # (it imports this module)

        sasl_listeners(self)  # mechanisms, JAAS users: ConfigError before anything listens
        names = {lst.name for lst in listeners}
        for lst in self.advertised_listeners:
            if lst.name not in names:
                raise ConfigError(
                    f"advertised.listeners: listener {lst.text} has a name ({lst.name}) that "
                    f"listeners does not define"
                )
        self.cluster  # noqa: B018  (roles, quorum and listeners together, Kafka's rules)
        from spool.broker import peer_security  # (it reads this module's BrokerConfig)

        try:  # this node's own connections: what Kafka refuses at startup
            peer_security.check(self)
        except ValueError as e:
            raise ConfigError(str(e)) from None
