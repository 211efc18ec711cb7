"""``QuorumNode``: this process's part in the KRaft quorum (``process.roles`` set).

It owns the metadata log (``DiskRaftLog`` on ``__cluster_metadata-0`` in
``metadata.log.dir``, default the first log dir), the ``quorum-state`` file,
the ``RaftDriver`` (a voter on a controller node, an observer on a
broker-only one) and, on a controller, the ``ControllerRuntime``. Handlers
reach it as ``broker.quorum`` (``.driver``, ``.controller``). The broker
role's followers of the log (the metadata image the broker publishes) are
added with ``add_listener`` before ``start``. Snapshots are taken of the
controller's image on a controller, of the broker's ``MetadataLoader`` image
on a broker-only node, so every node's log is bounded.

Lifecycle (the broker calls it once its log dirs are claimed):
``QuorumNode(broker)`` -> ``add_listener(...)`` -> ``await start()`` (opens
the log in the executor, starts the driver) -> ``await shutdown()`` (a
leading controller resigns first: EndQuorumEpoch, then a short wait for a
successor; then the log is closed).

The single node (``process.roles`` unset) has no QuorumNode: it keeps its
JSON metadata store (``spool.storage.metadata``) in ``__cluster_metadata-0``;
a KRaft node's broker storage keeps that store in ``__spool_local_metadata-0``
(``Storage(kraft=True)``), so the Raft log is never replayed as JSON.
"""

from __future__ import annotations

import logging
import random

from spool.broker.controller_runtime import ControllerRuntime
from spool.broker.raft_driver import RaftDriver, RaftListener
from spool.cluster.bootstrap import read_bootstrap
from spool.cluster.loader import MetadataLoader
from spool.cluster.ops import ControllerConfig
from spool.cluster.raft.config import RaftConfig
from spool.cluster.raft.disk import DiskRaftLog, FileQuorumStateStore
from spool.cluster.snapshot import snapshot_records
from spool.protocol.metadata_records import encode_record

log = logging.getLogger("spool.quorum")


def controller_config(config) -> ControllerConfig:
    """The controller's settings from the node's config (Kafka's names)."""
    return ControllerConfig(
        num_partitions=config.get_int("num.partitions"),
        default_replication_factor=config.get_int("default.replication.factor"),
        broker_session_timeout_ms=config.get_int("broker.session.timeout.ms"),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_ms=1000 * config.get_int(
            "leader.imbalance.check.interval.seconds"),
        unclean_leader_election_interval_ms=config.get_int("unclean.leader.election.interval.ms"),
        static_props=dict(config.values),
        bootstrap_records=tuple(read_bootstrap(config.cluster.metadata_log_dir)),
    )


class QuorumNode:
    """The quorum side of one node (module doc)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.cluster = broker.cluster
        self.driver: RaftDriver | None = None
        self.controller: ControllerRuntime | None = None
        self._listeners: list[RaftListener] = []

    def add_listener(self, listener: RaftListener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        cc = self.cluster
        b = self.broker
        log_store = await b.run_blocking(DiskRaftLog, cc.metadata_log_dir, clock=b.clock)
        state = FileQuorumStateStore(cc.metadata_log_dir)
        raft_config = RaftConfig(
            cluster_id=b.cluster_id,
            election_timeout_ms=cc.election_timeout_ms,
            fetch_timeout_ms=cc.fetch_timeout_ms,
            election_backoff_max_ms=cc.election_backoff_max_ms,
            request_timeout_ms=cc.request_timeout_ms,
            retry_backoff_ms=cc.retry_backoff_ms,
        )
        self.driver = RaftDriver(
            cc.node_id, cc.voters, log_store, state, raft_config, b.run_blocking,
            rng=random.Random(),
            snapshot_max_bytes=cc.metadata_snapshot_max_new_record_bytes,
            snapshot_max_interval_ms=cc.metadata_snapshot_max_interval_ms,
            security=b.controller_security)
        if cc.is_controller:
            self.controller = ControllerRuntime(
                self.driver, controller_config(b.config), cluster_id=b.cluster_id)
        for lst in self._listeners:
            self.driver.add_listener(lst)
            if self.controller is None and isinstance(lst, MetadataLoader):
                # a broker-only node snapshots its own image, so its log is bounded too
                self.driver.set_snapshot_source(
                    lambda loader=lst: [encode_record(r) for r in snapshot_records(loader.image)])
        await self.driver.start()

    async def shutdown(self) -> None:
        if self.controller is not None:
            await self.controller.shutdown()
        if self.driver is not None:
            await self.driver.shutdown()
