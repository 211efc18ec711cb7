"""Running a source task: poll -> transformations -> converters -> Spool (Kafka's
WorkerSourceTask and ExactlyOnceWorkerSourceTask).

Each ``poll()``'s records are transformed (``transforms``), converted (key, value and
header converters) and produced with the record's topic, partition, timestamp and
headers. Failures in those stages go through ``errors.ErrorHandler`` (stages
TRANSFORMATION, KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER): a skipped or filtered
record gets ``commit_record(record, None)`` and its offset counts as acknowledged.

**At-least-once** (the default): an idempotent producer (``enable.idempotence``,
``acks=all``, murmur2 partitioning as Kafka's Java producer). ``SubmittedRecords`` keeps
each source partition's records in poll order; every ``offset.flush.interval.ms`` the
offset of the last record of each partition whose every earlier record is acknowledged
is written with ``OffsetStore.put`` (durable when it returns), then ``task.commit()``.
``commit_record(record, metadata)`` is called as each record is acknowledged. A record
the producer cannot deliver fails the task (nothing after it is committed). On stop:
the producer is flushed (up to ``offset.flush.timeout.ms``), the offsets flushed once
more, ``task.stop()`` already called from the stopping thread to wake ``poll``.

**Exactly-once** (worker ``exactly.once.source.support=enabled``, KIP-618): a
transactional producer, ``transactional.id`` ``<group.id>-<connector>-<task>`` (its
``init_transactions`` fences an earlier instance of the same task). A transaction holds
the records and, written to the offsets topic with ``OffsetStore.record`` (on the
partition ``OffsetStore.partition_for`` chooses, as its own writes), the offset of
each source partition's last record in it; it is committed after each non-empty poll
(``transaction.boundary=poll``, the default) or once ``transaction.boundary.interval.ms``
(default ``offset.flush.interval.ms``) has passed (``interval``). ``connector``
boundaries need ``can_define_transaction_boundaries`` and are then committed per poll
(Spool has no TransactionContext). ``commit_record`` and ``commit`` follow the
transaction's commit. A delivery or commit failure aborts the transaction and fails
the task: its records and offsets are then invisible to read_committed consumers and
the next instance resumes from the last committed offsets.

Topics are created on first use when missing, with the broker's default partitions and
replication factor (KIP-158's ``topic.creation.*`` is not supported).
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.connect import api
from spool.connect.worker_task import WorkerTask

if TYPE_CHECKING:
    from spool.connect.herder import TaskId
    from spool.connect.worker import StatusListener, Worker

log = logging.getLogger(__name__)

STAGES = ("TRANSFORMATION", "KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER")


def load_task_class(name: str) -> type:
    """``pkg.mod:Class`` or ``pkg.mod.Class`` (what ``task.class`` holds)."""
    mod, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
    try:
        obj: Any = importlib.import_module(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as e:
        raise api.ConnectError(f"Failed to load task class {name}: {e}") from e
    return obj


def partition_key(partition: dict[str, Any]) -> Any:
    """A hashable key equal for equal source partitions."""
    try:
        key: Any = tuple(sorted(partition.items()))
        hash(key)
        return key
    except TypeError:  # nested values
        return json.dumps(partition, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class Submitted:
    partition: dict[str, Any]
    offset: dict[str, Any]
    acked: bool = False


class SubmittedRecords:
    """Records in flight per source partition, in poll order (Kafka's SubmittedRecords);
    used by the task's thread only."""

    def __init__(self) -> None:
        self._queues: dict[Any, deque[Submitted]] = {}
        self._last: tuple[dict[str, Any] | None, Any] = (None, None)

    def submit(self, record: api.SourceRecord) -> Submitted | None:
        if record.source_partition is None or record.source_offset is None:
            return None
        s = Submitted(record.source_partition, record.source_offset)
        last, key = self._last
        if last is not s.partition:  # records of one poll often share the partition dict
            key = partition_key(s.partition)
            self._last = (s.partition, key)
        self._queues.setdefault(key, deque()).append(s)
        return s

    def committable(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Pop each partition's acknowledged prefix; the last offset of each."""
        out = []
        for key in list(self._queues):
            q = self._queues[key]
            last = None
            while q and q[0].acked:
                last = q.popleft()
            if last is not None:
                out.append((last.partition, last.offset))
            if not q:
                del self._queues[key]
        return out

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())


class WorkerSourceTask(WorkerTask):
    """One source task on its thread (module doc)."""

    def __init__(self, worker: Worker, task_id: TaskId, connector_props: dict[str, str],
                 task_props: dict[str, str], status: StatusListener,
                 target_state: str) -> None:
        super().__init__(worker, task_id, connector_props, task_props, status, target_state)
        self.task: api.SourceTask | None = None
        self.producer: Producer | None = None
        self.admin: AdminClient | None = None
        self.submitted = SubmittedRecords()
        self.known_topics: set[str] = set()
        self.failure: BaseException | None = None
        cfg = worker.config
        self.flush_interval = _ms(cfg.get("offset.flush.interval.ms"), 60000)
        self.flush_timeout = _ms(cfg.get("offset.flush.timeout.ms"), 5000)
        self.eos = str(cfg.get("exactly.once.source.support") or "disabled").lower() == "enabled"
        self.boundary = connector_props.get("transaction.boundary", "poll").strip().lower()
        self.boundary_interval = _ms(connector_props.get("transaction.boundary.interval.ms"),
                                     self.flush_interval * 1000) if self.eos else 0.0
        self.in_txn = False
        self.txn_started = 0.0
        self.txn_offsets: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.txn_acks: list[tuple[api.SourceRecord, api.RecordMetadata | None]] = []
        self._task_stopped = False

    # ---- set-up

    def initialize(self) -> None:
        w = self.worker
        self.cfg = w.connector_config(self.connector_props)
        self.key_converter = self.cfg.key_converter()
        self.value_converter = self.cfg.value_converter()
        self.header_converter = self.cfg.header_converter()
        self.chain = self.cfg.transformation_chain()
        pconf = {**w.config.client_config("producer"), **self.cfg.client_overrides("producer")}
        self.errors = w.error_handler(self.cfg, pconf, self.id)
        pconf.setdefault("client.id", f"connector-producer-{self.id}")
        pconf.setdefault("partitioner", "murmur2_random")
        pconf.setdefault("linger.ms", 5)
        if self.eos:
            self._check_boundary()
            pconf["transactional.id"] = (f"{w.config.get('group.id') or 'connect'}-"
                                         f"{self.id.connector}-{self.id.task}")
            pconf["enable.idempotence"] = True
        else:
            pconf.setdefault("enable.idempotence", True)
        pconf.setdefault("acks", "all")
        pconf["error_cb"] = self._on_client_error
        self.producer = Producer(pconf)
        self.admin = AdminClient(w.config.client_config("admin"))
        if self.eos:
            self.producer.init_transactions(max(self.flush_timeout, 30.0))
        # the offsets of the last instance of this task (maybe on another worker) first
        w.offsets.read_to_end(max(self.flush_timeout, 30.0))
        task_cls = load_task_class(self.task_props["task.class"])
        self.task = task_cls()
        ctx = api.SourceTaskContext()
        ctx.offset_storage_reader = w.offsets.reader(self.id.connector)
        ctx.configs = dict(self.task_props)
        self.task.initialize(ctx)
        self.task.start(dict(self.task_props))

    def _check_boundary(self) -> None:
        if self.boundary not in ("poll", "interval", "connector"):
            raise api.ConfigError({"transaction.boundary": [
                f"Invalid value {self.boundary} for configuration transaction.boundary: "
                "String must be one of: poll, interval, connector"]})
        if self.boundary == "connector":
            connector = self.worker.connector_plugin(self.connector_props)
            if not connector.can_define_transaction_boundaries(self.connector_props):
                raise api.ConnectError(
                    "The connector does not support connector-defined transaction "
                    "boundaries with the given configuration. Please either switch to a "
                    "different transaction boundary type, or reconfigure the connector")

    # ---- the loop

    def execute(self) -> None:
        last_flush = time.monotonic()
        while not self.stopping:
            if self.check_paused():
                self.await_unpaused(1.0)
                continue
            records = self._poll()
            if records:
                if self.eos:
                    self._send_transactional(records)
                else:
                    self._send(records)
            elif self.eos:
                self._maybe_end_txn(force=self.boundary != "interval")
            self._raise_failure()
            if self.producer is not None:
                self.producer.poll(0)
            self._raise_failure()
            now = time.monotonic()
            if not self.eos and now - last_flush >= self.flush_interval:
                self.commit_offsets()
                last_flush = now

    def _poll(self) -> list[api.SourceRecord]:
        assert self.task is not None
        try:
            return self.task.poll() or []
        except api.RetriableError as e:  # as Kafka: logged, polled again
            log.warning("%s: poll() threw a RetriableError, will retry: %s", self._label(), e)
            self.sleep(0.1)
            return []

    def on_pause(self) -> None:
        if self.eos:
            self._maybe_end_txn(force=True)
        elif self.producer is not None:
            # everything sent before PAUSED is reported (flush(timeout) may leave some)
            while self.producer.flush(self.flush_timeout) and not self.stopping:
                self._raise_failure()
            self._raise_failure()

    def on_stop(self) -> None:
        errors = getattr(self, "errors", None)
        if errors is not None:
            errors.stop()
        task = self.task
        if task is not None and not self._task_stopped:
            self._task_stopped = True
            try:
                task.stop()
            except Exception:
                log.exception("%s: task.stop() failed", self._label())

    def close(self) -> None:
        try:
            if self.producer is not None and self.task is not None:
                if not self.eos:
                    # what is acknowledged is committable even after a failure (Kafka)
                    self.producer.flush(self.flush_timeout)
                    self.commit_offsets()
                elif not self.failed and not self.cancelled:
                    self._maybe_end_txn(force=True)
        finally:
            if self.in_txn and self.producer is not None:
                self._abort()
            if self.producer is not None:
                self.producer.flush(0)
            # the clients go now, not at the next garbage collection (their delivery
            # callbacks refer back to this task)
            self.producer = self.admin = None
            self.failure = None  # its traceback's frames hold the producer too
            if getattr(self, "chain", None) is not None:
                self.chain.close()
            if getattr(self, "errors", None) is not None:
                self.errors.close()
            self.on_stop()  # once: a task stopped before initialize() ended

    # ---- converting and sending

    def _convert(self, record: api.SourceRecord) -> tuple[Any, ...] | None:
        """The record as (topic, partition, key, value, headers, timestamp), or None when
        a transformation dropped it or an error was tolerated."""
        errors = self.errors
        skip = type(errors).SKIP
        out = errors.execute("TRANSFORMATION", self.chain.apply, record)  # no DLQ: sources
        if out is None or out is skip:
            return None
        topic = out.topic
        headers = []
        for h in out.headers:
            hv = errors.execute("HEADER_CONVERTER", self.header_converter.from_connect_header,
                                topic, h.key, h.schema, h.value,
                                executing_class=type(self.header_converter))
            if hv is skip:
                return None
            headers.append((h.key, hv))
        key = errors.execute("KEY_CONVERTER", self.key_converter.from_connect_data,
                             topic, out.headers, out.key_schema, out.key,
                             executing_class=type(self.key_converter))
        if key is skip:
            return None
        value = errors.execute("VALUE_CONVERTER", self.value_converter.from_connect_data,
                               topic, out.headers, out.value_schema, out.value,
                               executing_class=type(self.value_converter))
        if value is skip:
            return None
        return topic, out.kafka_partition, key, value, headers, out.timestamp

    def _produce(self, record: api.SourceRecord, converted: tuple[Any, ...], cb: Any) -> None:
        topic, partition, key, value, headers, ts = converted
        self._ensure_topic(topic)
        kw: dict[str, Any] = {"key": key, "value": value, "on_delivery": cb}
        if partition is not None:
            kw["partition"] = partition
        if ts is not None:
            kw["timestamp"] = int(ts)
        if headers:
            kw["headers"] = headers
        assert self.producer is not None
        while True:
            try:
                self.producer.produce(topic, **kw)
                return
            except BufferError:
                self.producer.poll(0.1)
                self._raise_failure()

    def _send(self, records: list[api.SourceRecord]) -> None:
        for record in records:
            if self.stopping and self.failure is not None:
                return
            converted = self._convert(record)
            sub = self.submitted.submit(record)
            if converted is None:
                if sub is not None:
                    sub.acked = True
                self._commit_record(record, None)
                continue
            self._produce(record, converted, self._on_delivery(record, sub))

    def _on_delivery(self, record: api.SourceRecord, sub: Submitted | None) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                if self.failure is None:
                    self.failure = api.ConnectError(
                        f"Unrecoverable exception from producer send callback: {err}")
                return
            if sub is not None:
                sub.acked = True
            self._commit_record(record, _metadata(msg))
        return cb

    def _commit_record(self, record: api.SourceRecord,
                       metadata: api.RecordMetadata | None) -> None:
        if self.task is None:
            return
        try:
            self.task.commit_record(record, metadata)
        except Exception:
            log.exception("%s: exception thrown while calling task.commit_record()",
                          self._label())

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _ensure_topic(self, topic: str) -> None:
        if topic in self.known_topics:
            return
        assert self.admin is not None
        md = self.admin.list_topics(topic=None, timeout=self.flush_timeout)
        if topic not in md.topics and self.worker.config.get("topic.creation.enable") \
                is not False:
            fut = self.admin.create_topics([NewTopic(topic, -1, -1)])[topic]
            try:
                fut.result(self.flush_timeout)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise api.ConnectError(f"Failed to create topic {topic}: {e}") from e
            log.info("%s: created topic %s", self._label(), topic)
        self.known_topics.add(topic)
        self.worker.topic_used(self.id.connector, topic)

    # ---- at-least-once offsets

    def commit_offsets(self) -> bool:
        """Write the committable offsets, then ``task.commit()``; False on a timeout."""
        offsets = self.submitted.committable()
        if offsets:
            try:
                self.worker.offsets.put(self.id.connector, offsets, self.flush_timeout)
            except Exception:
                log.exception("%s: failed to commit offsets", self._label())
                return False
        if self.task is not None:
            try:
                self.task.commit()
            except Exception:
                log.exception("%s: exception thrown while calling task.commit()",
                              self._label())
        return True

    # ---- exactly-once

    def _send_transactional(self, records: list[api.SourceRecord]) -> None:
        assert self.producer is not None
        if not self.in_txn:
            self._txn_call(self.producer.begin_transaction)
            self.in_txn = True
            self.txn_started = time.monotonic()
        for record in records:
            converted = self._convert(record)
            if record.source_partition is not None and record.source_offset is not None:
                self.txn_offsets[partition_key(record.source_partition)] = (
                    record.source_partition, record.source_offset)
            if converted is None:
                self.txn_acks.append((record, None))
                continue
            self._produce(record, converted, self._on_txn_delivery(record))
        self._maybe_end_txn(force=self.boundary != "interval")

    def _on_client_error(self, err: KafkaError) -> None:
        if err.fatal():  # e.g. fenced by a newer instance of this task: it cannot go on
            # the cause of everything after it (purged records): it wins
            self.failure = api.ConnectError(f"Producer fatal error: {err}")
        else:
            log.debug("%s: producer error: %s", self._label(), err)

    def _txn_call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``; a failure (fenced, timed out, a record not delivered) aborts the
        transaction and is raised as the ConnectError that fails the task, naming the
        producer's fatal error (fenced) when there is one."""
        try:
            return fn(*args)
        except Exception as e:
            e.__traceback__ = None  # its frames would keep the producer alive
            error = self._abort() or self.failure or api.ConnectError(
                f"Transaction of {self.id} failed: {e}")
            error.__cause__ = e
        del fn, args
        raise error

    def _abort(self) -> api.ConnectError | None:
        """Abort the open transaction; the producer's fatal error if it has one."""
        assert self.producer is not None
        self.in_txn = False
        try:
            self.producer.abort_transaction(self.flush_timeout)
        except KafkaException as ke:
            err = ke.args[0]
            if isinstance(err, KafkaError) and err.fatal():
                self.failure = api.ConnectError(f"Producer fatal error: {err}")
                return self.failure
        except Exception:
            log.debug("%s: abort_transaction failed", self._label(), exc_info=True)
        return None

    def _on_txn_delivery(self, record: api.SourceRecord) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                if self.failure is None:
                    self.failure = api.ConnectError(
                        f"Unrecoverable exception from producer send callback: {err}")
                return
            self.txn_acks.append((record, _metadata(msg)))
        return cb

    def _maybe_end_txn(self, force: bool) -> None:
        if not self.in_txn or self.producer is None:
            return
        if not force and time.monotonic() - self.txn_started < self.boundary_interval:
            return
        store = self.worker.offsets
        for partition, offset in self.txn_offsets.values():
            key, value = store.record(self.id.connector, partition, offset)
            self._produce_offset(store.topic, store.partition_for(key), key, value)
        self._txn_call(self.producer.flush, self.flush_timeout)
        self._raise_failure()
        self._txn_call(self.producer.commit_transaction, max(self.flush_timeout, 30.0))
        self.in_txn = False
        self.txn_offsets.clear()
        acks, self.txn_acks = self.txn_acks, []
        for record, md in acks:
            self._commit_record(record, md)
        if self.task is not None:
            try:
                self.task.commit()
            except Exception:
                log.exception("%s: exception thrown while calling task.commit()",
                              self._label())

    def _produce_offset(self, topic: str, partition: int, key: bytes,
                        value: bytes | None) -> None:
        assert self.producer is not None

        def cb(err: KafkaError | None, msg: Any) -> None:
            if err is not None and self.failure is None:
                self.failure = api.ConnectError(f"Failed to write offsets to {topic}: {err}")
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, partition=partition,
                                      on_delivery=cb)
                return
            except BufferError:
                self.producer.poll(0.1)


def _metadata(msg: Any) -> api.RecordMetadata:
    ts_type, ts = msg.timestamp()
    return api.RecordMetadata(msg.topic(), msg.partition(), msg.offset(),
                              ts if ts_type else None)


def _ms(value: Any, default: float) -> float:
    """A ``*.ms`` setting in seconds."""
    try:
        return float(value) / 1000.0 if value not in (None, "") else default / 1000.0
    except (TypeError, ValueError):
        return default / 1000.0
