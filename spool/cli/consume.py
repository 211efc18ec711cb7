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
- On a normal end (``--max-messages``, ``--timeout``, Ctrl-C, SIGTERM) a consumer
  with ``--group`` commits the position of EVERY partition assigned to it, as Kafka's
  console consumer does: a partition it returned records from at the offset after
  the last one printed; one it read nothing from at where it would have started
  (subscribed: its committed offset, which stays, else the log start with
  ``--from-beginning`` and the log end without; assigned: the position asked for).
  A later ``consume -g G`` therefore reads exactly the records this one did not print.
  A commit the coordinator refuses then (a rebalance under way, a group this consumer
  is not a member of) is a warning line on stderr and changes nothing else: the
  records were consumed, the exit status stays 0 (Kafka's console consumer logs it).
- ``--isolation-level read_uncommitted|read_committed``: Kafka's console consumer's
  option and default (read_uncommitted: records of open and aborted transactions
  are printed too).
- Stops after ``--max-messages N`` records, or when ``--timeout S`` seconds
  pass with no new record; neither given: runs until Ctrl-C or SIGTERM (exit 0).
  A subscribed group member counts ``--timeout`` from its first assignment (it
  reads nothing before; a new group's first rebalance waits
  group.initial.rebalance.delay.ms), waiting at most 15 s (or S) for one.
  A summary (``spool: N records consumed``) goes to stderr.
- Output, one record at a time on stdout:
  default — the value and a newline;
  ``--json`` — one JSON object per line: ``{"topic", "partition",
  "offset", "timestamp" (ms or null), "key", "value", "headers"}`` with key and
  value as strings (see ``--encoding``) or null and headers as a list of ``[key,
  value]`` pairs in record order;
  ``--format FMT`` — kcat's template: ``%t`` topic, ``%p`` partition, ``%o``
  offset, ``%T`` timestamp (ms), ``%k`` key, ``%s`` value, ``%K``/``%S`` key/value
  length (-1 for null), ``%h`` headers as ``k=v,k2=v2``, ``%%``; escapes
  ``\\n``, ``\\r``, ``\\t``, ``\\\\``. No newline is added.
- ``--encoding text|base64|hex`` says how keys, values and header values are
  written in ``--json`` and by ``%k``, ``%s``, ``%h``: ``text`` (default) as UTF-8
  with undecodable bytes backslash-escaped (``\\xff``: readable, not reversible;
  ``--format`` writes the raw bytes),
  ``base64`` (standard alphabet, padded) or ``hex`` (lower case): exact bytes for
  binary data. The default output (no ``--json``/``--format``) is always the raw value.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
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
    no_such_topic,
    reach,
)
from spool.cli.encoding import Encoding, encoder

_METADATA_TIMEOUT = 30.0
_POLL_SLICE = 0.5
_COMMIT_TIMEOUT = 10.0
_ASSIGNMENT_WAIT = 15.0  # how long a group member waits for its first assignment


class IsolationLevel(StrEnum):
    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


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
    encoding: Annotated[
        Encoding,
        typer.Option("--encoding", "-e",
                     help="Keys, values and header values in --json/--format: text, base64, hex."),
    ] = Encoding.text,
    isolation_level: Annotated[
        IsolationLevel,
        typer.Option("--isolation-level",
                     help="read_committed hides records of open and aborted transactions."),
    ] = IsolationLevel.read_uncommitted,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Print TOPIC's records to stdout."""
    check_topic_name(topic)
    if sum([from_beginning, offset is not None, from_time is not None]) > 1:
        fail("give at most one of --from-beginning, --offset, --from-time", 2)
    if json_ and format_ is not None:
        fail("give at most one of --json, --format", 2)
    if format_ is None and not json_ and encoding is not Encoding.text:
        fail("--encoding applies to --json and --format output", 2)
    render = (_json_renderer(encoding) if json_
              else _template(format_ if format_ is not None else "%s\\n", encoding))
    since_ms = parse_time(from_time) if from_time is not None else None
    consumer = Consumer(
        client_config(
            bootstrap,
            **{
                "group.id": group or f"spool-cli-{uuid.uuid4().hex}",
                "enable.auto.commit": group is not None,
                "auto.offset.reset": "earliest" if from_beginning else "latest",
                "allow.auto.create.topics": False,
                "enable.partition.eof": False,
                "isolation.level": isolation_level.value,
            },
        )
    )
    signal.signal(signal.SIGTERM, _interrupt)  # end like Ctrl-C: close, summary, exit 0
    count = 0
    subscribed = group is not None and offset is None and since_ms is None and not partition
    starts: list[TopicPartition] = []
    assigned_at: list[float] = []
    try:
        partitions = _partitions(consumer, topic, partition, timeout)
        if subscribed:
            consumer.subscribe(
                [topic], on_assign=lambda c, tps: assigned_at.append(time.monotonic()))
        else:
            starts = _positions(consumer, topic, partitions, from_beginning, offset, since_ms)
            consumer.assign(starts)
            assigned_at.append(time.monotonic())
        count = _loop(consumer, topic, render, max_messages, timeout, assigned_at)
        if group is not None:
            _commit_positions(consumer, topic, group, starts if not subscribed else None,
                              OFFSET_BEGINNING if from_beginning else OFFSET_END)
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


def _commit_positions(
    consumer: Consumer, topic: str, group: str, starts: list[TopicPartition] | None,
    reset: int,
) -> None:
    """Commit the position of every assigned partition (module docstring).

    ``starts``: the assigned positions (None when subscribed: then a partition with
    nothing returned keeps its committed offset, or else starts where ``reset`` says).
    """
    assigned = consumer.assignment()
    if not assigned:
        return
    asked = {tp.partition: tp.offset for tp in starts or []}
    try:
        positions = consumer.position(assigned)
        unread = [tp for tp in positions if tp.offset < 0]
        commit = [tp for tp in positions if tp.offset >= 0]
        if unread and starts is None:
            held = consumer.committed(unread, timeout=_COMMIT_TIMEOUT)
            keep = {tp.partition for tp in held if tp.offset >= 0}
            unread = [tp for tp in unread if tp.partition not in keep]
        for tp in unread:
            where = asked.get(tp.partition, reset)
            if where < 0:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, tp.partition), timeout=_COMMIT_TIMEOUT)
                where = low if where == OFFSET_BEGINNING else high
            commit.append(TopicPartition(topic, tp.partition, where))
        if commit:
            consumer.commit(offsets=commit, asynchronous=False)
    except KafkaException as e:
        # the records are printed and consumed: a commit refused at exit (a rebalance, a
        # coordinator moving) is a warning and exit 0, as Kafka's console consumer logs it
        typer.echo(f"spool: warning: the positions were not committed to group "
                   f"'{group}': {kafka_error(e)}; a new run of the group starts from "
                   "its last committed offsets", err=True)


def _loop(
    consumer: Consumer,
    topic: str,
    render: Callable[[Message], bytes],
    max_messages: int | None,
    timeout: float | None,
    assigned_at: list[float],
) -> int:
    """Print records until ``max_messages`` or ``timeout``; ``assigned_at`` holds the time
    of the first assignment once there was one (a group member's ``--timeout`` counts from
    it: the coordinator holds a new group's first rebalance for
    group.initial.rebalance.delay.ms, and the member reads nothing meanwhile)."""
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while max_messages is None or count < max_messages:
            if not _step(consumer, topic, render, out, timeout, last, assigned_at):
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
    assigned_at: list[float],
) -> bool:
    """Print the next record; False when ``timeout`` passed without one (see _loop)."""
    while True:
        now = time.monotonic()
        if timeout is None:
            wait = _POLL_SLICE
        else:
            if assigned_at:
                end = max(last, assigned_at[0]) + timeout
            else:
                end = last + max(timeout, _ASSIGNMENT_WAIT)
            if now >= end:
                return False
            wait = min(_POLL_SLICE, end - now)
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
        raise no_such_topic(topic)
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


def parse_time(text: str) -> int:
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


def _timestamp(msg: Message) -> int | None:
    kind, ms = msg.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else ms


def _json_renderer(encoding: Encoding) -> Callable[[Message], bytes]:
    enc = encoder(encoding)

    def render(msg: Message) -> bytes:
        doc: dict[str, Any] = {
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": _timestamp(msg),
            "key": enc(msg.key()),
            "value": enc(msg.value()),
            "headers": [[k, enc(v)] for k, v in msg.headers() or []],
        }
        return (json.dumps(doc, ensure_ascii=False) + "\n").encode()

    return render


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}


def _field(code: str, encoding: Encoding) -> Callable[[Message], bytes]:
    def length(b: bytes | None) -> bytes:
        return str(-1 if b is None else len(b)).encode()

    enc = encoder(encoding)

    def raw(b: bytes | None) -> bytes:
        if b is None:
            return b""
        return b if encoding is Encoding.text else (enc(b) or "").encode()

    fields: dict[str, Callable[[Message], bytes]] = {
        "t": lambda m: (m.topic() or "").encode(),
        "p": lambda m: str(m.partition()).encode(),
        "o": lambda m: str(m.offset()).encode(),
        "T": lambda m: str(_timestamp(m) if _timestamp(m) is not None else -1).encode(),
        "k": lambda m: raw(m.key()),
        "s": lambda m: raw(m.value()),
        "K": lambda m: length(m.key()),
        "S": lambda m: length(m.value()),
        "h": lambda m: b",".join(k.encode() + b"=" + raw(v) for k, v in m.headers() or []),
    }
    if code not in fields:
        fail(f"bad --format: unknown field '%{code}' (known: %t %p %o %T %k %s %K %S %h %%)", 2)
    return fields[code]


def _template(fmt: str, encoding: Encoding = Encoding.text) -> Callable[[Message], bytes]:
    """Compile a kcat-style template into ``render(msg) -> bytes``."""
    parts: list[bytes | Callable[[Message], bytes]] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if ch == "%" and nxt == "%":
            parts.append(b"%")
        elif ch == "%" and nxt:
            parts.append(_field(nxt, encoding))
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
