"""``spool perf consume TOPIC``: Kafka's consumer perf test (kafka-consumer-perf-test).

Contract:

- Kafka's ConsumerPerformance options: ``--messages N`` (required, > 0), ``--group G``
  (default ``perf-consumer-<random>``), ``--timeout MS`` (stop when no record came
  for that long; 10000), ``--reporting-interval MS`` (5000), ``--show-detailed-stats``,
  ``--from-latest`` (a group without committed offsets starts at the end instead of
  the beginning), ``--fetch-size B`` (``max.partition.fetch.bytes``, 1 MiB),
  ``--socket-buffer-size B`` (2 MiB), ``--consumer.config FILE`` (Kafka client
  properties, :mod:`spool.cli.perf_props`; its ``bootstrap.servers`` wins over
  ``--bootstrap-server``), ``--hide-header``, ``--date-format`` (Java's
  SimpleDateFormat letters y M d D H h m s S a E z Z; Kafka's default
  ``yyyy-MM-dd HH:mm:ss:SSS``, local time). The topic is TOPIC
  or ``--topic``; a missing topic is an error (one line, exit 1).
- The consumer subscribes as a member of the group and reads until it has N records
  (never more: it asks the client for at most the records still missing) or the
  timeout passes; then it closes (committing, as Kafka's tool does with auto-commit).
  Bytes are key + value lengths. The rebalance time is the time from subscribing (or
  a revocation) to the assignment; the fetch time the elapsed time minus it.
- Output on stdout, Kafka's: a header (unless ``--hide-header``) and one summary row
  ``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
  nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec``; with
  ``--show-detailed-stats`` one row per reporting interval instead (``time,
  threadId, ...``). Without detailed stats a progress line goes to stderr every
  interval. ``--json``: one object with ``topic``, ``group``, ``messages`` (asked),
  ``start_time_ms``, ``end_time_ms``, ``data_consumed_mb``, ``data_consumed_bytes``,
  ``mb_per_sec``, ``data_consumed_records``, ``records_per_sec``,
  ``rebalance_time_ms``, ``fetch_time_ms``, ``fetch_mb_per_sec``,
  ``fetch_records_per_sec`` (and ``intervals``, the detailed rows, with
  ``--show-detailed-stats``). Fewer records than asked before the timeout is Kafka's
  WARNING on stderr and exit 0, as Kafka's tool.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

import typer
from confluent_kafka import Consumer, KafkaError

from spool.cli import perf_props
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    check_topic_name,
    cli_command,
    client_config,
    client_props,
    kafka_error,
    no_such_topic,
    print_json,
    reach,
)
from spool.cli.perf_stats import ConsumerStats

REACH_TIMEOUT = 10.0
_BATCH = 10_000
_POLL = 0.1
SUMMARY_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                  "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


KAFKA_DATE_FORMAT = "yyyy-MM-dd HH:mm:ss:SSS"


def date_formatter(pattern: str) -> Callable[[int], str]:
    """A formatter of epoch milliseconds (local time) for a java.text.SimpleDateFormat
    ``pattern``: letters y M d D H h m s S a E z Z, ``'text'`` quoted, ``''`` a quote.
    Another letter is one line and exit 2 (Java refuses it too)."""
    pieces: list[str | Callable[[datetime, int], str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:
                pieces.append("'")
            elif end < 0:
                raise CliError(f"--date-format: unterminated quote in '{pattern}'", 2)
            else:
                pieces.append(pattern[i + 1:end])
            i = max(end, i + 1) + 1
            continue
        if not ch.isascii() or not ch.isalpha():
            pieces.append(ch)
            i += 1
            continue
        n = len(pattern[i:]) - len(pattern[i:].lstrip(ch))
        pieces.append(_field(ch, n, pattern))
        i += n
    def fmt(ms: int) -> str:
        dt = datetime.fromtimestamp(ms / 1000.0).astimezone()
        return "".join(p if isinstance(p, str) else p(dt, ms) for p in pieces)
    return fmt


def _field(ch: str, n: int, pattern: str) -> Callable[[datetime, int], str]:
    def num(value: Callable[[datetime], int]) -> Callable[[datetime, int], str]:
        return lambda dt, _ms: f"{value(dt):0{n}d}"
    if ch == "y":
        return (lambda dt, _ms: f"{dt.year % 100:02d}") if n == 2 else num(lambda dt: dt.year)
    if ch == "M":
        if n >= 3:
            return lambda dt, _ms: dt.strftime("%B" if n >= 4 else "%b")
        return num(lambda dt: dt.month)
    if ch == "E":
        return lambda dt, _ms: dt.strftime("%A" if n >= 4 else "%a")
    if ch == "S":
        return lambda _dt, ms: f"{ms % 1000:0{n}d}"
    if ch == "a":
        return lambda dt, _ms: dt.strftime("%p")
    if ch == "z":
        return lambda dt, _ms: dt.strftime("%Z")
    if ch == "Z":
        return lambda dt, _ms: dt.strftime("%z")
    fields: dict[str, Callable[[datetime], int]] = {
        "d": lambda dt: dt.day, "D": lambda dt: dt.timetuple().tm_yday,
        "H": lambda dt: dt.hour, "h": lambda dt: dt.hour % 12 or 12,
        "m": lambda dt: dt.minute, "s": lambda dt: dt.second,
    }
    if ch not in fields:
        raise CliError(f"--date-format: pattern letter '{ch}' is not supported in "
                       f"'{pattern}' (y M d D H h m s S a E z Z)", 2)
    return num(fields[ch])


kafka_time = date_formatter(KAFKA_DATE_FORMAT)


def summary_row(t: dict[str, Any], when: Callable[[int], str] = kafka_time) -> str:
    return (f"{when(t['start_time_ms'])}, {when(t['end_time_ms'])}, "
            f"{t['data_consumed_mb']:.4f}, {t['mb_per_sec']:.4f}, {t['data_consumed_records']}, "
            f"{t['records_per_sec']:.4f}, {t['rebalance_time_ms']}, {t['fetch_time_ms']}, "
            f"{t['fetch_mb_per_sec']:.4f}, {t['fetch_records_per_sec']:.4f}")


def detailed_row(r: dict[str, Any], when: Callable[[int], str] = kafka_time) -> str:
    return (f"{when(r['time_ms'])}, 0, {r['data_consumed_mb']:.4f}, {r['mb_per_sec']:.4f}, "
            f"{r['data_consumed_records']}, {r['records_per_sec']:.4f}, "
            f"{r['rebalance_time_ms']}, {r['fetch_time_ms']}, {r['fetch_mb_per_sec']:.4f}, "
            f"{r['fetch_records_per_sec']:.4f}")


@cli_command
def consume(
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="TOPIC", help="Topic to read (or --topic).", show_default=False),
    ] = None,
    topic_opt: Annotated[str | None, typer.Option("--topic", help="Topic (as Kafka's).")] = None,
    messages: Annotated[
        int | None, typer.Option("--messages", help="Number of records to consume.")
    ] = None,
    group: Annotated[
        str | None, typer.Option("--group", help="Group id [default: perf-consumer-<random>].")
    ] = None,
    timeout: Annotated[
        int, typer.Option("--timeout", metavar="MS", help="Stop after MS without a record.")
    ] = 10_000,
    reporting_interval: Annotated[
        int, typer.Option("--reporting-interval", metavar="MS", help="Progress every MS.")
    ] = 5000,
    show_detailed_stats: Annotated[
        bool, typer.Option("--show-detailed-stats", help="A stats row per reporting interval.")
    ] = False,
    from_latest: Annotated[
        bool, typer.Option("--from-latest", help="Without committed offsets start at the end.")
    ] = False,
    fetch_size: Annotated[
        int, typer.Option("--fetch-size", help="Bytes per partition per fetch.")
    ] = 1024 * 1024,
    socket_buffer_size: Annotated[
        int, typer.Option("--socket-buffer-size", help="TCP receive buffer size.")
    ] = 2 * 1024 * 1024,
    consumer_config: Annotated[
        str | None, typer.Option("--consumer.config", metavar="FILE",
                                 help="Consumer properties file.")
    ] = None,
    hide_header: Annotated[
        bool, typer.Option("--hide-header", help="Print no header line.")
    ] = False,
    date_format: Annotated[
        str, typer.Option("--date-format", help="java.text.SimpleDateFormat of the times.")
    ] = KAFKA_DATE_FORMAT,
    json_out: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Consume N records and report throughput (kafka-consumer-perf-test)."""
    topic, _ = perf_props.split_args(args, topic_opt, False)
    check_topic_name(topic)
    _check(messages, timeout, reporting_interval, fetch_size, socket_buffer_size)
    when = date_formatter(date_format)
    assert messages is not None
    group = group or f"perf-consumer-{random.randrange(100_000)}"
    conf = consumer_conf(bootstrap, perf_props.read(consumer_config, [], "--consumer.config"),
                         group, from_latest, fetch_size, socket_buffer_size)
    consumer = perf_props.build(Consumer, conf, "--consumer.config")
    try:
        md = reach(consumer, REACH_TIMEOUT, subject=topic)
        if topic not in md.topics or md.topics[topic].error is not None:
            raise no_such_topic(topic)
        if not (hide_header or json_out):
            print(DETAILED_HEADER if show_detailed_stats else SUMMARY_HEADER, flush=True)
        stats = ConsumerStats(time.time())
        done = _consume(consumer, topic, messages, timeout / 1000.0, reporting_interval / 1000.0,
                        stats, when if show_detailed_stats and not json_out else None)
        end = time.time()
    finally:
        consumer.close()
    if not done:
        sys.stderr.write("WARNING: Exiting before consuming the expected number of messages: "
                         f"timeout ({timeout} ms) exceeded. You can use the --timeout option to "
                         "increase the timeout.\n")
    total = stats.total(end)
    if json_out:
        doc: dict[str, Any] = {"topic": topic, "group": group, "messages": messages, **total}
        if show_detailed_stats:
            doc["intervals"] = stats.intervals
        print_json(doc)
    elif not show_detailed_stats:
        print(summary_row(total, when), flush=True)


def _consume(consumer: Consumer, topic: str, n: int, timeout: float, interval: float,
             stats: ConsumerStats, detailed: Callable[[int], str] | None) -> bool:
    """Read until ``n`` records or ``timeout`` s without one; True if all ``n`` came.
    ``detailed``: print Kafka's detailed rows (with these times) instead of progress."""
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, _p: stats.joined(time.time()),
        on_revoke=lambda _c, _p: stats.joining(time.time()),
    )
    last_consumed = now = time.time()
    while stats.records < n and now - last_consumed <= timeout:
        batch = consumer.consume(min(_BATCH, n - stats.records), _POLL)
        now = time.time()
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise kafka_error(err, topic)
            key = msg.key()
            stats.records += 1
            stats.bytes += len(msg) + (len(key) if key else 0)
        if batch:
            last_consumed = now
        # Kafka reports only as records come (its check runs per record); the stderr
        # progress line also shows a wait for the assignment
        if now - stats.last_report >= interval and (batch or detailed is None):
            row = stats.interval(now)
            if detailed is not None:
                print(detailed_row(row, detailed), flush=True)
            else:
                sys.stderr.write(f"{row['data_consumed_records']} records consumed, "
                                 f"{row['records_per_sec']:.1f} records/sec "
                                 f"({row['mb_per_sec']:.2f} MB/sec).\n")
                sys.stderr.flush()
    return stats.records >= n


def consumer_conf(bootstrap: str, props: dict[str, str], group: str, from_latest: bool,
                  fetch_size: int, socket_buffer_size: int) -> dict[str, Any]:
    """Kafka's ConsumerPerformance settings over the properties file's."""
    conf = client_config(bootstrap)
    if conf.get("client.id") == "spool-cli":
        conf["client.id"] = "perf-consumer-client"
    connection, own = perf_props.librdkafka(props, "--consumer.config")
    conf.update(connection)
    conf.update(own)
    conf.update({
        "group.id": group,
        "auto.offset.reset": "latest" if from_latest else "earliest",
        "max.partition.fetch.bytes": fetch_size,
        "socket.receive.buffer.bytes": socket_buffer_size,
    })
    conf.update(client_props())  # -X has the last word
    return conf


def _check(messages: int | None, timeout: int, reporting_interval: int, fetch_size: int,
           socket_buffer_size: int) -> None:
    """Kafka's checks, each one line and exit 2."""
    if messages is None:
        raise CliError("--messages is required", 2)
    for name, value in (("--messages", messages), ("--reporting-interval", reporting_interval),
                        ("--fetch-size", fetch_size),
                        ("--socket-buffer-size", socket_buffer_size)):
        if value <= 0:
            raise CliError(f"{name} should be greater than zero", 2)
    if timeout < 0:
        raise CliError("--timeout should not be negative", 2)
