"""A compacted topic read from its start into memory, and written to: Kafka's KafkaBasedLog.

The internal topics (``connect-offsets``, ``connect-configs``, ``connect-status``) are
each a ``KafkaLog``: everything the worker knows of them is what it read back, so every
worker (the writer too) applies the same records in the same order.

``KafkaLog(client_config, topic, *, partitions=1, replication_factor=-1, on_record,
config_key=None)``:

- ``start()`` creates the topic when missing (``partitions``, ``replication_factor``; -1:
  the broker's ``default.replication.factor``; ``cleanup.policy=compact``). An existing
  topic is used with the partitions it has, but one whose ``cleanup.policy`` is not
  ``compact`` alone is refused with Kafka's message (``ConnectError``: ``Topic 'x'
  supplied via the 'offset.storage.topic' property is required to have
  'cleanup.policy=compact' ...``; ``config_key`` names the property). It then reads every
  partition from its beginning on a thread of its own (``read_committed``: an aborted
  transaction's records are never seen) and returns once what the topic held at the call
  has been passed to ``on_record``.
- ``on_record(key, value, partition, offset)`` is called on the reader thread, in offset
  order within a partition (a tombstone's value is None). An exception it raises is
  logged and the record skipped.
- ``send(key, value, on_delivery=None)`` produces a record (acks=all, idempotent; the
  partition chosen by Kafka's murmur2 hash of the key, as Java workers choose it:
  ``partition_for(key, partitions)``, which other writers of the topic must use too);
  ``on_delivery(err, msg)`` is confluent-kafka's callback, called on the reader thread
  or in ``flush``. ``flush(timeout)`` waits for every record sent so far and returns how
  many are still undelivered (0: all written, ``acks=all``); ``send_and_wait`` does both
  and raises ``ConnectError`` when the record was not written.
- ``read_to_end(timeout)`` asks the end offsets (the last stable offsets) and blocks until
  every record before them has been passed to ``on_record``: what was committed before
  the call has been applied when it returns; ``TimeoutError`` otherwise.
- ``stop()`` stops the thread and closes the clients; idempotent.

Thread-safe: ``send``, ``flush`` and ``read_to_end`` may be called from any thread (not
from ``on_record``, which would wait for itself).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from spool.connect.api import ConnectError

log = logging.getLogger("spool.connect.kafka_log")

OnRecord = Callable[[bytes | None, bytes | None, int, int], None]

# clients of a local service: no telemetry pushes, librdkafka's lines through logging
_QUIET = {"enable.metrics.push": False}


class KafkaLog:
    """One compacted topic, read into ``on_record`` and written through ``send`` (module
    doc)."""

    def __init__(self, client_config: dict[str, Any], topic: str, *, partitions: int = 1,
                 replication_factor: int = -1, on_record: OnRecord,
                 config_key: str | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.config_key = config_key
        self._config = {**_QUIET, "logger": log, **client_config}
        self._on_record = on_record
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._tps: list[TopicPartition] = []
        self._positions: dict[int, int] = {}  # partition -> next offset to read
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # ---- lifecycle

    def start(self, timeout: float = 30.0) -> None:
        admin = self._admin = AdminClient(dict(self._config))
        self.partitions = ensure_compacted_topic(admin, self.topic, self.partitions,
                                                 self.replication_factor, self.config_key,
                                                 timeout)
        self._producer = Producer({**self._config,
                                   "acks": "all", "enable.idempotence": True,
                                   "partitioner": "murmur2_random", "linger.ms": 1})
        self._consumer = Consumer({
            **self._config,
            "group.id": f"spool-connect-log-{self.topic}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100, "auto.offset.reset": "earliest"})
        self._tps = [TopicPartition(self.topic, p, OFFSET_BEGINNING)
                     for p in range(self.partitions)]
        self._consumer.assign(self._tps)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"spool-connect-log-{self.topic}")
        self._thread.start()
        self.read_to_end(timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(10.0)
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.flush(5.0)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
        self._producer = self._consumer = self._admin = None

    # ---- writing

    def send(self, key: bytes | None, value: bytes | None,
             on_delivery: Callable[[KafkaError | None, Any], None] | None = None) -> None:
        producer = self._require(self._producer)
        kw: dict[str, Any] = {"on_delivery": on_delivery} if on_delivery else {}
        if key is not None:
            kw["partition"] = partition_for(key, self.partitions)
        while True:
            try:
                producer.produce(self.topic, key=key, value=value, **kw)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)

    def flush(self, timeout: float) -> int:
        return self._require(self._producer).flush(timeout)

    def send_and_wait(self, key: bytes | None, value: bytes | None, timeout: float) -> None:
        """Send one record and wait for it to be written (ConnectError otherwise)."""
        result: list[KafkaError | None] = []
        self.send(key, value, lambda err, msg: result.append(err))
        left = self.flush(timeout)
        if left or not result:
            raise ConnectError(f"Timed out writing to {self.topic} after {timeout:g} s")
        if result[0] is not None:
            raise ConnectError(f"Failed to write to {self.topic}: {result[0]}")

    # ---- reading

    def read_to_end(self, timeout: float = 30.0) -> None:
        """Block until every record committed before the call has been passed to
        ``on_record`` (module doc)."""
        deadline = time.monotonic() + timeout
        targets = self._end_offsets(deadline)
        with self._cond:
            while not self._reached(targets):
                if self._error is not None:
                    raise ConnectError(f"Reading {self.topic} failed: {self._error}")
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    raise TimeoutError(f"Failed to read to the end of {self.topic} within "
                                       f"{timeout:g} s (at {self._positions}, end {targets})")
                self._cond.wait(min(left, 0.5))

    def _reached(self, targets: dict[int, tuple[int, int]]) -> bool:
        return all(end <= start or self._positions.get(p, -1) >= end
                   for p, (start, end) in targets.items())

    def _end_offsets(self, deadline: float) -> dict[int, tuple[int, int]]:
        """partition -> (log start offset, last stable offset), asked of the admin client."""
        admin = self._require(self._admin)
        while True:
            wait = max(0.5, min(5.0, deadline - time.monotonic()))
            try:
                out: dict[int, tuple[int, int]] = {}
                for spec, slot in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
                    futures = admin.list_offsets(
                        {TopicPartition(self.topic, p): spec for p in range(self.partitions)},
                        isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=wait)
                    for tp, fut in futures.items():
                        offset = fut.result(wait + 1.0).offset
                        start, end = out.get(tp.partition, (0, 0))
                        out[tp.partition] = (offset, end) if slot == 0 else (start, offset)
                return out
            except (KafkaException, TimeoutError) as e:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the end offsets of {self.topic}: {e}") from None
                time.sleep(0.1)

    def _run(self) -> None:
        consumer, producer = self._require(self._consumer), self._require(self._producer)
        warned: dict[str, float] = {}
        while not self._stop.is_set():
            try:
                first = consumer.poll(0.1)
                messages = [first, *consumer.consume(499, 0)] if first is not None else []
                positions = consumer.position(self._tps)
                producer.poll(0)
            except (KafkaException, RuntimeError) as e:  # closed under us, a broker error
                if self._stop.is_set():
                    return
                _warn(warned, f"reading {self.topic}: {e}")
                time.sleep(0.2)
                continue
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        _warn(warned, f"reading {self.topic}: {err}")
                    continue
                try:
                    self._on_record(m.key(), m.value(), m.partition(), m.offset())
                except Exception:
                    log.exception("applying %s partition %d offset %d failed; skipped",
                                  self.topic, m.partition(), m.offset())
                with self._cond:
                    self._positions[m.partition()] = m.offset() + 1
            with self._cond:
                for tp in positions:
                    if tp.offset >= 0 and tp.offset > self._positions.get(tp.partition, -1):
                        self._positions[tp.partition] = tp.offset
                self._cond.notify_all()

    @staticmethod
    def _require(client: Any) -> Any:
        if client is None:
            raise ConnectError("KafkaLog is not started (or stopped)")
        return client


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (a signed 32-bit int), as its default partitioner hashes."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key`` (``toPositive(murmur2)
    % partitions``): every writer of an internal topic (the exactly-once source producer
    too) must put one key in one partition, or compaction and replay order break."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def ensure_compacted_topic(admin: AdminClient, topic: str, partitions: int,
                           replication_factor: int, config_key: str | None,
                           timeout: float = 30.0) -> int:
    """Create ``topic`` compacted when missing, or check the existing one's cleanup policy;
    its partition count."""
    deadline = time.monotonic() + timeout
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise ConnectError(f"Unable to read the metadata of topic {topic} within "
                           f"{timeout:g} s: {e.args[0].str()}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                       config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([new], operation_timeout=timeout)[topic].result(timeout)
            log.info("created topic %s (%d partitions, compacted)", topic, partitions)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectError(f"Unable to create topic {topic}: {e.args[0].str()}") \
                    from None
    else:
        _check_compacted(admin, topic, config_key, timeout)
    return _wait_for_leaders(admin, topic, deadline)


def _check_compacted(admin: AdminClient, topic: str, config_key: str | None,
                     timeout: float) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout)
    except KafkaException as e:
        log.warning("cannot check the cleanup policy of %s: %s", topic, e)
        return
    entry = configs.get("cleanup.policy")
    policy = {p.strip() for p in (entry.value or "").split(",")} if entry else set()
    if policy != {"compact"}:
        via = f" supplied via the '{config_key}' property" if config_key else ""
        raise ConnectError(
            f"Topic '{topic}'{via} is required to have 'cleanup.policy=compact' to guarantee "
            f"consistency and durability of the connectors' data, but found the topic "
            f"currently has 'cleanup.policy={entry.value if entry else ''}'. Continuing would "
            f"likely result in eventually losing data and problems restarting this Connect "
            f"cluster in the future. Change the '{config_key or 'topic'}' property in the "
            f"Connect worker configurations to use a topic with 'cleanup.policy=compact'.")


def _wait_for_leaders(admin: AdminClient, topic: str, deadline: float) -> int:
    """Until every partition has a leader (a topic just created has none for a while);
    the partition count."""
    while True:
        with contextlib.suppress(KafkaException):
            found = admin.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
            t = found.topics.get(topic)
            if t is not None and t.error is None and t.partitions and all(
                    p.leader >= 0 for p in t.partitions.values()):
                return len(t.partitions)
        if time.monotonic() >= deadline:
            raise ConnectError(f"Topic {topic} has no leader for every partition")
        time.sleep(0.1)


def _warn(warned: dict[str, float], line: str) -> None:
    """Log ``line``, but the same line at most once a minute."""
    now = time.monotonic()
    if warned.get(line, -60.0) <= now - 60.0:
        warned[line] = now
        log.warning("%s", line)


__all__ = ["KafkaLog", "OnRecord", "ensure_compacted_topic", "murmur2", "partition_for"]
