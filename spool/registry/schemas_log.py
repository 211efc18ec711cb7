"""The ``_schemas`` topic as the registry uses it: created, tailed, written.

``ensure_topic(admin, topic)`` creates it when missing: 1 partition,
``cleanup.policy=compact``, replication factor min(3, brokers), as Confluent's
KafkaStore does; an existing topic is used as it is (one with more partitions: only
partition 0, with a warning).

``SchemasTail(client_config, topic, apply, admin)`` reads the topic from offset 0 to its
end and on, ``isolation.level=read_committed`` (a fenced primary's aborted writes are
never applied), with a confluent-kafka consumer that is assigned the partition (no group)
and polled on a thread of its own. Each record is handed to ``apply(key, value)`` on the
event loop that called ``start()``, in offset order, so the store it feeds is only ever
touched by that loop. ``position`` is the next offset to read (past transaction markers:
librdkafka moves its position over them). ``wait_for(offset)`` returns once ``position``
has passed ``offset``; ``catch_up()`` once it has reached the end offset (the last stable
offset, asked of ``admin``: ListOffsets read_committed) as it is at the call: what was
committed before the call has been applied when it returns. A tail that has read nothing
yet also asks the log start offset: records deleted below it (retention on a
``compact,delete`` topic, DeleteRecords) leave librdkafka's position unreported until a
record is read, so the position starts there.

``announced`` is the URL in the ``PRIMARY_HEADER`` header of the last record read that
had one: the NOOP each primary writes once it has fenced the previous one, so the last
committed one names the current primary (or the last one, until a new one has written).

``SchemasWriter(client_config, topic, transactional_id)`` is the primary's producer:
``open()`` runs ``init_transactions``, which fences any producer of the same
transactional id (a stale primary can no longer commit) and aborts its open transaction;
``write(records)`` writes them in one transaction and returns the offset of the last.
A producer fenced by a newer one raises ``Fenced``; any other failure ``RegistryError``
50001 (or 50002 on a timeout), the transaction aborted when the client says it must be
(the backend then replaces the producer anyway).

Lifecycle: ``start()``/``open()`` once, ``close()`` once; the blocking client calls run
on threads (``asyncio.to_thread`` or the tail's own), never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from spool.registry.model import RegistryError, operation_timeout, store_error

log = logging.getLogger("spool.registry")

Record = tuple[bytes, bytes | None]
_Read = tuple[int, bytes, bytes | None, str | None]  # offset, key, value, announced URL

# the header of the NOOP record a new primary writes once it has fenced the previous one:
# its advertised URL (a header: Confluent's and Karapace's readers ignore headers)
PRIMARY_HEADER = "spool.registry.primary"

# librdkafka's defaults for clients of a local service: no telemetry pushes (each
# logs 'Telemetry client instance id changed'), its log lines through Python's logging
_QUIET = {"enable.metrics.push": False}


def client_config(base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**_QUIET, "logger": logging.getLogger("spool.registry.kafka"), **base, **extra}


def ensure_topic(admin: AdminClient, topic: str, timeout: float = 10.0) -> bool:
    """Create ``topic`` if missing; True when this call created it."""
    metadata = admin.list_topics(timeout=timeout)
    if topic in metadata.topics and metadata.topics[topic].error is None:
        if len(metadata.topics[topic].partitions) != 1:
            log.warning("%s has %d partitions: only partition 0 is read and written", topic,
                        len(metadata.topics[topic].partitions))
        return False
    rf = max(1, min(3, len(metadata.brokers)))
    new = NewTopic(topic, num_partitions=1, replication_factor=rf,
                   config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([new], operation_timeout=timeout)[topic].result(timeout)
    except KafkaException as e:
        if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    log.info("created topic %s (1 partition, replication factor %d, compacted)", topic, rf)
    _wait_for_leader(admin, topic, timeout)
    return True


def _wait_for_leader(admin: AdminClient, topic: str, timeout: float) -> None:
    """Until the metadata names a leader of partition 0 (a topic just created has none
    for a while; librdkafka's cache would answer 'No leaders found' meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            found = admin.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
            partitions = found.topics[topic].partitions if topic in found.topics else {}
            if 0 in partitions and partitions[0].leader >= 0:
                return
        time.sleep(0.1)


class SchemasTail:
    """The topic read from offset 0 into ``apply`` (module doc)."""

    def __init__(self, config: dict[str, Any], topic: str,
                 apply: Callable[[bytes, bytes | None], None], admin: AdminClient) -> None:
        self.topic = topic
        self._admin = admin
        self._apply = apply
        self._consumer = Consumer(client_config(
            config, **{"group.id": "spool-registry-tail", "enable.auto.commit": False,
                       "enable.auto.offset.store": False, "isolation.level": "read_committed",
                       "fetch.wait.max.ms": 100, "auto.offset.reset": "earliest"}))
        self.position = 0
        self.announced: str | None = None  # the last primary's URL read (PRIMARY_HEADER)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warned: dict[str, float] = {}  # the tail thread's: line -> when logged
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-registry-tail",
                                        daemon=True)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._consumer.assign([TopicPartition(self.topic, 0, 0)])
        self._thread.start()

    async def end_offset(self, timeout: float = 10.0, spec: OffsetSpec | None = None) -> int:
        """The end the committed records reach now (the last stable offset), or with
        ``spec`` ``OffsetSpec.earliest()`` the log start offset."""
        deadline = time.monotonic() + timeout

        def ask(wait: float) -> int:
            futures = self._admin.list_offsets(
                {TopicPartition(self.topic, 0): spec or OffsetSpec.latest()},
                isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=wait)
            return next(iter(futures.values())).result(wait + 1.0).offset

        while True:
            try:
                return await asyncio.to_thread(
                    ask, max(0.5, min(5.0, deadline - time.monotonic())))
            except (KafkaException, TimeoutError) as e:  # no leader yet, broker away
                with contextlib.suppress(KafkaException):  # a fresh look at the leaders
                    await asyncio.to_thread(self._admin.list_topics, self.topic, timeout=1.0)
                if time.monotonic() >= deadline:
                    raise operation_timeout(f"the end offset of {self.topic}: {e}") from None
                await asyncio.sleep(0.1)

    async def wait_for(self, offset: int, timeout: float) -> None:
        """Return once the record at ``offset`` (and all before it) has been applied."""
        if self.position > offset:
            return
        assert self._loop is not None
        fut = self._loop.create_future()
        self._waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise operation_timeout(f"offset {offset} of {self.topic} was not read back "
                                    f"within {timeout:g} s (read up to {self.position})"
                                    ) from None
        finally:
            self._waiters = [(o, f) for o, f in self._waiters if f is not fut]

    async def catch_up(self, timeout: float = 10.0) -> None:
        end = await self.end_offset(timeout)
        if self.position == 0 < end:  # nothing read yet, but records were written
            start = await self.end_offset(timeout, OffsetSpec.earliest())
            if start > self.position:  # deleted below it (retention, DeleteRecords): the
                self._deliver([], start)  # consumer skips there but reports no position
        if end > 0:
            await self.wait_for(end - 1, timeout)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        with contextlib.suppress(Exception):
            self._consumer.close()

    # ---- the tail's thread, and what it hands to the loop

    def _run(self) -> None:
        tp = TopicPartition(self.topic, 0)
        while not self._stop.is_set():
            try:
                # consume(n, timeout) waits out its timeout unless n arrive: the first
                # record with poll, those already fetched after it without waiting
                first = self._consumer.poll(0.2)
                messages = [first, *self._consumer.consume(499, 0)] if first is not None else []
                position = self._consumer.position([tp])[0].offset
            except (KafkaException, RuntimeError) as e:  # closed under us, or a broker error
                if self._stop.is_set():
                    return
                self._warn(f"reading {self.topic}: {e}")
                time.sleep(0.2)
                continue
            records: list[_Read] = []
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        self._warn(f"reading {self.topic}: {err}")
                    continue
                announced = dict(m.headers() or ()).get(PRIMARY_HEADER)
                records.append((m.offset(), m.key() or b"", m.value(),
                                announced.decode(errors="replace") if announced else None))
            if records or position > self.position:
                assert self._loop is not None
                with contextlib.suppress(RuntimeError):  # the loop closed: we are stopping
                    self._loop.call_soon_threadsafe(self._deliver, records, position)

    def _warn(self, line: str) -> None:
        """Log ``line``, but the same line at most once a minute (a topic deleted under
        us would say so on every poll)."""
        now = time.monotonic()
        if self._warned.get(line, -60.0) <= now - 60.0:
            self._warned[line] = now
            log.warning("%s", line)

    def _deliver(self, records: list[_Read], position: int) -> None:
        for offset, key, value, announced in records:
            if offset < self.position:
                continue
            try:
                self._apply(key, value)
                if announced is not None:
                    self.announced = announced
            except Exception:  # the store skips bad records itself; this is a bug's net
                log.exception("applying %s offset %d failed; skipped", self.topic, offset)
            self.position = offset + 1
        self.position = max(self.position, position)
        done = [(o, f) for o, f in self._waiters if o < self.position]
        for _, fut in done:
            if not fut.done():
                fut.set_result(None)


class Fenced(Exception):
    """A newer producer of the same transactional id took over: this one is no primary."""


_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
           KafkaError.INVALID_PRODUCER_ID_MAPPING}


class SchemasWriter:
    """The primary's transactional producer (module doc)."""

    def __init__(self, config: dict[str, Any], topic: str, transactional_id: str,
                 timeout: float = 10.0) -> None:
        self.topic = topic
        self.timeout = timeout
        self._producer = Producer(client_config(
            config, **{"transactional.id": transactional_id, "acks": "all",
                       "transaction.timeout.ms": 60000, "linger.ms": 0}))

    async def open(self) -> None:
        try:
            await asyncio.to_thread(self._producer.init_transactions, self.timeout)
        except KafkaException as e:
            raise self._error("init_transactions", e) from None

    async def write(self, records: list[Record], announce: str | None = None) -> int:
        """Write ``records`` in one transaction; the offset of the last one. ``announce``:
        a URL to carry in each record's ``PRIMARY_HEADER``."""
        return await asyncio.to_thread(self._write, records, announce)

    def _write(self, records: list[Record], announce: str | None = None) -> int:
        headers = [(PRIMARY_HEADER, announce.encode())] if announce else None
        offsets: list[int] = []
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets.append(msg.offset())

        p = self._producer
        try:
            p.begin_transaction()
            for key, value in records:
                p.produce(self.topic, key=key, value=value, partition=0, headers=headers,
                          on_delivery=delivered)
            p.commit_transaction(self.timeout)
        except KafkaException as e:
            error = self._error("write", e)
            if not isinstance(error, Fenced) and e.args[0].txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    p.abort_transaction(self.timeout)
            raise error from None
        if errors or len(offsets) != len(records):
            raise store_error(f"writing to {self.topic}: {errors or 'no delivery report'}")
        return max(offsets)

    def _error(self, what: str, e: KafkaException) -> Exception:
        err: KafkaError = e.args[0]
        if err.code() in _FENCED or err.fatal():
            return Fenced(f"{what}: {err}")
        if err.code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
            return operation_timeout(f"{what} on {self.topic}: {err}")
        return store_error(f"{what} on {self.topic}: {err}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._producer.flush(1.0)


__all__ = ["PRIMARY_HEADER", "Fenced", "Record", "RegistryError", "SchemasTail", "SchemasWriter",
           "client_config", "ensure_topic"]
