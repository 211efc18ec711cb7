"""The log manager: every partition log of this broker across its log dirs.

Layout of one log dir (``log.dirs`` may list several)::

    <log dir>/
      recovery-point-offset-checkpoint     (spool.storage.checkpoint)
      log-start-offset-checkpoint
      replication-offset-checkpoint        high watermarks
      .kafka_cleanshutdown                 present only while the broker is down
                                           after a clean shutdown
      __cluster_metadata-0/                the metadata log (first log dir only)
      orders-0/ orders-1/ ...              partition logs (spool.storage.log)
      orders-2.<uuid hex>-delete/          being deleted (removed in the background)
      orders-9.<uuid hex>-stray/           a folder moved aside (never removed by Spool)

Ownership: Spool removes only what it made: ``-delete`` folders whose name is
exactly ``<topic>-<partition>.<32 hex>-delete``, and files inside partition
dirs it serves. ``load_all(expected)`` (the broker passes the partitions the
metadata lists) opens only those; any other entry of a log dir, a ``name-N``
folder the metadata does not list or a ``backup-2024/``, is logged once and
left alone. ``create_partition`` on a path that exists but is not a loaded
partition renames that folder ``<name>.<uuid hex>-stray`` (logged) instead of
adopting whatever it holds.

Lifecycle: ``LogManager(...)`` opens the dirs and, unless ``load=False``,
loads every partition in parallel (a thread pool; recovery is per
partition) -> serve -> ``shutdown()`` (stop the background thread, flush and
close every log, write checkpoints, then the clean-shutdown marker). The
marker is removed once loading finishes, so a crash after startup is seen as
unclean next time and triggers recovery past the recovery points.

Background work: ``start_background(interval_s)`` (the broker calls it once
serving, with ``interval_s`` = ``log.flush.scheduler.interval.ms`` capped at
one second) is a daemon thread calling ``run_background_once`` every
``interval_s``; each round does what is due:

    retention             every log.retention.check.interval.ms
    flush                 logs whose flush.ms has passed (fsync, recovery point
                          moves to the log end); segments rolled since the last
                          flush (fsync, recovery point moves to the active base);
                          each flush timed into ``flush_stats``
    recovery points file  every log.flush.offset.checkpoint.interval.ms
    log start file        every log.flush.start.offset.checkpoint.interval.ms
    high watermark file   every replica.high.watermark.checkpoint.interval.ms
                          (every partition log's HW collected, then written)
    cleanup               ``.deleted`` segments and ``-delete`` partition folders
                          whose file.delete.delay.ms (log.segment.delete.delay.ms)
                          has passed

so after a kill -9 recovery rescans only what was appended since the last
checkpointed flush. The ``*_once`` methods are the same steps one at a time
(tests call them with a fake clock). Never call these from the event loop:
they fsync.

The log cleaner (``spool.storage.cleaner_manager``) is a thread of its own:
``start_cleaner()`` starts it when ``log.cleaner.enable`` (the broker does,
once serving); ``shutdown`` stops it first.

High watermarks: ``hw_follows_leo`` (default True: one node, HW = LEO after each
append) is given to every partition log; False (replication) opens them with
HW = min(replication-offset-checkpoint, LEO) and leaves moving it to the broker.
The metadata log always follows its LEO (Raft keeps its own HW).

Concurrency: ``_lock`` guards the partition map; each log has its own lock.
``generation`` grows after every change of the partition map (a log opened, created,
deleted; the map cleared): something built from ``get`` after reading the generation
stays true while the generation is the same (``spool.broker.metadata_view`` caches so).
Configs: a partition's ``LogConfig`` = its topic's overrides over the dynamic
broker config over the static broker properties (``spool.storage.config``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from spool.protocol.errors import Errors, KafkaError
from spool.storage.checkpoint import CLEAN_SHUTDOWN_MARKER, DirCheckpoints
from spool.storage.cleaner_manager import LogCleaner
from spool.storage.config import LogConfig, broker_setting, storage_keys
from spool.storage.flush_stats import FlushStats
from spool.storage.log import DELETE_DIR_SUFFIX, PartitionLog, parse_dir_name
from spool.storage.partition_metadata import read_topic_id, write_topic_id
from spool.util.clock import Clock, as_clock
from spool.util.fileio import fsync_dir
from spool.util.logs import fields
from spool.util.topic_names import illegal_topic_reason

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
# A KRaft node's __cluster_metadata-0 is the Raft log (spool.cluster.raft.disk); its broker's
# MetadataStore, which nothing in a cluster writes but producer-id blocks, lives here instead.
LOCAL_METADATA_DIR = "__spool_local_metadata-0"
STRAY_DIR_SUFFIX = "-stray"
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}" + re.escape(DELETE_DIR_SUFFIX) + "$")
# log-dir entries that are Spool's (or Kafka's) own, besides partition folders
_OWN_ENTRIES = frozenset({
    ".lock", "meta.properties", "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint", "cleaner-offset-checkpoint", ".kafka_cleanshutdown",
    "replication-offset-checkpoint", "replication-offset-checkpoint.tmp",
    "recovery-point-offset-checkpoint.tmp", "log-start-offset-checkpoint.tmp",
    "cleaner-offset-checkpoint.tmp", "meta.properties.tmp", "lost+found",
    # spool.cluster.bootstrap's file (format --add-scram's records) and its temporary
    "bootstrap.spool.json", "bootstrap.spool.tmp",
})
METADATA_LOG_CONFIG = LogConfig(retention_ms=-1, retention_bytes=-1, segment_bytes=64 << 20,
                                segment_ms=2**63 - 1, segment_index_bytes=1 << 20)

TopicPartition = tuple[str, int]


def validate_topic_name(name: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], not '.' or '..', not the metadata log's
    name; INVALID_TOPIC otherwise."""
    reason = illegal_topic_reason(name)
    if reason is not None:
        raise KafkaError(Errors.INVALID_TOPIC, reason)
    if name == METADATA_TOPIC:
        raise KafkaError(Errors.INVALID_TOPIC, f"{name} is reserved")


class LogManager:
    """All partition logs of this broker (see the module docstring)."""

    def __init__(
        self,
        log_dirs: list[str] | list[Path],
        defaults: Mapping[str, object] | None = None,
        clock: Clock | Callable[[], int] | None = None,
        *,
        load: bool = True,
        topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
        hw_follows_leo: bool = True,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.static_props = dict(defaults or {})
        self.dynamic_props: dict[str, str] = {}
        self.clock = as_clock(clock)
        self.hw_follows_leo = hw_follows_leo
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self.generation = 0  # grows after each change of _logs (module doc)
        self._topic_overrides: dict[str, dict[str, str]] = {
            t: dict(c) for t, c in (topic_overrides or {}).items()
        }
        self._dir_of: dict[TopicPartition, Path] = {}
        self._config_cache: dict[str, LogConfig] = {}
        self._deleting: list[tuple[int, PartitionLog | Path]] = []
        self.metadata_log: PartitionLog | None = None
        self._bg_thread: threading.Thread | None = None
        self._bg_stop = threading.Event()
        self.cleaner: LogCleaner | None = None
        self.flush_stats = FlushStats()  # background flushes' times (spool.storage.flush_stats)
        self._last_retention_ms = self._last_checkpoint_ms = self.clock.now_ms()
        self._last_start_checkpoint_ms = self._last_checkpoint_ms
        self._last_hw_checkpoint_ms = self._last_checkpoint_ms
        self.checkpoints: dict[Path, DirCheckpoints] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self.checkpoints[d] = DirCheckpoints(d)
            self.had_clean_shutdown[d] = (d / CLEAN_SHUTDOWN_MARKER).exists()
        self.loaded = False
        if load:
            self.load_all()

    # -- configs -------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        cfg = self._config_cache.get(topic)
        if cfg is None:
            # Stored values an older version accepted but this one refuses are logged and
            # dropped: the broker must start on what it wrote itself.
            cfg, problems = LogConfig.from_stored(
                self._topic_overrides.get(topic), self.static_props, self.dynamic_props
            )
            for problem in problems:
                log.warning("topic %s: ignoring a stored config value: %s", topic, problem)
            self._config_cache[topic] = cfg
        return cfg

    def set_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace a topic's overrides and apply them to its live partitions."""
        with self._lock:
            self._topic_overrides[topic] = dict(overrides)
            self._config_cache.pop(topic, None)
            cfg = self.log_config(topic)
            for (t, _), plog in self._logs.items():
                if t == topic:
                    plog.config = cfg

    def set_dynamic_broker_config(self, props: Mapping[str, str]) -> None:
        """Replace the dynamic broker-level values and re-resolve every log's config (keys
        of other layers, SSL or quotas, are left out)."""
        with self._lock:
            self.dynamic_props = storage_keys(props)
            self._config_cache.clear()
            for (t, _), plog in self._logs.items():
                plog.config = self.log_config(t)

    def setting(self, name: str) -> object:
        """A broker-only setting (``num.partitions``...), dynamic over static over default."""
        merged = {**self.static_props, **self.dynamic_props}
        return broker_setting(name, merged)

    # -- loading -------------------------------------------------------------------

    def _partition_dirs(
        self, expected: set[TopicPartition] | None = None, later: bool = False
    ) -> list[tuple[Path, TopicPartition]]:
        """The partition folders to open: every ``name-N`` one, or with ``expected``
        only those. Spool's own ``-delete`` folders are queued for removal; anything
        else is logged and left alone (``later``: a partition folder not expected is
        only noted, at debug level: a cluster broker opens its replicas' folders as its
        metadata image names them, ``open_existing``)."""
        found: list[tuple[Path, TopicPartition]] = []
        now = self.clock.now_ms()
        for d in self.log_dirs:
            for entry in sorted(os.scandir(d), key=lambda e: e.name):
                name = entry.name
                if name in _OWN_ENTRIES or name in (f"{METADATA_TOPIC}-0", LOCAL_METADATA_DIR):
                    continue
                if entry.is_dir(follow_symlinks=False) and _DELETE_DIR.match(name):
                    self._deleting.append((now, Path(entry.path)))
                    continue
                if name.endswith((STRAY_DIR_SUFFIX, "-future")):
                    log.info("%s: left alone (moved aside earlier)", entry.path)
                    continue
                try:
                    tp = parse_dir_name(name) if entry.is_dir(follow_symlinks=False) else None
                except ValueError:
                    tp = None
                if tp is not None and later and expected is not None and tp not in expected:
                    log.debug("%s: opened when the metadata image names it", entry.path)
                    continue
                if tp is None or (expected is not None and tp not in expected):
                    what = "not a partition" if tp is None else "not a partition in the metadata"
                    log.warning("%s: %s; left alone (Spool neither reads nor removes it)",
                                entry.path, what)
                    continue
                found.append((Path(entry.path), tp))
        return found

    def _open_log(self, path: Path, config: LogConfig, *,
                  hw_follows_leo: bool | None = None) -> PartitionLog:
        parent = path.parent
        return PartitionLog(
            path,
            config,
            clock=self.clock,
            checkpoints=self.checkpoints[parent],
            had_clean_shutdown=self.had_clean_shutdown[parent],
            hw_follows_leo=self.hw_follows_leo if hw_follows_leo is None else hw_follows_leo,
        )

    def _timed_open(self, path: Path, config: LogConfig) -> PartitionLog:
        """``_open_log``, then one line saying how long the load (and recovery) took."""
        started = time.perf_counter()
        plog = self._open_log(path, config)
        _log_partition_loaded(plog, (time.perf_counter() - started) * 1000)
        return plog

    def load_all(self, expected: set[TopicPartition] | None = None, *,
                 later: bool = False) -> None:
        """Open every partition directory (only ``expected`` ones when given) in
        parallel, then drop the clean-shutdown marker. ``later``: the others are opened
        later (``open_existing``), not warned about (``_partition_dirs``)."""
        dirs = self._partition_dirs(expected, later)
        seen: dict[TopicPartition, Path] = {}
        for path, tp in dirs:
            if tp in seen:
                raise RuntimeError(f"{tp} is in two log dirs: {seen[tp]} and {path}")
            seen[tp] = path
        threads = int(self.setting("num.recovery.threads.per.data.dir")) * len(self.log_dirs)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(threads, 16))) as pool:
            futures = {
                tp: pool.submit(self._timed_open, path, self.log_config(tp[0]))
                for path, tp in dirs
            }
            loaded = {tp: f.result() for tp, f in futures.items()}
        _log_loaded(loaded, (time.perf_counter() - started) * 1000, self.log_dirs)
        with self._lock:
            self._logs.update(loaded)
            self._dir_of.update(seen)
            self.generation += 1
        for d in self.log_dirs:
            try:
                self.checkpoints[d].write()
            except OSError as e:  # a full disk: the background thread writes them later
                log.warning("%s: checkpoints not written after loading: %s", d, e)
            marker = d / CLEAN_SHUTDOWN_MARKER
            if marker.exists():
                marker.unlink()
                fsync_dir(d)
        self.loaded = True

    def open_metadata_log(self, dir_name: str = f"{METADATA_TOPIC}-0") -> PartitionLog:
        """The ``__cluster_metadata-0`` log in the first log dir (kept out of ``partitions``);
        a KRaft node's store opens ``LOCAL_METADATA_DIR`` instead (the Raft log has the name)."""
        if self.metadata_log is None:
            path = self.log_dirs[0] / dir_name
            self.metadata_log = self._open_log(path, METADATA_LOG_CONFIG, hw_follows_leo=True)
        return self.metadata_log

    # -- partitions ----------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def _dir_counts(self) -> dict[Path, int]:
        """Partitions per log dir (one pass over the map: callers count once per batch)."""
        counts = {d: 0 for d in self.log_dirs}
        if len(self.log_dirs) > 1:
            for d in self._dir_of.values():
                counts[d.parent] = counts.get(d.parent, 0) + 1
        return counts

    def create_partition(
        self,
        topic: str,
        partition: int,
        config: LogConfig | Mapping[str, str] | None = None,
    ) -> PartitionLog:
        """Create (or return the existing) log of a partition. A mapping ``config`` sets
        the topic's overrides; a ``LogConfig`` is used as is for this partition."""
        return self.create_partitions(topic, [partition], config)[0]

    def create_partitions(
        self,
        topic: str,
        partitions: Iterable[int],
        config: LogConfig | Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> list[PartitionLog]:
        """``create_partition`` for many partitions of one topic, each placed in the log
        dir holding the fewest, with one directory fsync per log dir at the end (not one
        per partition). The partition map lock is taken per partition, never across the
        whole batch. With ``topic_id`` each new folder gets its ``partition.metadata``
        (``spool.storage.partition_metadata``). An OSError (EMFILE, ENOSPC) propagates; partitions created before it
        stay."""
        validate_topic_name(topic)
        parts = list(partitions)
        if any(p < 0 for p in parts):
            raise KafkaError(Errors.INVALID_PARTITIONS, f"partition {min(parts)}")
        if isinstance(config, Mapping):
            self.set_topic_overrides(topic, config)
        counts = self._dir_counts()
        touched: set[Path] = set()
        out = []
        try:
            for partition in parts:
                with self._lock:
                    existing = self._logs.get((topic, partition))
                    if existing is not None:
                        out.append(existing)
                        continue
                    parent = min(self.log_dirs, key=lambda d: counts[d])
                    path = parent / f"{topic}-{partition}"
                    touched.add(parent)
                    for d in self.log_dirs:
                        self._move_aside(d / path.name)
                    plog = self._open_log(
                        path, config if isinstance(config, LogConfig) else self.log_config(topic)
                    )
                    if topic_id is not None:
                        write_topic_id(path, topic_id)
                    counts[parent] += 1
                    self._logs[(topic, partition)] = plog
                    self._dir_of[(topic, partition)] = path
                    self.generation += 1
                    out.append(plog)
        except OSError:
            for parent in touched:  # best effort: keep the first error, not a second EMFILE
                with contextlib.suppress(OSError):
                    fsync_dir(parent)
            raise
        for parent in touched:
            fsync_dir(parent)
        return out

    def open_existing(self, topic: str, partitions: Iterable[int],
                      topic_id: uuid.UUID | None = None) -> list[int]:
        """Open the logs of ``topic``'s ``partitions`` whose folders are on disk and not
        open yet (a cluster broker's replicas after a restart: their data is kept, never
        moved aside as ``create_partitions`` would); returns the partitions opened.
        With ``topic_id``, a folder whose ``partition.metadata`` names another topic id
        (a topic of that name deleted and created again meanwhile) is not opened but
        moved aside as ``-stray``; a folder without the file gets it. One folder in two
        log dirs is an error, as in ``load_all``."""
        opened = []
        for partition in partitions:
            if (topic, partition) in self._logs:
                continue
            found = [d / f"{topic}-{partition}" for d in self.log_dirs
                     if (d / f"{topic}-{partition}").is_dir()]
            if not found:
                continue
            if len(found) > 1:
                raise RuntimeError(f"{topic}-{partition} is in two log dirs: {found}")
            if topic_id is not None:
                recorded = read_topic_id(found[0])
                if recorded is not None and recorded != topic_id:
                    log.warning("%s belongs to topic id %s, not %s (deleted and created "
                                "again)", found[0], recorded, topic_id)
                    self._move_aside(found[0])
                    continue
                if recorded is None:
                    write_topic_id(found[0], topic_id)
            plog = self._timed_open(found[0], self.log_config(topic))  # logs its line
            with self._lock:
                self._logs[(topic, partition)] = plog
                self._dir_of[(topic, partition)] = found[0]
                self.generation += 1
            opened.append(partition)
        return opened

    @staticmethod
    def _move_aside(path: Path) -> None:
        """A folder where a new partition goes that Spool does not serve: keep it,
        renamed ``<name>.<uuid hex>-stray``, rather than adopt what it holds."""
        if not os.path.lexists(path):
            return
        target = path.with_name(f"{path.name}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}")
        os.rename(path, target)
        fsync_dir(path.parent)
        log.warning("%s is in the way of a new partition; moved it to %s", path, target)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Stop serving the partition and rename its dir ``-delete``; removed later."""
        with self._lock:
            plog = self._logs.pop((topic, partition), None)
            self._dir_of.pop((topic, partition), None)
            self.generation += 1
        if plog is None:
            return False
        plog.delete()
        due = self.clock.now_ms() + plog.config.file_delete_delay_ms
        with self._lock:
            self._deleting.append((due, plog))
        return True

    def delete_topic(self, topic: str) -> int:
        with self._lock:
            parts = [p for t, p in self._logs if t == topic]
            self._topic_overrides.pop(topic, None)
            self._config_cache.pop(topic, None)
        return sum(self.delete_partition(topic, p) for p in parts)

    # -- background work -----------------------------------------------------------

    def run_retention_once(self, now_ms: int | None = None) -> int:
        """Apply retention to every partition; returns the number of segments deleted."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        self._last_retention_ms = now
        return sum(plog.run_retention(now) for plog in list(self._logs.values()))

    def flush_once(self, now_ms: int | None = None) -> int:
        """Flush what ``flush.ms`` makes due, and segments rolled since the last flush;
        each flush's time goes to ``flush_stats`` (Kafka's LogFlushRateAndTimeMs)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        monotonic = self.clock.monotonic
        flushed = 0
        for plog in self._all_logs():
            started = monotonic()
            if plog.flush_if_due(now):
                self.flush_stats.observe((monotonic() - started) * 1000.0)
                flushed += 1
        return flushed

    def _all_logs(self) -> list[PartitionLog]:
        logs = list(self._logs.values())
        if self.metadata_log is not None:
            logs.append(self.metadata_log)
        return logs

    def _parallel(self, fn: Callable[[PartitionLog], object], logs: list[PartitionLog]) -> None:
        """Run ``fn`` over ``logs`` in a pool: fsync releases the GIL, disks like company."""
        workers = int(self.setting("num.recovery.threads.per.data.dir")) * len(self.log_dirs)
        with ThreadPoolExecutor(max_workers=max(1, min(workers * 4, 32))) as pool:
            for _ in pool.map(fn, logs):
                pass

    def flush_all(self) -> None:
        self._parallel(PartitionLog.flush, self._all_logs())

    def checkpoint(self, *, recovery_points: bool = True, log_starts: bool = True,
                   high_watermarks: bool = True) -> None:
        """Write the recovery point, log start offset and/or high watermark files of every
        log dir (each only if it changed; the HWs are collected from the logs first)."""
        with self._checkpoint_lock:  # collect and write as one: the file never goes back
            if high_watermarks:
                self.collect_high_watermarks()
            for cps in self.checkpoints.values():
                cps.write(recovery_points=recovery_points, log_starts=log_starts,
                          high_watermarks=high_watermarks)
        now = self.clock.now_ms()
        if recovery_points:
            self._last_checkpoint_ms = now
        if log_starts:
            self._last_start_checkpoint_ms = now
        if high_watermarks:
            self._last_hw_checkpoint_ms = now

    def collect_high_watermarks(self) -> None:
        """Put every open partition log's high watermark in its dir's checkpoints."""
        with self._lock:
            logs = list(self._logs.values())
        for plog in logs:
            if not plog.closed:
                plog.checkpoints.update(plog.tp, high_watermark=plog.high_watermark)

    def cleanup_once(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Unlink ``.deleted`` segments and ``-delete`` dirs whose delay has passed."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        n = sum(plog.delete_expired_files(now) for plog in list(self._logs.values()))
        with self._lock:
            due = [x for t, x in self._deleting if force or t <= now]
            self._deleting = [(t, x) for t, x in self._deleting if not (force or t <= now)]
        for item in due:
            if isinstance(item, PartitionLog):
                item.destroy()
            else:
                shutil.rmtree(item, ignore_errors=True)
        return n + len(due)

    def run_background_once(self, now_ms: int | None = None) -> None:
        """One round of everything periodic, each on its configured interval."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        if now - self._last_retention_ms >= int(self.setting("log.retention.check.interval.ms")):
            self.run_retention_once(now)
        self.flush_once(now)
        rp = now - self._last_checkpoint_ms >= int(
            self.setting("log.flush.offset.checkpoint.interval.ms"))
        ls = now - self._last_start_checkpoint_ms >= int(
            self.setting("log.flush.start.offset.checkpoint.interval.ms"))
        hw = now - self._last_hw_checkpoint_ms >= int(
            self.setting("replica.high.watermark.checkpoint.interval.ms"))
        if rp or ls or hw:
            self.checkpoint(recovery_points=rp, log_starts=ls, high_watermarks=hw)
        self.cleanup_once(now)

    def start_background(self, interval_s: float = 1.0) -> threading.Thread:
        """Run ``run_background_once`` every ``interval_s`` in a daemon thread."""
        if self._bg_thread is not None:
            return self._bg_thread
        self._bg_stop.clear()

        def loop() -> None:
            while not self._bg_stop.wait(interval_s):
                try:
                    self.run_background_once()
                except Exception:  # keep the thread alive; the next round retries
                    log.exception("storage background round failed")

        self._bg_thread = threading.Thread(target=loop, name="spool-storage-bg", daemon=True)
        self._bg_thread.start()
        return self._bg_thread

    def stop_background(self) -> None:
        if self._bg_thread is not None:
            self._bg_stop.set()
            self._bg_thread.join()
            self._bg_thread = None

    def start_cleaner(self) -> LogCleaner | None:
        """Start the log cleaner thread if ``log.cleaner.enable`` and ``log.cleaner.threads``
        >= 1 (one thread whatever the number; idempotent)."""
        enabled = bool(self.setting("log.cleaner.enable"))
        if self.cleaner is None and enabled and int(self.setting("log.cleaner.threads")) >= 1:
            self.cleaner = LogCleaner(self)
            self.cleaner.start()
        return self.cleaner

    def stop_cleaner(self) -> None:
        if self.cleaner is not None:
            self.cleaner.stop()
            self.cleaner = None

    # -- shutdown ------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop background work, flush and close every log, write checkpoints, then the
        clean-shutdown marker (so the next start skips recovery)."""
        self.stop_cleaner()
        self.stop_background()
        self._parallel(PartitionLog.close, self._all_logs())
        self.cleanup_once(force=True)
        for d in self.log_dirs:
            self.checkpoints[d].write(force=True)
            if self.loaded:  # an unloaded (unrecovered) dir must not look clean
                (d / CLEAN_SHUTDOWN_MARKER).touch()
                fsync_dir(d)
        with self._lock:
            self._logs.clear()
            self.generation += 1


def _size(n: int) -> str:
    """1234 -> "1234 bytes", 1234567 -> "1.2 MB" (log lines)."""
    if n < 10_000:
        return f"{n} bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"  # (not reached)


def _log_partition_loaded(plog: PartitionLog, ms: float) -> None:
    """One line per partition opened at start: its offsets, and the recovery it needed."""
    res = plog.load_result
    topic, partition = plog.tp
    recovery = ""
    if res.recovered_segments:
        recovery = (f"; recovered {res.recovered_segments} segment(s): "
                    f"{_size(res.recovered_bytes)} rescanned, "
                    f"{res.truncated_bytes} bytes truncated")
    log.info("loaded %s-%d in %.0f ms: offsets [%d, %d), %d segment(s)%s", topic, partition,
             ms, plog.log_start_offset, plog.log_end_offset, len(plog.segments), recovery,
             extra=fields(topic=topic, partition=partition, load_ms=round(ms, 1),
                          log_start_offset=plog.log_start_offset,
                          log_end_offset=plog.log_end_offset,
                          recovered_segments=res.recovered_segments,
                          truncated_bytes=res.truncated_bytes))


def _log_loaded(loaded: Mapping[tuple[str, int], PartitionLog], ms: float,
                log_dirs: Iterable[Path]) -> None:
    """The start-up summary: partitions, absolute log dirs, time, what was recovered."""
    dirs = [os.path.abspath(d) for d in log_dirs]
    recovered = [p for p in loaded.values() if p.load_result.recovered_segments]
    segments = sum(p.load_result.recovered_segments for p in recovered)
    size = _size(sum(p.load_result.recovered_bytes for p in recovered))
    what = (f"; {len(recovered)} recovered after an unclean shutdown ({segments} segment(s), "
            f"{size} rescanned)" if recovered else "")
    log.info("loaded %d partitions from %s in %.0f ms%s", len(loaded), ", ".join(dirs), ms,
             what, extra=fields(partitions=len(loaded), log_dirs=dirs, load_ms=round(ms, 1),
                                recovered_partitions=len(recovered),
                                recovered_segments=segments))
