"""Source connectors' offsets: Kafka Connect's ``connect-offsets`` records, or a file.

A source partition's offset is one record (Kafka's format, as its JsonConverter with
schemas disabled writes it, so Kafka's tools and workers read ours and we read theirs)::

    key   = ["<connector name>",{<source partition>}]     e.g. ["pg",{"server":"db1"}]
    value = {<source offset>}                             e.g. {"lsn":1234,"txId":567}
            or null (a tombstone: the partition's offset is reset, KIP-875)

JSON with compact separators; the partition's keys are written sorted, so one partition
is always the same key bytes (compaction keeps its last record only). A record whose key
is not such a pair is logged and ignored, as Kafka does.

``OffsetStore`` (the interface; thread-safe): ``start()``, ``stop()``,
``get(connector, partition) -> dict | None``, ``connector_offsets(connector) ->
[(partition, offset)]``, ``connectors() -> set[str]`` (those with offsets),
``put(connector, [(partition, offset or None)], timeout)`` (durable when it returns:
written with acks=all and read back, or the file renamed into place; ``ConnectError``
otherwise; None removes the partition), ``reader(connector)`` (an
``api.OffsetStorageReader``), ``record(connector, partition, offset) -> (key, value)``
(the bytes, for the exactly-once producer to write in its transaction; it must choose the
partition with ``partition_for(key)``), ``topic`` (None for a file).

``KafkaOffsetStore(worker)`` keeps them in ``offset.storage.topic``
(``offset.storage.partitions``, default 25; ``offset.storage.replication.factor``;
compacted) through a ``KafkaLog``: what ``get`` answers is what was read back from the
topic, so every worker agrees. ``FileOffsetStore(path)`` keeps them in
``offset.storage.file.filename`` (standalone): the same key and value strings as a JSON
list of ``[key, value]`` pairs, rewritten (temp file, fsync, rename) on each ``put``.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from spool.connect.api import ConnectError, OffsetStorageReader
from spool.connect.kafka_log import KafkaLog, partition_for
from spool.connect.worker_config import WorkerConfig
from spool.util.fileio import atomic_write

log = logging.getLogger("spool.connect.offsets")

Partition = dict[str, Any]
Offset = dict[str, Any]


def encode_key(connector: str, partition: Partition) -> bytes:
    return json.dumps([connector, partition], separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode()


def encode_value(offset: Offset | None) -> bytes | None:
    if offset is None:
        return None
    return json.dumps(offset, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode()


def decode_key(key: bytes | None) -> tuple[str, Partition] | None:
    """``(connector, partition)``, or None for a key that is not Kafka's pair."""
    if key is None:
        return None
    try:
        parsed = json.loads(key)
    except (ValueError, UnicodeDecodeError):
        return None
    if (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)
            and isinstance(parsed[1], dict)):
        return parsed[0], parsed[1]
    return None


def _canon(partition: Partition) -> str:
    return json.dumps(partition, separators=(",", ":"), sort_keys=True)


class OffsetStore:
    """The offsets of source partitions, per connector (module doc)."""

    topic: str | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # connector -> canonical partition -> (partition, offset)
        self._data: dict[str, dict[str, tuple[Partition, Offset]]] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def read_to_end(self, timeout: float) -> None:
        """Block until ``get`` answers every offset committed before the call (a source
        task reads its offsets only after this, as Kafka's ``get`` reads to the end)."""

    def get(self, connector: str, partition: Partition) -> Offset | None:
        with self._lock:
            found = self._data.get(connector, {}).get(_canon(partition))
        return None if found is None else found[1]

    def connector_offsets(self, connector: str) -> list[tuple[Partition, Offset]]:
        with self._lock:
            return list(self._data.get(connector, {}).values())

    def connectors(self) -> set[str]:
        with self._lock:
            return {c for c, parts in self._data.items() if parts}

    def put(self, connector: str, offsets: list[tuple[Partition, Offset | None]],
            timeout: float) -> None:
        raise NotImplementedError

    def reader(self, connector: str) -> OffsetStorageReader:
        return _Reader(self, connector)

    def record(self, connector: str, partition: Partition,
               offset: Offset | None) -> tuple[bytes, bytes | None]:
        return encode_key(connector, partition), encode_value(offset)

    def partition_for(self, key: bytes) -> int:
        """The topic partition ``key`` goes to (0 for a file)."""
        return 0

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        decoded = decode_key(key)
        if decoded is None:
            log.error("Ignoring offset partition key with an unexpected format: %r", key)
            return
        connector, partition = decoded
        offset: Any = None
        if value is not None:
            try:
                offset = json.loads(value)
            except (ValueError, UnicodeDecodeError):
                log.error("Ignoring offset of %s %s that is not JSON: %r", connector,
                          partition, value)
                return
            if not isinstance(offset, dict):
                log.error("Ignoring offset of %s %s that is not a JSON object: %r",
                          connector, partition, value)
                return
        with self._lock:
            parts = self._data.setdefault(connector, {})
            if offset is None:
                parts.pop(_canon(partition), None)
                if not parts:
                    del self._data[connector]
            else:
                parts[_canon(partition)] = (partition, offset)


class _Reader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self._store = store
        self._connector = connector

    def offset(self, partition: Partition) -> Offset | None:
        return self._store.get(self._connector, partition)


class KafkaOffsetStore(OffsetStore):
    """Offsets in ``offset.storage.topic`` (module doc)."""

    def __init__(self, worker: WorkerConfig) -> None:
        super().__init__()
        self.topic = worker.get("offset.storage.topic")
        self._log = KafkaLog(worker.internal_client_config(), self.topic,
                             partitions=worker.get("offset.storage.partitions"),
                             replication_factor=worker.get("offset.storage.replication.factor"),
                             on_record=lambda k, v, _p, _o: self._apply(k, v),
                             config_key="offset.storage.topic")

    def start(self) -> None:
        self._log.start()

    def stop(self) -> None:
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        try:
            self._log.read_to_end(timeout)
        except TimeoutError as e:
            raise ConnectError(str(e)) from None

    def partition_for(self, key: bytes) -> int:
        return partition_for(key, self._log.partitions)

    def put(self, connector: str, offsets: list[tuple[Partition, Offset | None]],
            timeout: float) -> None:
        if not offsets:
            return
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for partition, offset in offsets:
            key, value = self.record(connector, partition, offset)
            self._log.send(key, value, delivered)
        if self._log.flush(timeout):
            raise ConnectError(f"Timed out writing offsets of {connector} to {self.topic} "
                               f"after {timeout:g} s")
        if errors:
            raise ConnectError(f"Failed to write offsets of {connector} to {self.topic}: "
                               f"{errors[0]}")
        try:
            self._log.read_to_end(timeout)
        except TimeoutError as e:
            raise ConnectError(f"Offsets of {connector} written but not read back: {e}") \
                from None


class FileOffsetStore(OffsetStore):
    """Offsets in a file, for a standalone worker (module doc)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._write_lock = threading.Lock()

    def start(self) -> None:
        if not self.path.exists():
            return
        try:
            pairs = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConnectError(f"Cannot read the offsets file {self.path}: {e}") from None
        for key, value in pairs:
            self._apply(key.encode(), None if value is None else value.encode())

    def put(self, connector: str, offsets: list[tuple[Partition, Offset | None]],
            timeout: float) -> None:
        with self._write_lock:
            with self._lock:
                before = {c: dict(parts) for c, parts in self._data.items()}
            for partition, offset in offsets:
                self._apply(*self.record(connector, partition, offset))
            with self._lock:
                pairs = [[encode_key(c, p).decode(), json.dumps(o, separators=(",", ":"),
                                                                 sort_keys=True)]
                         for c, parts in sorted(self._data.items())
                         for p, o in parts.values()]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(pairs, indent=0).encode())
            except OSError as e:
                with self._lock:
                    self._data = before
                raise ConnectError(f"Cannot write the offsets file {self.path}: {e}") from None

__all__ = ["OffsetStore", "KafkaOffsetStore", "FileOffsetStore", "encode_key", "encode_value",
           "decode_key"]
