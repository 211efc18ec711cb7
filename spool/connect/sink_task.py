"""Running a sink task: Spool -> converters -> transformations -> ``put`` (Kafka's
WorkerSinkTask).

A consumer in group ``connect-<connector>`` (``consumer.*`` worker keys, then the
connector's ``consumer.override.*``; ``enable.auto.commit=false``,
``auto.offset.reset=earliest`` as Kafka Connect sets them; isolation is the client's
default, read_uncommitted, unless overridden) subscribes to ``topics`` or
``topics.regex`` (matched against the whole topic name, as Java's ``matches``). Each
batch of messages is converted (header, key, value converters), transformed and given
to ``task.put``; failures in those stages go through ``errors.ErrorHandler`` (stages
HEADER_CONVERTER, KEY_CONVERTER, VALUE_CONVERTER, TRANSFORMATION; the consumed message
is what goes to the dead letter queue, and the DLQ is flushed before each offset
commit so a skipped record's offset is committed only once it is there). ``put`` raising
``RetriableError`` pauses every partition and calls ``put`` again with the same records
after ``context.timeout(ms)`` (immediately on the next loop without one); any other
exception fails the task.

Offsets: after a successful ``put`` the next offset of each partition is "current".
Every ``offset.flush.interval.ms`` (or on ``context.request_commit()``), ``pre_commit``
is called with the current offsets and exactly what it returns (restricted to assigned
partitions) is committed, synchronously. On revocation the same commit happens for the
revoked partitions, then ``task.close(partitions)``; on assignment ``task.open``.
``context.offset({tp: offset})`` seeks before the next ``put`` (inside ``open``: the
assignment starts there). On stop: a final commit, ``task.close`` of the assignment,
``task.stop()``, the consumer closed (leaving the group).

Paused (target state PAUSED, or ``context.pause``): the partitions are paused on the
consumer, which keeps polling so the task stays in its group; a message fetched before
the pause took effect is sought back to, never put.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from spool.connect import api
from spool.connect.source_task import _ms, load_task_class
from spool.connect.worker_task import WorkerTask

if TYPE_CHECKING:
    from spool.connect.herder import TaskId
    from spool.connect.worker import StatusListener, Worker

log = logging.getLogger(__name__)

TP = tuple[str, int]
_TS_TYPES = {0: "NoTimestampType", 1: "CreateTime", 2: "LogAppendTime"}


class WorkerSinkTaskContext(api.SinkTaskContext):
    """What a sink task may ask of the runtime (api.SinkTaskContext); called on the
    task's thread from put/open/close/pre_commit."""

    def __init__(self, owner: WorkerSinkTask, configs: dict[str, str]) -> None:
        self._owner = owner
        self.configs = configs
        self.rewinds: dict[TP, int] = {}
        self.timeout_ms: int | None = None
        self.paused: set[TP] = set()
        self.commit_requested = False

    def offset(self, offsets: dict[TP, int]) -> None:
        self.rewinds.update(offsets)

    def timeout(self, ms: int) -> None:
        self.timeout_ms = ms

    def assignment(self) -> set[TP]:
        return set(self._owner.assigned)

    def pause(self, *partitions: TP) -> None:
        self._check_assigned(partitions)
        self.paused.update(partitions)
        self._owner.apply_pauses()

    def resume(self, *partitions: TP) -> None:
        self._check_assigned(partitions)
        self.paused.difference_update(partitions)
        self._owner.apply_pauses()

    def request_commit(self) -> None:
        self.commit_requested = True

    def _check_assigned(self, partitions: tuple[TP, ...]) -> None:
        for tp in partitions:
            if tp not in self._owner.assigned:
                raise api.ConnectError(f"No partitions assigned to this task: {tp[0]}-{tp[1]}")


class WorkerSinkTask(WorkerTask):
    """One sink task on its thread (module doc)."""

    BATCH = 500
    POLL_S = 0.5

    def __init__(self, worker: Worker, task_id: TaskId, connector_props: dict[str, str],
                 task_props: dict[str, str], status: StatusListener,
                 target_state: str) -> None:
        super().__init__(worker, task_id, connector_props, task_props, status, target_state)
        self.task: api.SinkTask | None = None
        self.consumer: Consumer | None = None
        self.assigned: set[TP] = set()
        self.current: dict[TP, int] = {}  # next offset after what put accepted
        self.committed: dict[TP, int] = {}
        self.context: WorkerSinkTaskContext | None = None
        self.retry_batch: list[api.SinkRecord] | None = None
        self.retry_offsets: dict[TP, int] = {}
        self.retry_at = 0.0
        self.consumer_paused: set[TP] = set()
        self.flush_interval = _ms(worker.config.get("offset.flush.interval.ms"), 60000)
        self.flush_timeout = _ms(worker.config.get("offset.flush.timeout.ms"), 5000)
        self.task_started = False
        self.closing = False
        self.seek_backs: dict[TP, int] = {}  # fetched while paused: read again later

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
        cconf = {**w.config.client_config("consumer"),
                 "group.id": f"connect-{self.id.connector}",
                 "client.id": f"connector-consumer-{self.id}",
                 "enable.auto.commit": False, "auto.offset.reset": "earliest",
                 **self.cfg.client_overrides("consumer")}
        cconf["enable.auto.commit"] = False
        cconf["enable.auto.offset.store"] = False
        self.consumer = Consumer(cconf)
        task_cls = load_task_class(self.task_props["task.class"])
        self.task = task_cls()
        self.context = WorkerSinkTaskContext(self, dict(self.task_props))
        self.task.initialize(self.context)
        self.task.start(dict(self.task_props))
        self.task_started = True
        topics = [t.strip() for t in self.connector_props.get("topics", "").split(",")
                  if t.strip()]
        pattern = self.connector_props.get("topics.regex", "").strip()
        subs = [f"^({pattern})$"] if pattern else topics
        if not subs:
            raise api.ConfigError("Must configure one of topics or topics.regex")
        self.consumer.subscribe(subs, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    # ---- rebalance callbacks (on this thread, inside consume())

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        tps = [(p.topic, p.partition) for p in partitions]
        self.assigned.update(tps)
        for tp in tps:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)
        assert self.task is not None and self.context is not None
        self.task.open(tps)
        rewinds = {tp: self.context.rewinds.pop(tp) for tp in tps if tp in self.context.rewinds}
        if rewinds:
            for p in partitions:
                if (p.topic, p.partition) in rewinds:
                    p.offset = rewinds[(p.topic, p.partition)]
            consumer.assign(partitions)
        for topic in sorted({t for t, _ in tps}):
            self.worker.topic_used(self.id.connector, topic)
        self.consumer_paused.difference_update(tps)  # paused (again) by apply_pauses

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.closing:
            return
        tps = [(p.topic, p.partition) for p in partitions]
        try:
            self.commit_offsets(only=set(tps))
        finally:
            self._close_partitions(tps)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.closing:
            return
        self._close_partitions([(p.topic, p.partition) for p in partitions])

    def _close_partitions(self, tps: list[TP]) -> None:
        self.retry_batch = None
        try:
            if self.task is not None and tps:
                self.task.close(tps)
        finally:
            for tp in tps:
                self.assigned.discard(tp)
                self.current.pop(tp, None)
                self.committed.pop(tp, None)
                self.consumer_paused.discard(tp)

    # ---- the loop

    def execute(self) -> None:
        assert self.consumer is not None and self.context is not None
        last_commit = time.monotonic()
        while not self.stopping:
            now = time.monotonic()
            if self.context.commit_requested or now - last_commit >= self.flush_interval:
                self.context.commit_requested = False
                self.commit_offsets()
                last_commit = now
            self._apply_rewinds()
            self.apply_pauses()
            self.check_paused()
            msgs = self.consumer.consume(self.BATCH, self.POLL_S)
            if self.stopping:
                break
            records, offsets = self._convert(msgs)
            if self.paused:
                continue
            if self.retry_batch is not None:
                if time.monotonic() >= self.retry_at:
                    self._deliver(self.retry_batch, self.retry_offsets)
            else:  # put([]) too, as Kafka: a task may flush on time
                self._deliver(records, offsets)

    def on_stop(self) -> None:
        errors = getattr(self, "errors", None)
        if errors is not None:
            errors.stop()  # a retry's backoff ends now

    def apply_pauses(self) -> None:
        """Pause on the consumer what should be paused, resume the rest."""
        if self.consumer is None or self.context is None:
            return
        if self.paused or self.retry_batch is not None:
            want = set(self.assigned)
        else:
            want = self.context.paused & self.assigned
        pause = want - self.consumer_paused
        resume = (self.consumer_paused & self.assigned) - want
        if pause:
            self.consumer.pause([TopicPartition(t, p) for t, p in pause])
        if resume:
            self.consumer.resume([TopicPartition(t, p) for t, p in resume])
        self.consumer_paused = want

    def _apply_rewinds(self) -> None:
        assert self.consumer is not None and self.context is not None
        for tp in [tp for tp in self.context.rewinds if tp in self.assigned]:
            offset = self.context.rewinds[tp]
            try:
                self.consumer.seek(TopicPartition(tp[0], tp[1], offset))
            except KafkaException as e:
                log.debug("%s: seek %s to %d not yet possible: %s", self._label(), tp, offset, e)
                continue
            del self.context.rewinds[tp]
            self.current[tp] = offset
            if self.retry_batch is not None:
                self.retry_batch = None  # the task asked for these records again
        for tp in [tp for tp in self.seek_backs if tp in self.assigned]:
            try:
                self.consumer.seek(TopicPartition(tp[0], tp[1], self.seek_backs[tp]))
            except KafkaException:
                continue
            del self.seek_backs[tp]
        for tp in [tp for tp in self.seek_backs if tp not in self.assigned]:
            del self.seek_backs[tp]

    def _seek_back(self, msg: Any) -> None:
        tp = (msg.topic(), msg.partition())
        if tp not in self.seek_backs:
            self.seek_backs[tp] = msg.offset()

    def _convert(self, msgs: list[Any]) -> tuple[list[api.SinkRecord], dict[TP, int]]:
        assert self.context is not None
        records: list[api.SinkRecord] = []
        offsets: dict[TP, int] = {}
        hold = self.paused or self.retry_batch is not None
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise api.ConnectError(f"Consumer failed: {err}")
                log.warning("%s: consumer error: %s", self._label(), err)
                continue
            tp = (msg.topic(), msg.partition())
            if tp not in self.assigned:
                continue
            if tp in self.context.rewinds or tp in self.seek_backs:
                continue  # read again from where it is sought
            if hold or tp in self.consumer_paused or tp in self.context.paused:
                self._seek_back(msg)
                continue
            offsets[tp] = msg.offset() + 1
            rec = self._to_record(msg)
            if rec is not None:
                records.append(rec)
        return records, offsets

    def _to_record(self, msg: Any) -> api.SinkRecord | None:
        errors = self.errors
        skip = type(errors).SKIP
        topic, raw_headers = msg.topic(), msg.headers() or []
        headers = []
        for k, v in raw_headers:
            hv = errors.execute("HEADER_CONVERTER", self.header_converter.to_connect_header,
                                topic, k, v, original=msg,
                                executing_class=type(self.header_converter))
            if hv is skip:
                return None
            headers.append(api.Header(k, hv[0], hv[1]))
        hs = tuple(headers)
        key = errors.execute("KEY_CONVERTER", self.key_converter.to_connect_data,
                             topic, hs, msg.key(), original=msg,
                             executing_class=type(self.key_converter))
        if key is skip:
            return None
        value = errors.execute("VALUE_CONVERTER", self.value_converter.to_connect_data,
                               topic, hs, msg.value(), original=msg,
                               executing_class=type(self.value_converter))
        if value is skip:
            return None
        ts_type, ts = msg.timestamp()
        rec = api.SinkRecord(topic, msg.partition(), key[0], key[1], value[0], value[1],
                             ts if ts_type else None, hs, kafka_offset=msg.offset(),
                             timestamp_type=_TS_TYPES.get(ts_type, "NoTimestampType"),
                             original_topic=topic, original_kafka_partition=msg.partition(),
                             original_kafka_offset=msg.offset())
        out = errors.execute("TRANSFORMATION", self.chain.apply, rec, original=msg)
        if out is None or out is skip:
            return None
        return out

    def _deliver(self, records: list[api.SinkRecord], offsets: dict[TP, int]) -> None:
        assert self.task is not None and self.context is not None
        try:
            self.task.put(list(records))
        except api.RetriableError as e:
            log.warning("%s: put failed, will retry: %s", self._label(), e)
            self.retry_batch, self.retry_offsets = records, offsets
            ms = self.context.timeout_ms
            self.context.timeout_ms = None
            self.retry_at = time.monotonic() + (ms / 1000.0 if ms and ms > 0 else 0.0)
            return
        except Exception as e:
            raise api.ConnectError("Exiting WorkerSinkTask due to unrecoverable exception.") \
                from e
        self.retry_batch, self.retry_offsets = None, {}
        for tp, off in offsets.items():
            if tp in self.assigned:
                self.current[tp] = off

    # ---- committing

    def commit_offsets(self, only: set[TP] | None = None) -> None:
        """``pre_commit`` with the current offsets; commit what it returns."""
        if self.task is None or self.consumer is None or not self.task_started:
            return
        current = {tp: o for tp, o in self.current.items() if tp in self.assigned}
        if not current:
            return
        try:
            answer = self.task.pre_commit(dict(current)) or {}
        except Exception:
            log.exception("%s: commit of offsets threw an unexpected exception; "
                          "will retry at the next commit", self._label())
            return
        to_commit = {tp: int(o) for tp, o in answer.items()
                     if tp in self.assigned and (only is None or tp in only)
                     and self.committed.get(tp) != int(o)}
        if not to_commit:
            return
        try:
            self.errors.flush(self.flush_timeout)  # skipped records are in the DLQ first
        except api.ConnectError as e:
            log.warning("%s: not committing offsets: %s", self._label(), e)
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o)
                                          for (t, p), o in to_commit.items()],
                                 asynchronous=False)
        except KafkaException as e:
            log.warning("%s: offset commit failed: %s", self._label(), e)
            return
        self.committed.update(to_commit)

    def close(self) -> None:
        try:
            if self.consumer is not None and self.task_started and not self.failed:
                self.commit_offsets()
        finally:
            try:
                if self.task is not None and self.task_started and self.assigned:
                    self.task.close(sorted(self.assigned))
            finally:
                try:
                    if self.task is not None:
                        self.task.stop()
                finally:
                    if getattr(self, "chain", None) is not None:
                        self.chain.close()
                    if getattr(self, "errors", None) is not None:
                        self.errors.close()
                    if self.consumer is not None:
                        self.closing = True
                        self.assigned.clear()
                        self.consumer.close()
                        self.consumer = None
