"""Error handling for tasks: Kafka's retries, ``errors.tolerance``, error log and DLQ.

``ErrorHandler(cfg, producer_config, task_id)`` is one task's Kafka
RetryWithToleranceOperator with its reporters (LogReporter, DeadLetterQueueReporter).
``execute(stage, fn, *args, original=None, executing_class=None)`` runs ``fn(*args)``
and answers its result, or ``ErrorHandler.SKIP`` when the record is to be skipped:

- ``api.RetriableError``: retried with backoff (300 ms doubled per attempt, at most
  ``errors.retry.delay.max.ms`` (then a random delay up to it, Kafka's jitter)) until
  ``errors.retry.timeout`` ms have passed (0: no retry; -1: forever); then it is a failure.
- Any other exception is a failure in the stages where Kafka tolerates everything
  (``KEY_CONVERTER``, ``VALUE_CONVERTER``, ``HEADER_CONVERTER``, ``TRANSFORMATION``);
  elsewhere (``TASK_PUT``, ``TASK_POLL``, ``KAFKA_PRODUCE``, ``KAFKA_CONSUME``) it is
  not tolerated: ``ConnectError("Unhandled exception in error handler")`` from it.
- A failure is reported: logged at ERROR when ``errors.log.enable`` (Kafka's line:
  ``Error encountered in task <connector>-<n>. Executing stage 'VALUE_CONVERTER' with
  class '...'``, the consumed record's coordinates when ``errors.log.include.messages``),
  and for sinks with ``errors.deadletterqueue.topic.name`` the original record
  (``original``: a confluent-kafka Message or an ``Original``) is produced to the DLQ
  topic with its key, value, headers and timestamp as consumed, plus, when
  ``errors.deadletterqueue.context.headers.enable``, the headers
  ``__connect.errors.topic/partition/offset/connector.name/task.id/stage/class.name/
  exception.class.name/exception.message/exception.stacktrace`` (UTF-8 strings; the
  exception's class is its Python qualified name). Then with ``errors.tolerance=none``
  ``ConnectError("Tolerance exceeded in error handler")`` is raised from it (the task
  fails); with ``all`` ``SKIP`` is returned.

The DLQ topic is created (1 partition, ``errors.deadletterqueue.topic.replication.factor``)
when missing, at construction. DLQ writes are asynchronous: ``flush(timeout)`` waits for
them (the sink task calls it before committing offsets, so a skipped record's offset is
committed only once it is in the DLQ) and raises ``ConnectError`` when some were not
written. ``stop()`` interrupts a retry's backoff (the operation then fails);
``close()`` flushes and closes the producer. ``failures`` counts failures. One handler
per task, used from the task's thread (``stop`` from any).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.connect.api import ConnectError, RetriableError

if TYPE_CHECKING:
    from spool.connect.connector_config import ConnectorConfig

log = logging.getLogger("spool.connect.errors")

STAGES = ("KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER", "TRANSFORMATION",
          "TASK_PUT", "TASK_POLL", "KAFKA_PRODUCE", "KAFKA_CONSUME")
TOLERATE_ALL = frozenset({"KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER",
                          "TRANSFORMATION"})
RETRIES_DELAY_MIN_MS = 300
HEADER_PREFIX = "__connect.errors."


@dataclass(frozen=True)
class Original:
    """A consumed record as it was read (what goes to the DLQ)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # ms; None: none

    @classmethod
    def of(cls, message: Any) -> Original:
        """From a confluent-kafka Message (or an Original)."""
        if isinstance(message, Original):
            return message
        ts_type, ts = message.timestamp()
        return cls(message.topic(), message.partition(), message.offset(), message.key(),
                   message.value(), tuple(message.headers() or ()),
                   ts if ts_type != 0 and ts >= 0 else None)


class _Skip:
    def __repr__(self) -> str:
        return "ErrorHandler.SKIP"


class ErrorHandler:
    """One task's retries, tolerance and error reporting (module doc)."""

    SKIP: Any = _Skip()

    def __init__(self, cfg: ConnectorConfig, producer_config: dict[str, Any],
                 task_id: Any, *, admin_config: dict[str, Any] | None = None) -> None:
        self.connector = cfg.name
        self.task = getattr(task_id, "task", task_id)
        self.retry_timeout_ms: int = cfg.get("errors.retry.timeout")
        self.max_delay_ms: int = cfg.get("errors.retry.delay.max.ms")
        self.tolerance: str = str(cfg.get("errors.tolerance")).lower()
        self.log_enabled: bool = bool(cfg.get("errors.log.enable"))
        self.log_messages: bool = bool(cfg.get("errors.log.include.messages"))
        self.failures = 0
        self._stop = threading.Event()
        dlq = (cfg.get("errors.deadletterqueue.topic.name") or "").strip() \
            if cfg.kind == "sink" else ""
        self.dlq_topic: str | None = dlq or None
        self.context_headers = bool(cfg.get("errors.deadletterqueue.context.headers.enable"))
        self._producer: Producer | None = None
        self._dlq_errors: list[KafkaError] = []
        if self.dlq_topic:
            rf = cfg.get("errors.deadletterqueue.topic.replication.factor")
            _create_dlq(admin_config or producer_config, self.dlq_topic, rf)
            self._producer = Producer({"enable.metrics.push": False, "logger": log,
                                       "acks": "all", **producer_config})

    # ---- running an operation

    def execute(self, stage: str, fn: Callable[..., Any], *args: Any, original: Any = None,
                executing_class: type | str | None = None) -> Any:
        try:
            return self._retrying(fn, args)
        except Exception as e:  # noqa: BLE001 - classified below, as Kafka's operator
            if stage not in TOLERATE_ALL and not isinstance(e, RetriableError):
                raise ConnectError("Unhandled exception in error handler") from e
            self.failures += 1
            klass = _qualname(executing_class) if isinstance(executing_class, type) \
                else executing_class or _executing_class(fn)
            self._report(stage, klass, e, original)
            if self.tolerance != "all":
                raise ConnectError("Tolerance exceeded in error handler") from e
            return self.SKIP

    def _retrying(self, fn: Callable[..., Any], args: tuple) -> Any:
        start = time.monotonic()
        deadline = start + self.retry_timeout_ms / 1000 if self.retry_timeout_ms >= 0 \
            else float("inf")
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(*args)
            except RetriableError:
                if time.monotonic() >= deadline or self._stop.is_set():
                    raise
                self._backoff(attempt, deadline)
                if self._stop.is_set():
                    raise

    def _backoff(self, attempt: int, deadline: float) -> None:
        delay = RETRIES_DELAY_MIN_MS << min(attempt - 1, 30)
        if delay > self.max_delay_ms:
            delay = random.randrange(max(1, self.max_delay_ms))
        wait = min(delay / 1000, max(0.0, deadline - time.monotonic()))
        self._stop.wait(wait)

    # ---- reporting

    def _report(self, stage: str, klass: str, error: BaseException, original: Any) -> None:
        record = Original.of(original) if original is not None else None
        if self.log_enabled:
            where = ""
            if self.log_messages and record is not None:
                where = (f", where consumed record is {{topic='{record.topic}', partition="
                         f"{record.partition}, offset={record.offset}, timestamp="
                         f"{record.timestamp if record.timestamp is not None else -1}}}")
            log.error("Error encountered in task %s-%s. Executing stage '%s' with class "
                      "'%s'%s.", self.connector, self.task, stage, klass, where,
                      exc_info=error)
        if self._producer is None or record is None:
            return
        headers = list(record.headers)
        if self.context_headers:
            headers += [(HEADER_PREFIX + k, v.encode()) for k, v in (
                ("topic", record.topic), ("partition", str(record.partition)),
                ("offset", str(record.offset)), ("connector.name", self.connector),
                ("task.id", str(self.task)), ("stage", stage), ("class.name", klass),
                ("exception.class.name", _qualname(type(error))),
                ("exception.message", str(error)),
                ("exception.stacktrace", "".join(traceback.format_exception(error))))]
        kw: dict[str, Any] = {"timestamp": record.timestamp} if record.timestamp else {}
        while True:
            try:
                self._producer.produce(self.dlq_topic, key=record.key, value=record.value,
                                       headers=headers, on_delivery=self._delivered, **kw)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def _delivered(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            log.error("Could not produce message to dead letter queue. topic=%s: %s",
                      self.dlq_topic, err)
            self._dlq_errors.append(err)

    def flush(self, timeout: float) -> None:
        """Wait until every DLQ record is written; ConnectError otherwise."""
        if self._producer is None:
            return
        left = self._producer.flush(timeout)
        if left:
            raise ConnectError(f"Timed out writing {left} record(s) to the dead letter queue "
                               f"{self.dlq_topic}")
        if self._dlq_errors:
            err, self._dlq_errors = self._dlq_errors[0], []
            raise ConnectError(f"Could not produce message to dead letter queue. "
                               f"topic={self.dlq_topic}: {err}")

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.flush(5.0)
            self._producer = None


def _create_dlq(config: dict[str, Any], topic: str, replication_factor: int,
                timeout: float = 30.0) -> None:
    admin = AdminClient({"enable.metrics.push": False, "logger": log, **config})
    try:
        found = admin.list_topics(timeout=timeout).topics.get(topic)
        if found is not None and found.error is None:
            return
        log.info("Topic %s doesn't exist. Will attempt to create topic.", topic)
        admin.create_topics([NewTopic(topic, 1, replication_factor)],
                            operation_timeout=timeout)[topic].result(timeout)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ConnectError(f"Could not initialize dead letter queue with topic={topic}: "
                               f"{e.args[0].str()}") from None


def _qualname(klass: type) -> str:
    return f"{klass.__module__}.{klass.__qualname__}"


def _executing_class(fn: Callable[..., Any]) -> str:
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return _qualname(type(owner))
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


__all__ = ["ErrorHandler", "Original", "STAGES", "TOLERATE_ALL", "HEADER_PREFIX"]
