"""The broker: storage, metadata and the server wired together.

``Broker(config)`` owns the ``LogManager`` (partition logs), the
``MetadataStore`` (topics, ids, config overrides, replayed from the
metadata log) and the ``Server``. Handlers reach everything through
``ctx.broker``. Lifecycle: ``await start()`` binds the listeners, locks the
log dirs and checks their ``meta.properties`` (``spool.storage.logdirs``),
loads the logs, then accepts; ``await shutdown()`` stops accepting, lets
in-flight requests finish, then flushes and closes every log (a clean
shutdown marker spares the next start its recovery scan) and unlocks the
dirs. Blocking storage work runs off the event loop: a request's in a
thread pool, the periodic work (retention, ``flush.ms``, rolled-segment fsyncs,
checkpoints, removal of deleted partitions) in the log manager's background
thread, ticking every ``log.flush.scheduler.interval.ms`` (at most 1 s).

Partition limits (``partition_limit``): a broker holds at most
``max.broker.partitions`` partitions, and no more than its descriptor limit
can keep open (``ulimit -n`` less a reserve for connections, at
``DESCRIPTORS_PER_PARTITION`` each); user topics leave room for the internal
topics not created yet.

Why 2 descriptors a partition when an idle one holds 1 (its active
``.log``; measured 1.003 at the cap under ``ulimit -n 1024``: 386 ``.log``
descriptors for 384 partitions and the metadata log)? The second is
headroom that grows with the partition count, as one of the consumers of
descriptors does: every Fetch response holds a duplicated ``.log``
descriptor per partition it carries until it is sent (measured: 4
consumers each assigned all 384 partitions took the broker from 401 to a
peak of 579 descriptors). The rest does not grow with partitions and comes
out of the fixed reserve (``DESCRIPTOR_RESERVE``, at most a quarter of the
limit): the up to 256 inactive segments kept open
(``spool.storage.segment.OPEN_FILES``), connections, rolls, checkpoints.
At 1 a partition, ``ulimit -n 1024`` would allow 768 partitions, whose 768
``.log`` plus a full 256-file LRU are the whole limit before the first
connection: not safe. Where the limit is generous the default
``max.broker.partitions`` (10000) binds at about the same figure anyway
(9,488 at ``ulimit -n 20000``). A Fetch that still finds no descriptor
answers without records (``spool.broker.handlers.fetch``); nothing dies. Creating topics and partitions (``create_topic``,
``auto_create_topic``, ``create_partitions``) blocks for seconds on big
requests: handlers call them through ``run_blocking``, in the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from spool.broker import metrics_state, peer_security
from spool.broker.config import TLS_PROTOCOLS, BrokerConfig, check_test_only_topic_configs
from spool.broker.config_view import (
    ConfigEntry,
    broker_entries,
    topic_entries,
)
from spool.broker.coordinator_log import CoordinatorLogWriter, PartitionLogWriter
from spool.broker.dispatch import Dispatcher
from spool.broker.dynamic_config import apply_changes
from spool.broker.fetch_sessions import FetchSessionCache
from spool.broker.group_configs import GroupConfigs
from spool.broker.group_runtime import GroupRuntime
from spool.broker.metadata_view import MetadataView, SingleNodeView
from spool.broker.metrics import BrokerMetrics
from spool.broker.producer_ids import ProducerIdManager
from spool.broker.server import Server
from spool.broker.share_persister import CoordinatorPersister
from spool.broker.share_runtime import ShareStateRuntime
from spool.broker.telemetry import ClientMetricsManager
from spool.broker.throttling import ClientQuotas
from spool.broker.txn_runtime import TransactionRuntime
from spool.cluster import features
from spool.cluster.bootstrap import read_bootstrap
from spool.protocol.errors import Errors, KafkaError
from spool.replica.manager import ReplicaManager
from spool.replica.partition import NotLeader  # noqa: F401 (re-exported: handlers' name)
from spool.security.authorizer import StandardAuthorizer
from spool.security.authorizer import configured as configured_authorizer
from spool.security.image import SecurityImage, from_json, to_json
from spool.security.quotas import ConnectionQuotas, has_client_quotas
from spool.share.persister import Persister
from spool.storage.config import validate_topic_overrides
from spool.storage.engine import Storage
from spool.storage.log import PartitionLog
from spool.storage.logdirs import LogDirs, claim_log_dirs
from spool.storage.manager import validate_topic_name
from spool.storage.metadata import PartitionLimit, check_op_size
from spool.util.clock import SystemClock
from spool.util.logs import fields

if TYPE_CHECKING:  # imported where used: KRaft, the HTTP endpoints (a single node's start)
    from spool.broker.admin_http import AdminHttp
    from spool.broker.broker_role import BrokerRole
    from spool.broker.controller_channel import ControllerChannel
    from spool.broker.metrics_http import MetricsHttp
    from spool.broker.quorum import QuorumNode

log = logging.getLogger("spool.broker")
T = TypeVar("T")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
INTERNAL_PARTITIONS_KEY = {
    "__consumer_offsets": "offsets.topic.num.partitions",
    "__transaction_state": "transaction.state.log.num.partitions",
    "__share_group_state": "share.coordinator.state.topic.num.partitions",
}
DESCRIPTORS_PER_PARTITION = 2  # its active .log + a fetch's dup of it (module doc: why not 1)
DESCRIPTOR_RESERVE = 1024  # the inactive-segment LRU (256), connections, rolls, the broker's files


class Broker:
    """One node (``node.id``): a single node leading every partition, or a cluster node
    (``process.roles``) that leads some partitions and follows others.

    Handlers read the cluster through ``view`` (``spool.broker.metadata_view``):
    topics, partitions and their leaders, brokers, the controller, configs; and do leader
    and follower work through ``replicas`` (``spool.replica.manager.ReplicaManager``)."""

    def __init__(self, config: BrokerConfig, clock=None,
                 coordinator_writer: Callable[[Broker], CoordinatorLogWriter] | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        # How the coordinators append (``spool.broker.coordinator_log``); tests inject faults.
        self._coordinator_writer = coordinator_writer or PartitionLogWriter
        self.node_id = config.node_id
        self.cluster = config.cluster  # roles, quorum, listeners (spool.broker.cluster_config)
        # how this node's own connections authenticate (spool.broker.peer_security)
        self.inter_broker_security = peer_security.inter_broker_security(config)
        self.controller_security = peer_security.controller_security(config)
        self.cluster_id = config.get("cluster.id") or "spool"
        # per-group KIP-848/KIP-932 settings (GROUP config resources, spool.broker.group_configs)
        self.group_configs = GroupConfigs(self)
        self.executor = ThreadPoolExecutor(
            max_workers=max(2, config.get_int("num.io.threads")), thread_name_prefix="spool-io"
        )
        self.storage: Storage | None = None
        self.log_dirs: LogDirs | None = None
        self.server: Server | None = None
        self.groups: GroupRuntime | None = None
        self.transactions: TransactionRuntime | None = None
        self.share_manager = None  # share-partition leader, sessions: spool.broker.share_manager
        # KIP-227 fetch sessions (spool.broker.fetch_sessions), consumers' and followers'
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"))
        # the share coordinator (KIP-932, __share_group_state) and the persister over it
        # (spool.share.persister's contract: here, or an RPC to the key's coordinator)
        self.share_state: ShareStateRuntime | None = None
        self.share_persister: Persister = CoordinatorPersister(self)
        self.quorum: QuorumNode | None = None  # KRaft (process.roles set): spool.broker.quorum
        self.role: BrokerRole | None = None  # process.roles has broker: spool.broker.broker_role
        # None: clients are served at once; else once set (a cluster broker: once unfenced)
        self.ready_for_clients: asyncio.Event | None = None
        self._waiters: dict[tuple[str, int], list[asyncio.Future]] = {}
        self.view: MetadataView | None = None
        # a cluster broker's requests to the active controller: spool.broker.broker_role
        self.controller_channel: ControllerChannel | None = None
        # the partitions' replication state; handlers' one way to leader work
        self.replicas: ReplicaManager | None = None
        self.client_metrics: ClientMetricsManager | None = None  # client telemetry (KIP-714)
        self.admin_http: AdminHttp | None = None  # spool.admin.http.listener
        self.console: Any = None  # console.listeners: a spool.console.server.Console
        # collectors register on metrics.registry; served at metrics.listeners (issue 18)
        self.metrics = BrokerMetrics()
        # partitions, controller, logs, groups, lag: computed at scrape time
        self.state_metrics = metrics_state.register(self)
        self.metrics_http: MetricsHttp | None = None  # metrics.listeners
        # authorizer.class.name: None (every request allowed) or the ACL authorizer that
        # handlers ask through spool.broker.authz
        self.authorizer: StandardAuthorizer | None = configured_authorizer(config)
        # ACLs, SCRAM credentials, quotas (``security_image``): replaced on every change
        self._security_image = SecurityImage()
        self._security_lock = asyncio.Lock()  # a single node's security changes, one by one

    # client quotas (spool.broker.throttling): None while no quota is set anywhere, so that a
    # broker without quotas pays one attribute test per request; set with security_image
    client_quotas: ClientQuotas | None = None
    _client_quotas: ClientQuotas | None = None
    _connection_quotas: ConnectionQuotas | None = None
    connection_quotas: ConnectionQuotas | None = None  # None: no ip connection_creation_rate

    # ---- lifecycle

    async def start(self) -> None:
        """Bind the listeners, lock and check the log dirs, load, then serve.

        The order is the point: a second broker on the same port fails at the bind
        and one on the same log dirs at the lock, both before any data is read or
        written. Connections made meanwhile wait in the listen backlog."""
        cluster = self.cluster
        self.server = Server(
            Dispatcher(self),
            [(lst.host, lst.port) for lst in cluster.listeners],
            max_request_size=self.config.get_int("socket.request.max.bytes"),
            max_queued=self.config.get_int("queued.max.requests"),
            idle_timeout_ms=self.config.get_int("connections.max.idle.ms"),
            max_connections=self.config.get_int("max.connections"),
            max_connections_per_ip=self.config.get_int("max.connections.per.ip"),
            queued_max_request_bytes=self.config.get_int("queued.max.request.bytes"),
            names=[lst.name for lst in cluster.listeners],
            controller_names=set(cluster.controller_listener_names),
            tls={lst.name: self.config.server_tls(lst) for lst in cluster.listeners
                 if lst.protocol in TLS_PROTOCOLS},
            tls_handshake_timeout_ms=self.config.get_int("spool.ssl.handshake.timeout.ms"),
        )
        self.server.connection_quotas = self.connection_quotas
        self.metrics.connection_counts = self.server.connection_counts
        self.server.set_connection_creation_rate(
            self.config.get_int("max.connection.creation.rate"),
            self.config.get_int("quota.window.num"),
            self.config.get_int("quota.window.size.seconds"))
        self.server.bind()
        try:
            await self._load()
            if self.cluster.kraft:
                from spool.broker.quorum import QuorumNode

                self.quorum = QuorumNode(self)
                if self.cluster.is_broker:  # follows the log the quorum node keeps
                    from spool.broker.broker_role import BrokerRole

                    self.role = BrokerRole.of(self)
                await self.quorum.start()
        except BaseException:
            if self.quorum is not None:
                await self.quorum.shutdown()
            await self.server.close()
            if self.log_dirs is not None:
                self.log_dirs.release()
            self.executor.shutdown(wait=False)
            raise
        await self.server.start()
        if self.config.get("spool.admin.http.listener"):
            from spool.broker.admin_http import AdminHttp

            self.admin_http = AdminHttp(self, self.config.get("spool.admin.http.listener"))
            await self.admin_http.start()
        self.metrics.topic_exists = lambda name: self.view.topic_id(name) is not None
        if self.config.get_list("metrics.listeners"):
            from spool.broker.metrics_http import MetricsHttp

            self.metrics_http = MetricsHttp(self, self.config.get_list("metrics.listeners"))
            await self.metrics_http.start()
        if self.config.get("console.listeners"):
            self._start_console(self.config.get("console.listeners"))
        if self.role is not None:  # the coordinators start once the broker caught up
            self.replicas.start()
            self.role.join_in_background()
        else:
            self.groups.start()
            self.transactions.start()
            self.share_state.start()
        # retention, flush.ms, rolled-segment fsyncs, checkpoints, removal of deleted
        # partitions: one thread, off the event loop (LogManager.run_background_once)
        tick_ms = min(self.config.get_int("log.flush.scheduler.interval.ms"), 1000)
        self.logs.start_background(max(tick_ms, 10) / 1000.0)
        self.logs.start_cleaner()  # its own thread, off the event loop
        # where it listens is printed once, on stdout (spool.broker.main.serve)
        http: dict[str, list[str]] = {}
        for what, url in self.http_endpoints():
            http.setdefault(what, []).append(url)
        log.info("broker %d started in cluster %s", self.node_id, self.cluster_id,
                 extra=fields(listeners={n: f"{h}:{p}" for n, (h, p)
                                         in self.server.bound_listeners.items()},
                              http_endpoints=http))

    def http_endpoints(self) -> list[tuple[str, str]]:
        """(what, ``http://host:port``) of each HTTP endpoint as bound: ``admin``, ``metrics``
        (one per metrics listener), ``console``."""
        def url(host: str, port: int) -> str:
            return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

        out: list[tuple[str, str]] = []
        if self.admin_http is not None:
            out.append(("admin", url(self.admin_http.host, self.admin_http.port)))
        if self.metrics_http is not None:
            out += [("metrics", url(e.host, e.port)) for e in self.metrics_http.endpoints]
        if self.console is not None:
            out.append(("console", self.console.url))
        return out

    async def _load(self) -> None:
        log_dirs = self.config.log_dirs
        defaults = {
            **self.config.log_defaults(),
            "log.retention.check.interval.ms": self.config.get("log.retention.check.interval.ms"),
        }
        configured = self.config.values.get("cluster.id")  # None: the dirs' own
        owned = list(log_dirs)  # and metadata.log.dir, when it is another dir
        if os.path.abspath(self.cluster.metadata_log_dir) not in map(os.path.abspath, owned):
            owned.append(self.cluster.metadata_log_dir)
        # a KRaft node (process.roles) starts only on dirs `spool storage format` wrote
        self.log_dirs = await self.run_blocking(
            claim_log_dirs, owned, self.node_id, configured, new_cluster_id=self.cluster_id,
            require_formatted=self.cluster.kraft)
        self.cluster_id = self.log_dirs.cluster_id
        self.storage = await self.run_blocking(
            Storage, log_dirs, defaults, self.clock, node_id=self.node_id,
            max_partitions=self.partition_limit().max_partitions, kraft=self.cluster.kraft,
            hw_follows_leo=not self.cluster.kraft)
        if not self.cluster.kraft and self.storage.metadata.image.last_offset < 0:
            # a new single node: what `spool storage format --add-scram` left for it
            boot = await self.run_blocking(read_bootstrap, self.cluster.metadata_log_dir)
            if boot:
                await self.run_blocking(self.storage.metadata.append_security,
                                        [to_json(r) for r in boot])
        if not self.cluster.kraft:  # a new single node finalizes the bootstrap feature levels
            await self.run_blocking(self.storage.metadata.update_features,
                                    features.bootstrap_records)
        if not self.cluster.kraft:  # a cluster: the metadata publisher sets it
            self.security_image = SecurityImage().replay(
                from_json(r) for r in self.storage.metadata.security_records())
        self.view = SingleNodeView(self.node_id, self.storage.metadata, self.storage.logs,
                                   self._advertised_for)
        self.client_metrics = ClientMetricsManager.of(self)  # KIP-714 (spool.broker.telemetry)
        if not self.cluster.kraft:  # what earlier AlterConfigs left (a cluster: the publisher)
            apply_changes(self, {}, self._dynamic_broker())
        self.replicas = ReplicaManager(self)
        if self.cluster.kraft:  # the coordinators follow their partitions' leadership
            self.replicas.add_leadership_listener(self.leadership_changed)
        self.producer_ids = ProducerIdManager(self.metadata)
        writer = self._coordinator_writer(self)
        self.groups = GroupRuntime(self, writer)
        self.transactions = TransactionRuntime(self, writer)
        self.share_state = ShareStateRuntime(self, writer)
        if self.cluster.kraft:
            return  # coordinator partitions load as this broker becomes their leader
        loaded = await self.run_blocking(self.groups.load)
        if loaded:
            log.info("group coordinator replayed %d __consumer_offsets records", loaded)
        await self.run_blocking(self.transactions.load)
        loaded = await self.run_blocking(self.share_state.load)
        if loaded:
            log.info("share coordinator replayed %d __share_group_state records", loaded)
        self.transactions.recover()  # PREPARE_* transactions a crash interrupted

    def leadership_changed(self, topic: str, partition: int, is_leader: bool,
                           leader_epoch: int) -> None:
        """A leadership listener (on the loop): the coordinators load the
        ``__consumer_offsets`` / ``__transaction_state`` partitions this broker leads and
        unload the others (``spool.broker.internal_topic``)."""
        if topic == "__consumer_offsets" and self.groups is not None:
            self.groups.on_leadership(partition, is_leader, leader_epoch)
        elif topic == "__transaction_state" and self.transactions is not None:
            self.transactions.on_leadership(partition, is_leader, leader_epoch)
        elif topic == "__share_group_state" and self.share_state is not None:
            self.share_state.on_leadership(partition, is_leader, leader_epoch)

    @property
    def logs(self):
        return self.storage.logs

    @property
    def metadata(self):
        return self.storage.metadata

    @property
    def security_image(self) -> SecurityImage:
        """ACLs, SCRAM credentials and client quotas now (``spool.security.image``): a
        single node's from its metadata store, a cluster broker's from the last metadata
        image published, a controller-only node's from its controller's image."""
        if self.role is None and self.quorum is not None and self.quorum.controller is not None:
            return self.quorum.controller.controller.image.security
        return self._security_image

    @security_image.setter
    def security_image(self, image: SecurityImage) -> None:
        self._security_image = image
        if has_client_quotas(image.quotas):
            if self._client_quotas is None:
                self._client_quotas = ClientQuotas(self.config, self.clock)
            self._client_quotas.quotas = image.quotas
            self.client_quotas = self._client_quotas
        else:
            self.client_quotas = None
        self._set_connection_quotas(image)

    def _set_connection_quotas(self, image: SecurityImage) -> None:
        """The server's IP connection rates (``connection_creation_rate``), or None."""
        cq = self._connection_quotas
        if cq is None:
            cq = ConnectionQuotas(image.quotas, self.config.get_int("quota.window.num"),
                                  self.config.get_int("quota.window.size.seconds"))
            if cq.enabled:
                self._connection_quotas = cq
        else:
            cq.update(image.quotas)
        self.connection_quotas = cq if cq.enabled else None
        if self.server is not None:
            self.server.connection_quotas = self.connection_quotas

    async def change_security(self, plan: Callable[[SecurityImage], tuple[list, T]]) -> T:
        """A single node's security change: ``plan(current image)`` gives (records, reply);
        the records are committed to the metadata store (one fsynced batch) and replayed
        into ``security_image`` before the reply is returned. One change at a time, so
        each plan sees the one before it; a plan's KafkaError leaves nothing written."""
        async with self._security_lock:
            records, reply = plan(self.security_image)
            if records:
                await self.run_blocking(self.metadata.append_security,
                                        [to_json(r) for r in records])
                self.security_image = self.security_image.replay(records)
            return reply

    def _start_console(self, listen: str) -> None:
        """The web console (issue 18) on threads of this process: a Kafka client of this
        broker's first PLAINTEXT listener, as ``spool console`` would be."""
        plain = [lst for lst in self.cluster.broker_listeners if lst.protocol == "PLAINTEXT"]
        if not plain:
            log.error("console.listeners is set but no broker listener is PLAINTEXT: "
                      "the console does not start")
            return
        from spool.console.server import Console  # confluent-kafka only when asked for

        host, port = self.server.bound_listeners[plain[0].name]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
        self.console = Console({"bootstrap.servers": f"{host}:{port}", "log_level": 0,
                                "client.id": "spool-console"}, listen).start()

    async def shutdown(self) -> None:
        if self.console is not None:  # a client of this broker: first to go
            await asyncio.to_thread(self.console.stop)
        if self.role is not None:  # controlled shutdown while every listener still serves
            await self.role.shutdown(self.cluster.broker_session_timeout_ms / 1000)
        if self.replicas is not None:  # fetchers, the ISR check, delayed produces
            await self.replicas.shutdown()
        if self.quorum is not None:  # a leading controller resigns first (EndQuorumEpoch)
            await self.quorum.shutdown()
        if self.groups is not None:
            await self.groups.stop()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.share_state is not None:
            await self.share_state.stop()
        await self.share_persister.close()
        if self.admin_http is not None:
            await self.admin_http.close()
        if self.metrics_http is not None:
            await self.metrics_http.close()
        await self.state_metrics.close()  # the lag metrics' connections to other brokers
        if self.server is not None:
            await self.server.close()
        if self.share_manager is not None:  # lock timers, pending state writes
            await self.share_manager.close()
        if self.storage is not None:
            await self.run_blocking(self.storage.shutdown)
        self.executor.shutdown(wait=True)
        if self.log_dirs is not None:
            self.log_dirs.release()  # last: the dirs are consistent and closed

    @property
    def advertised_address(self) -> tuple[str, int]:
        """The first advertised broker listener (controller listeners aside)."""
        return self.advertised_address_of(self.cluster.advertised_broker_listeners[0])

    def controller_reachable(self, node_id: int) -> bool:
        """False when this node's last request to controller ``node_id`` failed, on the
        quorum's connections or on the controller channel (``ClusterView.controller_id``)."""
        if node_id == self.node_id:
            return True
        driver = None if self.quorum is None else self.quorum.driver
        channel = self.controller_channel
        return ((driver is None or driver.reachable(node_id))
                and (channel is None or channel.reachable(node_id)))

    def advertised_address_for(self, listener_name: str) -> tuple[str, int]:
        """Where clients of listener ``listener_name`` reach this broker (Kafka answers
        Metadata with the endpoints of the listener the request came in on); the first
        advertised broker listener when that name is not advertised."""
        advertised = self.cluster.advertised_broker_listeners
        lst = next((a for a in advertised if a.name == listener_name), advertised[0])
        return self.advertised_address_of(lst)

    def _advertised_for(self, listener_name: str | None) -> tuple[str, int]:
        if listener_name is None:
            return self.advertised_address
        return self.advertised_address_for(listener_name)

    def advertised_address_of(self, lst) -> tuple[str, int]:
        """``lst``'s (host, port) as clients reach it: port 0 is the port its listener of the
        same name got, 0.0.0.0 (single node only) is 127.0.0.1."""
        host, port = lst.host, lst.port
        if port == 0 and self.server is not None:
            port = self.server.bound_listeners.get(lst.name, (host, 0))[1]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, port

    # ---- topics

    def topic_names(self) -> list[str]:
        return self.view.topic_names()

    def has_topic(self, name: str) -> bool:
        return self.view.partition_count(name) > 0

    def partition_count(self, name: str) -> int:
        return self.view.partition_count(name)

    def partitions_ready(self, name: str) -> bool:
        """Whether every partition of ``name`` has its log (creation runs off the loop:
        a topic is in the metadata before its last partition log exists)."""
        n = self.partition_count(name)
        return n > 0 and all(self.storage.logs.get(name, p) is not None for p in range(n))

    def partition_limit(self, topic: str | None = None) -> PartitionLimit:
        """The most partitions this broker may hold: ``max.broker.partitions``, lowered
        to what the descriptor limit can keep open. A user topic leaves room for the
        internal topics not created yet."""
        cap = self.config.get_int("max.broker.partitions")
        why = f"max.broker.partitions={cap}"
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            by_fds = max(0, soft - min(DESCRIPTOR_RESERVE, soft // 4)) // DESCRIPTORS_PER_PARTITION
            if by_fds < cap:
                cap = by_fds
                why = (f"{cap} partitions, what the descriptor limit (ulimit -n {soft}) "
                       f"keeps open at {DESCRIPTORS_PER_PARTITION} descriptors each")
        reserved = {}
        if topic is not None and topic not in INTERNAL_TOPICS:
            reserved = {t: self.config.get_int(k) for t, k in INTERNAL_PARTITIONS_KEY.items()}
        return PartitionLimit(cap, reserved, why)

    async def run_blocking(self, fn: Callable, *args, **kwargs):
        """Run ``fn`` (blocking file work: loading, creating topics or partitions) in the
        executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        """This broker's log of a partition (leader or not), or UNKNOWN_TOPIC_OR_PARTITION."""
        plog = self.storage.logs.get(topic, partition)
        if plog is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        return plog

    def replica_log(self, topic: str, partition: int) -> PartitionLog | None:
        """This broker's log of a partition it holds: in a cluster None when it holds no
        replica of it; on a single node every partition listed is held (``get_log``)."""
        if self.view.clustered:
            return self.storage.logs.get(topic, partition)
        return self.get_log(topic, partition)

    def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
        internal_ok: bool = False,
    ):
        """Create a topic (metadata record, then its partition logs); returns its metadata.
        Blocking (file work): call it from the executor (``run_blocking``).
        POLICY_VIOLATION beyond ``partition_limit`` or one request's metadata records."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal_ok:
            raise KafkaError(Errors.INVALID_REQUEST, f"{name} is an internal topic")
        if self.has_topic(name):
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self.config.get_int("num.partitions")
        if partitions <= 0:
            raise KafkaError(Errors.INVALID_PARTITIONS, "number of partitions must be positive")
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor")
        if replication_factor <= 0:
            raise KafkaError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be "
                             "larger than 0, or -1 to use the default value.")
        if replication_factor > 1:  # Kafka's controller's words, with this one broker
            raise KafkaError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"1 broker(s) are registered.")
        check_test_only_topic_configs(self.config, configs or {})
        overrides = {k: v for k, v in validate_topic_overrides(configs or {}).items() if v is not None}
        check_op_size(1 + partitions + len(overrides), f"topic {name!r} with {partitions} partitions")
        limit = self.partition_limit(name)
        if validate_only:
            self.metadata.check_limit(limit, name, partitions)
            return None
        self.storage.create_topic(name, partitions, overrides, limit=limit)
        return self.metadata.topic(name)

    def auto_create_topic(self, name: str) -> bool:
        """Create ``name`` with broker defaults if auto-creation allows it (blocking, as
        ``create_topic``; the same limits apply)."""
        if name in INTERNAL_TOPICS or not self.config.get_bool("auto.create.topics.enable"):
            return False
        try:
            self.create_topic(name)
        except KafkaError as e:
            if e.code != Errors.TOPIC_ALREADY_EXISTS:
                raise
        return True

    def topic_id(self, name: str) -> uuid.UUID:
        return self.view.topic_id(name)

    def topic_name_by_id(self, topic_id: uuid.UUID) -> str:
        name = self.view.topic_name(topic_id)
        if name is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
        return name

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` (blocking: folder renames and fsyncs; call it from an executor).
        A topic deleted meanwhile by another request is UNKNOWN_TOPIC_OR_PARTITION."""
        self.storage.delete_topic(name)

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        """Grow ``name`` to ``total`` partitions (blocking, as ``create_topic``; the same
        limits apply)."""
        current = self.partition_count(name)
        if total > current:
            check_op_size(total - current, f"{total - current} new partitions of {name!r}")
        limit = self.partition_limit(name)
        if validate_only:
            self.metadata.check_limit(limit, name, max(0, total - current))
            return
        self.storage.create_partitions(name, total, limit=limit)

    # ---- configs

    def _dynamic_broker(self) -> dict[str, str]:
        return self.view.broker_configs(self.node_id)

    def describe_topic_configs(
        self, name: str | None, extra: dict[str, str] | None = None
    ) -> list[ConfigEntry]:
        overrides = self.view.topic_configs(name) if name else {}
        overrides.update(extra or {})
        return topic_entries(overrides, self.view.broker_resource_configs(str(self.node_id)),
                             self.config.values, self.view.broker_resource_configs(""))

    def describe_broker_configs(self, name: str) -> list[ConfigEntry]:
        """DescribeConfigs of the BROKER resource ``name`` (this node's id, or "")."""
        return broker_entries(name, self.view.broker_resource_configs(str(self.node_id)),
                              self.view.broker_resource_configs(""), self.config.values)

    def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, replace: bool, validate_only: bool
    ) -> None:
        """Set (None: delete) topic overrides; ``replace`` drops every override not given."""
        if replace:
            current = self.view.topic_configs(name)
            changes = {**{k: None for k in current}, **changes}
        check_test_only_topic_configs(self.config, changes)
        validate_topic_overrides(changes)
        if not validate_only:
            self.storage.alter_topic_config(name, changes)

    def alter_broker_configs(self, name: str, changes: dict[str, str | None]) -> None:
        """Store checked dynamic values (None: delete) of the BROKER resource ``name`` (this
        node's id, or "" for the cluster-wide default) on the single node; the logs take
        the topic defaults at once (``spool.broker.dynamic_config``)."""
        if not changes:
            return
        before = self._dynamic_broker()
        self.storage.alter_broker_config(changes, name)
        apply_changes(self, before, self._dynamic_broker())

    # ---- fetch long-polling

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake the delayed fetches of consumers of a partition (new records below its
        high watermark, or the high watermark moved)."""
        self.notify_key((topic, partition))

    def notify_key(self, key) -> None:
        """Wake the fetches waiting on ``key``: ``(topic, partition)`` consumers,
        ``spool.replica.manager.REPLICA_KEY`` keys followers (any append)."""
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_append(
        self,
        keys: Iterable[tuple],
        timeout_s: float,
        interrupt: asyncio.Future | None = None,
    ) -> None:
        """Wait until one of ``keys`` gets an append, the timeout passes, or ``interrupt`` is done."""
        if interrupt is not None and interrupt.done():
            return
        fut = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, []).append(fut)
        try:
            # (asyncio.wait cancels neither: the interrupt is the connection's, shared)
            await asyncio.wait({fut} if interrupt is None else {fut, interrupt},
                               timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for k in keys:
                lst = self._waiters.get(k)
                if lst is not None:
                    with contextlib.suppress(ValueError):
                        lst.remove(fut)
                    if not lst:
                        del self._waiters[k]
