"""``spool produce TOPIC``: one record per stdin line.

Contract:

- Each line of stdin (bytes, the trailing ``\\n`` — and a ``\\r`` before it —
  removed) is one record value. With ``--key-separator SEP`` a line is split
  at the first SEP into key and value; a line without SEP is a failed record
  (reported, not sent).
- ``--headers k1=v1,k2=v2`` (repeatable) adds the same headers, in order, to
  every record.
- Partitioning is confluent-kafka's ``murmur2_random`` (the Java client's
  rule: a keyed record goes to ``(murmur2(key) & 0x7fffffff) % n``; a record
  without a key to a random partition) unless ``--partition`` pins one.
- ``--acks 0|1|all`` and ``--compression none|gzip|snappy|lz4|zstd`` set the
  producer's ``acks`` and ``compression.type``; ``--timeout`` bounds each
  record's delivery (``message.timeout.ms``).
- Every delivery failure is reported (the first few one line each) and the
  exit status is 1 if any record failed. The last stderr line is the summary:
  ``spool: N records sent to 'TOPIC'`` (plus ``, M failed``).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, BinaryIO

import typer
from confluent_kafka import KafkaError, KafkaException, Message, Producer

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
    """Counts deliveries and reports the first few failures."""

    def __init__(self, topic: str, bootstrap: str) -> None:
        self.topic, self.bootstrap = topic, bootstrap
        self.sent = self.failed = 0

    def fail(self, what: str) -> None:
        self.failed += 1
        if self.failed <= _MAX_REPORTED:
            sys.stderr.write(f"spool: {what}\n")
        elif self.failed == _MAX_REPORTED + 1:
            sys.stderr.write("spool: (further failures not shown)\n")

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.sent += 1
        else:
            self.fail(f"record not delivered: {error_line(err, self.topic, self.bootstrap)}")


@cli_command
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to.")],
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", "-K", help="Split each line into key SEP value."),
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
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Write stdin's lines to TOPIC, one record per line."""
    check_topic_name(topic)
    if key_separator == "":
        raise CliError("--key-separator must not be empty", 2)
    header_list = [(k, v.encode()) for k, v in parse_pairs(headers, "header").items()]
    producer = Producer(
        client_config(
            bootstrap,
            **{
                "acks": "all" if acks in (Acks.all, Acks.all_) else acks.value,
                "compression.type": compression.value,
                "partitioner": "murmur2_random",
                "message.timeout.ms": int(timeout * 1000),
            },
        )
    )
    # reach a broker first: metadata for all topics (asking for one could create it)
    reach(producer, timeout, subject=topic)
    tally = _Tally(topic, bootstrap)
    try:
        _send_lines(producer, topic, sys.stdin.buffer, key_separator, header_list, partition, tally)
    finally:
        left = producer.flush(timeout + 5)
        if left:
            tally.failed += left
    summary = f"{tally.sent} records sent to '{topic}'"
    if tally.failed:
        raise CliError(f"{summary}, {tally.failed} failed")
    typer.echo(f"spool: {summary}", err=True)


def _send_lines(
    producer: Producer,
    topic: str,
    stream: BinaryIO,
    key_separator: str | None,
    headers: list[tuple[str, bytes]],
    partition: int | None,
    tally: _Tally,
) -> None:
    sep = key_separator.encode() if key_separator is not None else None
    extra = {"partition": partition} if partition is not None else {}
    for number, raw in enumerate(stream, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        key: bytes | None = None
        value = line
        if sep is not None:
            key, found, value = line.partition(sep)
            if not found:
                tally.fail(f"line {number}: no key separator {key_separator!r}; not sent")
                continue
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    headers=headers or None,
                    on_delivery=tally.on_delivery,
                    **extra,
                )
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
            except KafkaException as e:
                err = e.args[0]
                tally.fail(f"line {number}: {error_line(err, topic, tally.bootstrap)}; not sent")
                break
        producer.poll(0)
