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
Partitions the metadata lists are created only while the broker holds fewer
than ``max_partitions``: beyond it they are left uncreated and logged, so a
metadata log written before the limit existed (a topic of a million
partitions) still starts, and the topic can be deleted.
A topic whose partition logs cannot be created (EMFILE, ENOSPC) is removed
again and the error is KAFKA_STORAGE_ERROR; new partitions of an existing
topic that cannot be created are created by the next start. Creating
thousands of partitions takes seconds: the broker calls these from an
executor, never from the event loop.

Concurrency: topic changes (create, create partitions, delete) run one at a
time under ``_changes``, so a deletion never races the creation of the same
name (a creation in an executor thread and a DeleteTopics used to interleave:
the creation moved the half-deleted folder aside and the deletion's rename
failed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from spool.protocol.errors import Errors, KafkaError
from spool.storage.config import ConfigValue, describe_topic_configs
from spool.storage.log import PartitionLog
from spool.storage.manager import LOCAL_METADATA_DIR, LogManager
from spool.storage.metadata import MetadataStore, PartitionLimit
from spool.util.clock import Clock, as_clock
from spool.util.logs import fields

log = logging.getLogger(__name__)


class Storage:
    """The storage engine of one broker: ``logs`` (LogManager) + ``metadata`` (MetadataStore)."""

    def __init__(
        self,
        log_dirs: list[str],
        broker_props: Mapping[str, object] | None = None,
        clock: Clock | Callable[[], int] | None = None,
        *,
        node_id: int = 0,
        max_partitions: int | None = None,
        kraft: bool = False,
        hw_follows_leo: bool = True,
    ) -> None:
        self.clock = as_clock(clock)
        self.node_id = node_id
        self.max_partitions = max_partitions
        self._changes = threading.RLock()  # one topic change at a time (module doc)
        # hw_follows_leo=False (replication): partition logs open at the checkpointed HW
        self.logs = LogManager(log_dirs, broker_props, self.clock, load=False,
                               hw_follows_leo=hw_follows_leo)
        # KRaft: __cluster_metadata-0 is the Raft log, never replayed as this JSON store
        md_log = self.logs.open_metadata_log(LOCAL_METADATA_DIR) if kraft else \
            self.logs.open_metadata_log()
        self.metadata = MetadataStore(md_log, self.clock, node_id=node_id)
        self.logs.set_dynamic_broker_config(self._dynamic_broker_config())
        for name, cfg in self.metadata.topic_configs().items():
            self.logs.set_topic_overrides(name, cfg)
        # KRaft: the broker opens its replicas as the metadata image names them
        self.logs.load_all(self._expected_partitions(), later=kraft)
        self.reconciled = self.reconcile()

    def _dynamic_broker_config(self) -> dict[str, str]:
        return self.metadata.broker_config(str(self.node_id))

    def _overrides(self, name: str) -> dict[str, str]:
        """One topic's config overrides (not every topic's: creations come by the thousand)."""
        t = self.metadata.topic(name)
        return {} if t is None else t.configs

    def _expected_partitions(self) -> set[tuple[str, int]]:
        return {(n, p) for n, t in self.metadata.topics().items() for p in range(t.partitions)}

    def reconcile(self) -> list[tuple[str, int]]:
        """Create the partitions the metadata lists but the disk lacks; returns them."""
        topics = self.metadata.topics()
        created: list[tuple[str, int]] = []
        room = None if self.max_partitions is None else self.max_partitions - len(
            self.logs.partitions())
        for name, t in topics.items():
            missing = [p for p in range(t.partitions) if self.logs.get(name, p) is None]
            if not missing:
                continue
            if room is not None:
                if len(missing) > room:
                    log.error(
                        "topic %s lists %d partitions; %d of them are not created because "
                        "the broker would exceed max.broker.partitions=%d: delete the topic "
                        "or raise the limit", name, t.partitions, len(missing) - max(room, 0),
                        self.max_partitions)
                missing = missing[: max(room, 0)]
                room -= len(missing)
            self.logs.create_partitions(name, missing, t.configs)
            created += [(name, p) for p in missing]
        return created

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def partition_limit(self, reserved: Mapping[str, int] | None = None) -> PartitionLimit | None:
        """``max_partitions`` as a ``PartitionLimit`` keeping room for ``reserved``."""
        if self.max_partitions is None:
            return None
        return PartitionLimit(self.max_partitions, dict(reserved or {}))

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        limit: PartitionLimit | None = None,
    ) -> str:
        """Record the topic, then create its partition logs (see the module doc)."""
        with self._changes:
            return self._create_topic(name, partitions, configs, limit)

    def _create_topic(self, name, partitions, configs, limit) -> str:
        tid = self.metadata.create_topic(name, partitions, configs, limit=limit)
        overrides = self._overrides(name)
        try:
            self.logs.create_partitions(name, range(partitions), overrides)
        except OSError as e:
            log.error("creating the partitions of %s failed (%s): removing the topic", name, e)
            try:
                self.delete_topic(name)
            except (OSError, KafkaError) as e2:  # the next start reconciles what is left
                log.error("removing %s after the failed creation failed too: %s", name, e2)
            raise KafkaError(
                Errors.KAFKA_STORAGE_ERROR,
                f"creating the partition logs of {name} failed: {e}; the topic was not created",
            ) from e
        log.info("created topic %s with %d partitions (topic id %s)", name, partitions, tid,
                 extra=fields(topic=name, partitions=partitions, topic_id=str(tid),
                              configs=dict(configs or {})))
        return tid

    def create_partitions(
        self, name: str, new_total: int, *, limit: PartitionLimit | None = None
    ) -> None:
        """Record the new partitions, then create their logs (see the module doc)."""
        with self._changes:
            self._create_partitions(name, new_total, limit)

    def _create_partitions(self, name: str, new_total: int, limit) -> None:
        self.metadata.create_partitions(name, new_total, limit=limit)
        overrides = self._overrides(name)
        try:
            self.logs.create_partitions(name, range(new_total), overrides)
        except OSError as e:
            raise KafkaError(
                Errors.KAFKA_STORAGE_ERROR,
                f"creating partition logs of {name} failed: {e}; the next start creates them",
            ) from e
        log.info("topic %s now has %d partitions", name, new_total,
                 extra=fields(topic=name, partitions=new_total))

    def delete_topic(self, name: str) -> str:
        """Record the deletion, then rename the partition folders to ``-delete``."""
        with self._changes:
            tid = self.metadata.delete_topic(name)
            try:
                self.logs.delete_topic(name)
            except OSError as e:  # recorded as deleted; the folder stays, logged at start
                raise KafkaError(
                    Errors.KAFKA_STORAGE_ERROR, f"{name} is deleted but its folders are not: {e}"
                ) from e
            log.info("deleted topic %s (topic id %s)", name, tid,
                     extra=fields(topic=name, topic_id=str(tid)))
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
