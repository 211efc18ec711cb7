"""``spool consume TOPIC``: print a topic's records.

Contract:

- Where to start, at most one of: ``--from-beginning``; ``--offset O``
  (``O >= 0`` absolute, ``O < 0`` that many before the end, or
  ``beginning``/``end``); ``--from-time T`` (ISO-8601 datetime — naive means
  local time — or epoch milliseconds; each partition starts at the first
  record whose timestamp is >= T, found with ListOffsets via
  ``offsets_for_times``; a partition with none starts at its end). Default:
  the end (new records only), as kafka-console-consumer.
- Without ``--group`` the partitions (all, or those given with
  ``--partition``, repeatable) are assigned directly and no offsets are
  committed. With ``--group G`` and no explicit position or partition the
  consumer subscribes as member of G (``--from-beginning`` sets
  ``auto.offset.reset=earliest``) and commits its offsets; with a position
  or partitions it assigns them directly and still commits to G.
- Stops after ``--max-messages N`` records, or when ``--timeout S`` seconds
  pass with no new record; neither given: runs until Ctrl-C or SIGTERM (exit 0).
  A summary (``spool: N records consumed``) goes to stderr.
- Output, one record at a time on stdout:
  default — the value and a newline;
  ``--json`` — one JSON object per line: ``{"topic", "partition",
  "offset", "timestamp" (ms or null), "key", "value", "headers"}`` with key and
  value as UTF-8 text (undecodable bytes backslash-escaped) or null and headers
  as a list of ``[key, value]`` pairs in record order;
  ``--format FMT`` — kcat's template: ``%t`` topic, ``%p`` partition, ``%o``
  offset, ``%T`` timestamp (ms), ``%k`` key, ``%s`` value, ``%K``/``%S`` key/value
  length (-1 for null), ``%h`` headers as ``k=v,k2=v2``, ``%%``; escapes
  ``\\n``, ``\\r``, ``\\t``, ``\\\\``. No newline is added.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, BinaryIO

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    check_topic_name,
    cli_command,
    client_config,
    fail,
    kafka_error,
    reach,
)

_METADATA_TIMEOUT = 30.0
_POLL_SLICE = 0.5


@cli_command
def consume(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest record.")
    ] = False,
    offset: Annotated[
        str | None,
        typer.Option("--offset", "-o", help="N (absolute), -N (N before the end), beginning, end."),
    ] = None,
    from_time: Annotated[
        str | None,
        typer.Option("--from-time", help="ISO-8601 datetime or epoch ms: first record at/after."),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", min=0, help="Only this partition (repeatable)."),
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", min=1, help="Stop after N records.")
    ] = None,
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="Consume as this group; commit offsets.")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.0, help="Stop after this many seconds with no record."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object per record.")] = False,
    format_: Annotated[
        str | None, typer.Option("--format", "-f", help="kcat-style template, e.g. '%k=%s\\n'.")
    ] = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Print TOPIC's records to stdout."""
    check_topic_name(topic)
    if sum([from_beginning, offset is not None, from_time is not None]) > 1:
        fail("give at most one of --from-beginning, --offset, --from-time", 2)
    if json_ and format_ is not None:
        fail("give at most one of --json, --format", 2)
    render = _json_line if json_ else _template(format_ if format_ is not None else "%s\\n")
    since_ms = _parse_time(from_time) if from_time is not None else None
    consumer = Consumer(
        client_config(
            bootstrap,
            **{
                "group.id": group or f"spool-cli-{uuid.uuid4().hex}",
                "enable.auto.commit": group is not None,
                "auto.offset.reset": "earliest" if from_beginning else "latest",
                "allow.auto.create.topics": False,
                "enable.partition.eof": False,
            },
        )
    )
    signal.signal(signal.SIGTERM, _interrupt)  # end like Ctrl-C: close, summary, exit 0
    count = 0
    subscribed = group is not None and offset is None and since_ms is None and not partition
    try:
        partitions = _partitions(consumer, topic, partition, timeout)
        if subscribed:
            consumer.subscribe([topic])
        else:
            consumer.assign(
                _positions(consumer, topic, partitions, from_beginning, offset, since_ms)
            )
        count = _loop(consumer, topic, render, max_messages, timeout)
        if subscribed and count == 0 and not consumer.assignment():
            typer.echo(
                f"spool: group '{group}' was given no partitions of '{topic}' "
                "(is the group coordinator reachable?)",
                err=True,
            )
    finally:
        sys.stdout.flush()
        consumer.close()
    typer.echo(f"spool: {count} records consumed", err=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _loop(
    consumer: Consumer,
    topic: str,
    render: Callable[[Message], bytes],
    max_messages: int | None,
    timeout: float | None,
) -> int:
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while max_messages is None or count < max_messages:
            if not _step(consumer, topic, render, out, timeout, last):
                break
            count += 1
            last = time.monotonic()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how an open-ended consume ends: not an error
    return count


def _step(
    consumer: Consumer,
    topic: str,
    render: Callable[[Message], bytes],
    out: BinaryIO,
    timeout: float | None,
    last: float,
) -> bool:
    """Print the next record; False when ``timeout`` passed since ``last`` without one."""
    while True:
        now = time.monotonic()
        if timeout is not None and now - last >= timeout:
            return False
        wait = _POLL_SLICE if timeout is None else min(_POLL_SLICE, last + timeout - now)
        msg = consumer.poll(max(wait, 0.0))
        if msg is None:
            out.flush()
            continue
        err = msg.error()
        if err is not None:
            if err.retriable() or err.code() == KafkaError._PARTITION_EOF:
                continue
            raise kafka_error(err, topic)
        out.write(render(msg))
        return True


def _partitions(
    consumer: Consumer, topic: str, wanted: list[int] | None, timeout: float | None
) -> list[int]:
    """The partitions to read (checked against the topic's metadata)."""
    md = reach(consumer, timeout or _METADATA_TIMEOUT, topic, subject=topic)
    t = md.topics.get(topic)
    if t is None:
        fail(f"topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    if t.error is not None:
        raise kafka_error(t.error, topic)
    have = sorted(t.partitions)
    for p in wanted or []:
        if p not in have:
            fail(f"topic '{topic}' has no partition {p} (it has {len(have)})", 1)
    return sorted(set(wanted)) if wanted else have


def _positions(
    consumer: Consumer,
    topic: str,
    partitions: list[int],
    from_beginning: bool,
    offset: str | None,
    since_ms: int | None,
) -> list[TopicPartition]:
    if since_ms is not None:
        asked = [TopicPartition(topic, p, since_ms) for p in partitions]
        try:
            found = consumer.offsets_for_times(asked, timeout=_METADATA_TIMEOUT)
        except KafkaException as e:
            raise kafka_error(e, topic) from None
        for tp in found:
            if tp.error is not None:
                raise kafka_error(tp.error, topic)
        return [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found
        ]
    if from_beginning:
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if offset is None:
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    word = offset.strip().lower()
    if word in ("beginning", "earliest"):
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    if word in ("end", "latest"):
        return [TopicPartition(topic, p, OFFSET_END) for p in partitions]
    try:
        n = int(word)
    except ValueError:
        fail(f"bad --offset '{offset}': expected N, -N, beginning or end", 2)
    if n >= 0:
        return [TopicPartition(topic, p, n) for p in partitions]
    positions = []
    for p in partitions:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=_METADATA_TIMEOUT
            )
        except KafkaException as e:
            raise kafka_error(e, topic) from None
        positions.append(TopicPartition(topic, p, max(low, high + n)))
    return positions


def _parse_time(text: str) -> int:
    """Epoch milliseconds from ``text`` (digits: already ms; else ISO-8601)."""
    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        return int(datetime.fromisoformat(s).timestamp() * 1000)
    except ValueError:
        raise CliError(
            f"bad --from-time '{text}': expected ISO-8601 (2024-05-01T12:00:00Z) or epoch ms", 2
        ) from None


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "backslashreplace")


def _timestamp(msg: Message) -> int | None:
    kind, ms = msg.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else ms


def _json_line(msg: Message) -> bytes:
    doc: dict[str, Any] = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": _timestamp(msg),
        "key": _text(msg.key()),
        "value": _text(msg.value()),
        "headers": [[k, _text(v)] for k, v in msg.headers() or []],
    }
    return (json.dumps(doc, ensure_ascii=False) + "\n").encode()


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}


def _field(code: str) -> Callable[[Message], bytes]:
    def length(b: bytes | None) -> bytes:
        return str(-1 if b is None else len(b)).encode()

    fields: dict[str, Callable[[Message], bytes]] = {
        "t": lambda m: (m.topic() or "").encode(),
        "p": lambda m: str(m.partition()).encode(),
        "o": lambda m: str(m.offset()).encode(),
        "T": lambda m: str(_timestamp(m) if _timestamp(m) is not None else -1).encode(),
        "k": lambda m: m.key() or b"",
        "s": lambda m: m.value() or b"",
        "K": lambda m: length(m.key()),
        "S": lambda m: length(m.value()),
        "h": lambda m: b",".join(k.encode() + b"=" + (v or b"") for k, v in m.headers() or []),
    }
    if code not in fields:
        fail(f"bad --format: unknown field '%{code}' (known: %t %p %o %T %k %s %K %S %h %%)", 2)
    return fields[code]


def _template(fmt: str) -> Callable[[Message], bytes]:
    """Compile a kcat-style template into ``render(msg) -> bytes``."""
    parts: list[bytes | Callable[[Message], bytes]] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if ch == "%" and nxt == "%":
            parts.append(b"%")
        elif ch == "%" and nxt:
            parts.append(_field(nxt))
        elif ch == "\\" and nxt in _ESCAPES:
            parts.append(_ESCAPES[nxt])
        else:
            parts.append(ch.encode())
            i += 1
            continue
        i += 2

    def render(msg: Message) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(msg) for p in parts)

    return render
