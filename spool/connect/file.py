"""The FileStream connectors, as Kafka's ``org.apache.kafka.connect.file`` ones.

``FileStreamSourceConnector`` (keys ``file``: the file to read, standard input when
unset; ``topic``: where each line goes, required; ``batch.size``: most records per
poll, 2000) runs one task, which reads lines (ended by ``\\n``, ``\\r\\n`` or ``\\r``; a
last line without its end waits for it) and produces each as a record with no key and a
``string`` value, source partition ``{"filename": <file>}`` and source offset
``{"position": <byte offset after the line>}`` (Kafka's keys). A restarted task seeks to
the committed position, so a line is produced again only if its offset was not committed
(at least once; exactly once when the worker runs sources exactly-once: the connector
answers SUPPORTED when ``file`` is set). Kafka counts the position in characters and seeks
by bytes; here both are bytes (equal for ASCII). Standard input has no positions.
When the file does not exist yet, ``poll`` waits a second for it and returns nothing.

``FileStreamSinkConnector`` (keys ``file``: appended to, standard output when unset;
``topics``/``topics.regex`` as every sink) runs ``tasks.max`` tasks, each writing every
record's value on a line of its own as Java's ``toString`` would (``null``, ``true``,
``Struct{a=1,b=x}``, ``{k=v}``, ``[1, 2]``; bytes decoded as UTF-8). ``flush`` flushes
and fsyncs the file, so the offsets committed after it are of lines on disk.
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
from typing import IO, Any

from spool.connect import api, data
from spool.connect.api import HIGH, INT, LOW, STRING, ConfigDef, ConfigError, ConnectError

log = logging.getLogger(__name__)

FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
DEFAULT_TASK_BATCH_SIZE = 2000
_READ_SIZE = 64 * 1024


def _non_empty(name: str, value: Any) -> None:
    if value is not None and not str(value).strip():
        raise ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                  "String must be non-empty"]})


def source_config_def() -> ConfigDef:
    return (ConfigDef()
            .define("file", STRING, None, HIGH,
                    "Source filename. If not specified, the standard input will be used")
            .define("topic", STRING, importance=HIGH, doc="The topic to publish data to",
                    validator=_non_empty)
            .define("batch.size", INT, DEFAULT_TASK_BATCH_SIZE, LOW,
                    "The maximum number of records the source task can read from the file "
                    "each time it is polled", validator=api.at_least(1)))


def sink_config_def() -> ConfigDef:
    return ConfigDef().define(
        "file", STRING, None, HIGH,
        "Destination filename. If not specified, the standard output will be used")


class FileStreamSourceConnector(api.SourceConnector):
    def start(self, props: dict[str, str]) -> None:
        source_config_def().parse(props)
        self.props = dict(props)
        log.info("Starting file source connector reading from %s",
                 props.get("file") or "standard input")

    def task_class(self) -> type[api.Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def config_def(self) -> ConfigDef:
        return source_config_def()

    def exactly_once_support(self, props: dict[str, str]) -> str | None:
        return (api.ExactlyOnceSupport.SUPPORTED if props.get("file")
                else api.ExactlyOnceSupport.UNSUPPORTED)

    def alter_offsets(self, connector_config: dict[str, str],
                      offsets: dict[Any, dict[str, Any] | None]) -> bool:
        """Kafka's checks of offsets written through ``PATCH /connectors/{c}/offsets``."""
        if not connector_config.get("file"):
            raise ConnectError("Offsets cannot be modified if the 'file' configuration is "
                               "unspecified. This is because stdin is used for input and "
                               "offsets are not tracked.")
        for partition, offset in offsets.items():
            if offset is None:
                continue
            if POSITION_FIELD not in offset:
                raise ConnectError("Offset objects should either be null or contain the key "
                                   f"'{POSITION_FIELD}'")
            pos = offset[POSITION_FIELD]
            if not isinstance(pos, int) or isinstance(pos, bool):
                raise ConnectError(f"The value for the '{POSITION_FIELD}' key in the offset is "
                                   "expected to be a Long value")
            if pos < 0:
                raise ConnectError(f"The value for the '{POSITION_FIELD}' key in the offset "
                                   "should be a non-negative value")
            if partition is None:
                raise ConnectError("Partition objects cannot be null")
            if FILENAME_FIELD not in dict(partition):
                raise ConnectError(f"Partition objects should contain the key "
                                   f"'{FILENAME_FIELD}'")
        return True


class FileStreamSourceTask(api.SourceTask):
    """Reads the file's new lines on each ``poll`` (module doc); ``stop`` from any thread."""

    def __init__(self) -> None:
        self.stream: IO[bytes] | None = None
        self.buffer = b""
        self.position: int | None = None
        self.stopping = threading.Event()

    def start(self, props: dict[str, str]) -> None:
        cfg = source_config_def().parse(props)
        self.filename: str | None = cfg["file"] or None
        self.topic: str = cfg["topic"]
        self.batch_size: int = cfg["batch.size"]
        if self.filename is None:
            self.stream = sys.stdin.buffer

    def _open(self) -> bool:
        assert self.filename is not None
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - kept open across polls
        except FileNotFoundError:
            log.warning("Couldn't find file %s for FileStreamSourceTask, sleeping to wait "
                        "for it to be created", self.filename)
            return False
        except OSError as e:
            raise ConnectError(f"Error while trying to open file {self.filename}: {e}") from e
        offset = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
        position = (offset or {}).get(POSITION_FIELD)
        if position is not None and (not isinstance(position, int)
                                     or isinstance(position, bool)):
            stream.close()
            raise ConnectError("Offset position is the incorrect type")
        self.position = position or 0
        stream.seek(self.position)
        self.stream = stream
        return True

    def poll(self) -> list[api.SourceRecord]:
        if self.stopping.is_set():
            return []
        if self.stream is None and not self._open():
            self.stopping.wait(1.0)
            return []
        records = self._lines()
        if len(records) < self.batch_size:
            chunk = self._read()
            if chunk:
                self.buffer += chunk
                records += self._lines(self.batch_size - len(records))
            elif not records:
                self.stopping.wait(1.0)
        return records

    def _read(self) -> bytes:
        stream = self.stream
        if stream is None or self.stopping.is_set():
            return b""
        if stream is sys.stdin.buffer:  # wait at most a second, so stop() is seen
            ready, _, _ = select.select([stream], [], [], 1.0)
            return stream.read1(_READ_SIZE) if ready else b""  # type: ignore[attr-defined]
        try:
            return stream.read(_READ_SIZE)
        except (OSError, ValueError):
            return b""  # closed by stop()

    def _lines(self, limit: int | None = None) -> list[api.SourceRecord]:
        limit = self.batch_size if limit is None else limit
        out: list[api.SourceRecord] = []
        buf, start = self.buffer, 0
        while len(out) < limit:
            nl, cr = buf.find(b"\n", start), buf.find(b"\r", start)
            if cr != -1 and (nl == -1 or cr < nl):
                if cr + 1 >= len(buf):
                    break  # a \r at the end: maybe \r\n, wait for the next byte
                end, next_start = cr, cr + 2 if buf[cr + 1:cr + 2] == b"\n" else cr + 1
            elif nl != -1:
                end, next_start = nl, nl + 1
            else:
                break
            line = buf[start:end].decode("utf-8", errors="replace")
            if self.position is not None and self.filename is not None:
                self.position += next_start - start
            out.append(api.SourceRecord(
                self.topic, None, None, None, data.STRING, line,
                timestamp=None,
                source_partition={FILENAME_FIELD: self.filename},
                source_offset={POSITION_FIELD: self.position if self.filename else None}))
            start = next_start
        self.buffer = buf[start:]
        return out

    def stop(self) -> None:
        self.stopping.set()
        stream, self.stream = self.stream, None
        if stream is not None and stream is not sys.stdin.buffer:
            stream.close()


class FileStreamSinkConnector(api.SinkConnector):
    def start(self, props: dict[str, str]) -> None:
        sink_config_def().parse(props)
        self.props = dict(props)
        log.info("Starting file sink connector writing to %s",
                 props.get("file") or "standard output")

    def task_class(self) -> type[api.Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def config_def(self) -> ConfigDef:
        return sink_config_def()

    def alter_offsets(self, connector_config: dict[str, str], offsets: dict[Any, Any]) -> bool:
        return True


def java_string(value: Any) -> str:
    """``value`` as Java's ``toString`` of the same Connect value would print it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, data.Struct):
        return "Struct{" + ",".join(f"{k}={java_string(v)}" for k, v in value.items()
                                    if v is not None) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    return str(value)


class FileStreamSinkTask(api.SinkTask):
    """Appends each record's value as a line (module doc)."""

    def __init__(self) -> None:
        self.out: IO[str] | None = None

    def start(self, props: dict[str, str]) -> None:
        cfg = sink_config_def().parse(props)
        self.filename: str | None = cfg["file"] or None
        if self.filename is None:
            self.out = sys.stdout
            return
        try:
            self.out = open(self.filename, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as e:
            raise ConnectError(f"Couldn't find or create file '{self.filename}' for "
                               "FileStreamSinkTask") from e

    def put(self, records: list[api.SinkRecord]) -> None:
        assert self.out is not None
        self.out.write("".join(java_string(r.value) + "\n" for r in records))

    def flush(self, offsets: dict[tuple[str, int], int]) -> None:
        if self.out is None:
            return
        self.out.flush()
        if self.out is not sys.stdout:
            os.fsync(self.out.fileno())

    def stop(self) -> None:
        out, self.out = self.out, None
        if out is not None and out is not sys.stdout:
            out.close()
