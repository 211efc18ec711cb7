"""``spool produce TOPIC``: one record per stdin line.

Contract:

- Each line of stdin (bytes, the trailing ``\\n`` — and a ``\\r`` before it —
  removed) is one record value. With ``--key-separator SEP`` a line is split
  at the first SEP into key and value; a line without SEP is a failed record
  (reported, not sent).
- ``--null-marker M`` (Kafka's console producer's ``null.marker``): a key or a
  value equal to M is sent as null; a null value with a key is a tombstone.
- ``--headers k1=v1,k2=v2`` (repeatable) adds the same headers, in order, to
  every record.
- Partitioning is confluent-kafka's ``murmur2_random`` (the Java client's
  rule: a keyed record goes to ``(murmur2(key) & 0x7fffffff) % n``; a record
  without a key to a random partition) unless ``--partition`` pins one.
- ``--acks 0|1|all`` and ``--compression none|gzip|snappy|lz4|zstd`` set the
  producer's ``acks`` and ``compression.type``; ``--timeout`` bounds each
  record's delivery (``message.timeout.ms``).
- Where records went: the summary names each partition written and the offsets
  written there; ``--print-offsets`` also prints one stdout line per delivered
  record, in delivery order: ``line N: partition P, offset O`` (N is the stdin
  line; the offset is -1 with ``--acks 0``, which gets no answer).
- Failures name the stdin line: ``spool: line N: <what happened> (ERROR_NAME)``
  (the first few, then ``(further failures not shown)``), and the summary lists the
  failed lines (the first 20). A record larger than the limit that refused it says
  its size and the limit: the producer's ``message.max.bytes`` (a local check, see
  ``-X``) or the topic's ``max.message.bytes``, read from the broker.
- ``--stop-on-error``: each record is delivered before the next line is read, and
  the first failure ends the command: no line after the failed one is sent (slower:
  one round trip per record).
- The exit status is 1 if any record failed. The last stderr line is the summary:
  ``spool: N records sent to 'TOPIC' (partition P: offsets A-B, ...)`` (plus ``, M
  failed (lines ...)``).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any, BinaryIO

import typer
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    check_topic_name,
    cli_command,
    client_config,
    error_line,
    parse_pairs,
    reach,
)

_MAX_REPORTED = 5
_MAX_LINES_LISTED = 20
_MAX_PARTITIONS_LISTED = 8


class Acks(StrEnum):
    none = "0"
    leader = "1"
    all = "all"
    all_ = "-1"


class Compression(StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class _Tally:
    """Counts deliveries, remembers where records went, reports failures by line."""

    def __init__(self, topic: str, bootstrap: str, print_offsets: bool, conf: dict[str, Any]):
        self.topic, self.bootstrap, self.print_offsets = topic, bootstrap, print_offsets
        self.conf = conf
        self.sent = 0
        self.failed_lines: list[int] = []
        self.lost = 0  # records still undelivered when the final flush gave up
        self.ranges: dict[int, list[int]] = {}  # partition -> [first, last] offset
        self._topic_limit: str | None = None

    @property
    def failed(self) -> int:
        return len(self.failed_lines) + self.lost

    def fail(self, line: int, what: str) -> None:
        self.failed_lines.append(line)
        if self.failed <= _MAX_REPORTED:
            sys.stderr.write(f"spool: line {line}: {what}\n")
        elif self.failed == _MAX_REPORTED + 1:
            sys.stderr.write("spool: (further failures not shown)\n")

    def delivered(self, line: int, size: int, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.fail(line, self.describe(err, size))
            return
        self.sent += 1
        p, o = msg.partition(), msg.offset()
        if o is not None and o >= 0:
            r = self.ranges.setdefault(p, [o, o])
            r[0], r[1] = min(r[0], o), max(r[1], o)
        else:
            self.ranges.setdefault(p, [])
        if self.print_offsets:
            sys.stdout.write(f"line {line}: partition {p}, offset {-1 if o is None else o}\n")

    def describe(self, err: KafkaError, size: int, local: bool = False) -> str:
        """One line for a record that failed (without the ``line N:`` prefix); ``local``:
        refused by the producer itself, before sending."""
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            return self.too_large(size, local)
        if local:
            return f"{error_line(err, self.topic, self.bootstrap)}; not sent"
        return f"not delivered: {error_line(err, self.topic, self.bootstrap)}"

    def too_large(self, size: int, local: bool) -> str:
        name = "MESSAGE_TOO_LARGE"
        if local:
            limit = self.conf.get("message.max.bytes", 1000000)
            return (f"record of {size} bytes is larger than the producer's message.max.bytes "
                    f"{limit} (set it with -X message.max.bytes=N) ({name})")
        limit = self.topic_limit()
        return (f"not delivered: record of {size} bytes, in a batch larger than "
                f"max.message.bytes {limit} of topic '{self.topic}' ({name})")

    def topic_limit(self) -> str:
        """The topic's max.message.bytes, asked once (``?`` if it cannot be read)."""
        if self._topic_limit is None:
            self._topic_limit = "?"
            try:
                admin = AdminClient(client_config(self.bootstrap))
                res = ConfigResource(ResourceType.TOPIC, self.topic)
                entries = admin.describe_configs([res], request_timeout=10)[res].result(10)
                self._topic_limit = entries["max.message.bytes"].value
            except Exception:  # noqa: BLE001 - the line is still worth printing without it
                pass
        return self._topic_limit

    def summary(self) -> str:
        n = self.sent
        text = f"{n} record{'' if n == 1 else 's'} sent to '{self.topic}'"
        if self.ranges:
            parts = []
            for p in sorted(self.ranges)[:_MAX_PARTITIONS_LISTED]:
                r = self.ranges[p]
                if not r:
                    parts.append(f"partition {p}")
                elif r[0] == r[1]:
                    parts.append(f"partition {p}: offset {r[0]}")
                else:
                    parts.append(f"partition {p}: offsets {r[0]}-{r[1]}")
            if len(self.ranges) > _MAX_PARTITIONS_LISTED:
                parts.append(f"{len(self.ranges) - _MAX_PARTITIONS_LISTED} more partitions")
            text += f" ({', '.join(parts)})"
        if self.failed:
            lines = sorted(self.failed_lines)
            listed = ", ".join(str(n) for n in lines[:_MAX_LINES_LISTED])
            more = ", ..." if len(lines) > _MAX_LINES_LISTED else ""
            word = "line" if len(lines) == 1 else "lines"
            text += f", {self.failed} failed" + (f" ({word} {listed}{more})" if lines else "")
        return text


@cli_command
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-K", help="Split each line into key SEP value."),
    ] = None,
    null_marker: Annotated[
        str | None,
        typer.Option("--null-marker",
                     help="A key or value equal to this is sent as null (a tombstone)."),
    ] = None,
    headers: Annotated[
        list[str] | None,
        typer.Option("--headers", "-H", help="k1=v1,k2=v2 added to every record (repeatable)."),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Write every record here.")
    ] = None,
    acks: Annotated[Acks, typer.Option("--acks", help="0, 1 or all (-1).")] = Acks.all,
    compression: Annotated[
        Compression, typer.Option("--compression", "-z", help="Batch compression codec.")
    ] = Compression.none,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to deliver each record.")
    ] = 30.0,
    print_offsets: Annotated[
        bool, typer.Option("--print-offsets",
                           help="Print 'line N: partition P, offset O' per record on stdout."),
    ] = False,
    stop_on_error: Annotated[
        bool, typer.Option("--stop-on-error",
                           help="Send one record at a time; stop at the first failure."),
    ] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Write stdin's lines to TOPIC, one record per line."""
    check_topic_name(topic)
    if key_separator == "":
        raise CliError("--key-separator must not be empty", 2)
    header_list = [(k, v.encode()) for k, v in parse_pairs(headers, "header").items()]
    conf = client_config(
        bootstrap,
        **{
            "acks": "all" if acks in (Acks.all, Acks.all_) else acks.value,
            "compression.type": compression.value,
            "partitioner": "murmur2_random",
            "message.timeout.ms": int(timeout * 1000),
        },
    )
    producer = Producer(conf)
    # reach a broker first: metadata for all topics (asking for one could create it)
    reach(producer, timeout, subject=topic)
    tally = _Tally(topic, bootstrap, print_offsets, conf)
    reader = _Lines(sys.stdin.buffer, key_separator, null_marker)
    try:
        _send(producer, topic, reader, header_list, partition, tally, stop_on_error)
    finally:
        left = producer.flush(timeout + 5)
        sys.stdout.flush()
        tally.lost = left
    if tally.failed:
        raise CliError(tally.summary())
    typer.echo(f"spool: {tally.summary()}", err=True)


class _Lines:
    """stdin's lines as ``(number, key, value)``, or ``(number, None, error)``."""

    def __init__(self, stream: BinaryIO, key_separator: str | None, null_marker: str | None):
        self.stream = stream
        self.key_separator = key_separator
        self.sep = key_separator.encode() if key_separator is not None else None
        self.null = null_marker.encode() if null_marker is not None else None

    def __iter__(self):  # type: ignore[no-untyped-def]
        for number, raw in enumerate(self.stream, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            key: bytes | None = None
            value: bytes | None = line
            if self.sep is not None:
                key, found, value = line.partition(self.sep)
                if not found:
                    yield number, None, f"no key separator {self.key_separator!r}; not sent"
                    continue
            if self.null is not None:
                key = None if key == self.null else key
                value = None if value == self.null else value
            yield number, key, value


def _send(
    producer: Producer,
    topic: str,
    lines: _Lines,
    headers: list[tuple[str, bytes]],
    partition: int | None,
    tally: _Tally,
    stop_on_error: bool,
) -> None:
    extra = {"partition": partition} if partition is not None else {}
    for number, key, value in lines:
        if isinstance(value, str):  # a line that is no record
            tally.fail(number, value)
            if stop_on_error:
                return
            continue
        size = len(key or b"") + len(value or b"")

        def done(err: KafkaError | None, msg: Message, n: int = number, s: int = size) -> None:
            tally.delivered(n, s, err, msg)

        while True:
            try:
                producer.produce(topic, value, key, headers=headers or None, on_delivery=done,
                                 **extra)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
            except KafkaException as e:
                tally.fail(number, tally.describe(e.args[0], size, local=True))
                break
        if stop_on_error:
            producer.flush()
            if tally.failed:
                return
        else:
            producer.poll(0)
