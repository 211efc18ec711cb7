"""``Storage``: the log manager and the metadata log, opened and kept consistent together.

Startup order (``Storage.open``)::

    LogManager(load=False)           dirs, checkpoints, clean-shutdown markers
    metadata log -> MetadataStore    replay __cluster_metadata-0 into the image
    dynamic broker config applied    (ConfigRecords for the broker resource)
    LogManager.load_all(expected)    every partition the metadata lists, with its
                                     topic's overrides; any other folder is logged
                                     and left alone (never read, never deleted)
    reconcile                        partitions the metadata lists but the disk
                                     lacks are created

Each change writes the metadata first (fsynced) and then touches partition
directories, so a crash in between is repaired by ``reconcile`` on restart:
a missing partition is created; the folder of a partition deleted just
before the crash stays on disk, not served, and is logged at every start
(Kafka's "stray" log; Spool does not delete what it cannot prove is its own).
Should a topic of that name be created again, the old folder is moved aside
as ``-stray``, never adopted.
The broker calls these from an executor or accepts the short fsync on the
loop (metadata changes are rare).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from spool.storage.config import ConfigValue, describe_topic_configs
from spool.storage.log import PartitionLog
from spool.storage.manager import LogManager
from spool.storage.metadata import MetadataStore
from spool.util.clock import Clock, as_clock


class Storage:
    """The storage engine of one broker: ``logs`` (LogManager) + ``metadata`` (MetadataStore)."""

    def __init__(
        self,
        log_dirs: list[str],
        broker_props: Mapping[str, object] | None = None,
        clock: Clock | Callable[[], int] | None = None,
        *,
        node_id: int = 0,
    ) -> None:
        self.clock = as_clock(clock)
        self.node_id = node_id
        self.logs = LogManager(log_dirs, broker_props, self.clock, load=False)
        self.metadata = MetadataStore(self.logs.open_metadata_log(), self.clock, node_id=node_id)
        self.logs.set_dynamic_broker_config(self._dynamic_broker_config())
        for name, cfg in self.metadata.topic_configs().items():
            self.logs.set_topic_overrides(name, cfg)
        self.logs.load_all(self._expected_partitions())
        self.reconciled = self.reconcile()

    def _dynamic_broker_config(self) -> dict[str, str]:
        return self.metadata.broker_config(str(self.node_id))

    def _expected_partitions(self) -> set[tuple[str, int]]:
        return {(n, p) for n, t in self.metadata.topics().items() for p in range(t.partitions)}

    def reconcile(self) -> list[tuple[str, int]]:
        """Create the partitions the metadata lists but the disk lacks; returns them."""
        topics = self.metadata.topics()
        created = []
        for name, t in topics.items():
            for p in range(t.partitions):
                if self.logs.get(name, p) is None:
                    self.logs.create_partition(name, p, t.configs)
                    created.append((name, p))
        return created

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> str:
        tid = self.metadata.create_topic(name, partitions, configs)
        overrides = self.metadata.topic_configs()[name]
        for p in range(partitions):
            self.logs.create_partition(name, p, overrides)
        return tid

    def create_partitions(self, name: str, new_total: int) -> None:
        self.metadata.create_partitions(name, new_total)
        overrides = self.metadata.topic_configs()[name]
        for p in range(new_total):
            self.logs.create_partition(name, p, overrides)

    def delete_topic(self, name: str) -> str:
        tid = self.metadata.delete_topic(name)
        self.logs.delete_topic(name)
        return tid

    def alter_topic_config(self, name: str, changes: Mapping[str, str | None]) -> None:
        overrides = self.metadata.alter_topic_config(name, changes)
        self.logs.set_topic_overrides(name, overrides)

    def alter_broker_config(self, changes: Mapping[str, str | None], broker: str = "") -> None:
        self.metadata.alter_broker_config(changes, broker)
        self.logs.set_dynamic_broker_config(self._dynamic_broker_config())

    def describe_topic_config(self, name: str) -> list[ConfigValue]:
        t = self.metadata.topic(name)
        own, cluster_default = self.metadata.broker_config_layers(str(self.node_id))
        return describe_topic_configs(
            t.configs if t else {}, own, self.logs.static_props, cluster_default
        )

    def shutdown(self) -> None:
        self.logs.shutdown()
