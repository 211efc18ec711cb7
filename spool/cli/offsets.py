"""``spool offsets [TOPIC[:PARTITIONS] ...]``: offsets per partition (kafka-get-offsets).

Contract (Kafka's GetOffsetShell, over confluent-kafka's AdminClient.list_offsets):

- Which partitions: each argument is Kafka's ``--topic-partitions`` pattern,
  ``topic``, ``topic:1``, ``topic:0-3``, ``topic:5-`` or ``topic:-3`` (the upper
  bound exclusive, as Kafka's), several separated by commas or given as several
  arguments or with Kafka's ``--topic-partitions``; Kafka's ``--topic T`` with
  ``--partitions 0,1`` works too. Topic names are exact (not regular expressions,
  as Kafka's are). No topic named: every
  topic (internal ones too unless ``--exclude-internal-topics``). A named topic
  that does not exist is an error (UNKNOWN_TOPIC_OR_PARTITION); so is a pattern
  that matches no partition.
- ``--time``: ``latest``/``-1`` (default: the log end offset: the high watermark,
  or the last stable offset with ``--isolation-level read_committed``),
  ``earliest``/``-2`` (the log start offset), ``max-timestamp``/``-3`` (the offset
  of the record with the largest timestamp), ``earliest-local``/``-4`` (Spool keeps
  every segment locally: the same as earliest), or a timestamp (epoch ms, or
  ISO-8601): the first offset whose record timestamp is at or after it.
- Output: Kafka's lines, ``topic:partition:offset``, sorted by topic and partition.
  As Kafka's tool, a partition without an answer (no record at or after the
  timestamp) is not listed; a line on stderr says how many were left out.
  ``--json``: an array of ``{"topic", "partition", "offset", "timestamp"}`` with
  every partition (offset and timestamp -1 when there is none).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from confluent_kafka import IsolationLevel as _Isolation
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    admin_client,
    check_topic_name,
    cli_command,
    fail,
    no_such_topic,
    print_json,
    result,
)
from spool.cli.consume import IsolationLevel, parse_time

_RANGE = re.compile(r"^(\d+)?(-)?(\d+)?$")
_WORDS = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4,
          "latest-tiered": -5}


class _Pattern:
    """One ``topic[:range]`` pattern."""

    def __init__(self, text: str) -> None:
        topic, sep, rng = text.partition(":")
        self.topic, self.text = topic.strip(), text
        check_topic_name(self.topic)
        self.low, self.high = 0, None  # [low, high)
        if not sep:
            return
        m = _RANGE.match(rng.strip())
        if not rng.strip() or not m or (m.group(2) is None and m.group(3) is not None):
            fail(f"bad partitions '{text}': expected topic, topic:N, topic:N-M, topic:N- or "
                 "topic:-M", 2)
        a, dash, b = m.groups()
        if dash is None:
            self.low, self.high = int(a), int(a) + 1
        else:
            self.low = int(a) if a is not None else 0
            self.high = int(b) if b is not None else None

    def wants(self, partition: int) -> bool:
        return self.low <= partition and (self.high is None or partition < self.high)


def _spec(text: str) -> tuple[OffsetSpec, str]:
    """``--time`` as an OffsetSpec (and a word for messages)."""
    word = text.strip().lower()
    code = _WORDS.get(word)
    if code is None and re.fullmatch(r"-\d+", word):
        code = int(word)
    if code == -1:
        return OffsetSpec.latest(), "latest"
    if code in (-2, -4):
        return OffsetSpec.earliest(), "earliest"
    if code == -3:
        return OffsetSpec.max_timestamp(), "max-timestamp"
    if code is not None:
        fail(f"bad --time '{text}': Spool has no tiered storage; use -1 or latest / -2 or "
             "earliest / -3 or max-timestamp / -4 or earliest-local, or a timestamp", 2)
    try:
        ms = parse_time(text)
    except CliError:
        fail(f"bad --time '{text}': use -1 or latest / -2 or earliest / -3 or max-timestamp / "
             "-4 or earliest-local, or a timestamp (epoch ms or ISO-8601)", 2)
    return OffsetSpec.for_timestamp(ms), str(ms)


@cli_command
def offsets(
    patterns: Annotated[
        list[str] | None,
        typer.Argument(metavar="[TOPIC[:PARTITIONS]]...",
                       help="topic, topic:1, topic:0-3, topic:5-, topic:-3 (default: all)."),
    ] = None,
    topic_partitions: Annotated[
        list[str] | None,
        typer.Option("--topic-partitions", help="Kafka's spelling of the patterns (repeatable).")
    ] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", help="One topic (Kafka's option).")
    ] = None,
    partitions: Annotated[
        str | None,
        typer.Option("--partitions", help="With --topic: partition ids, e.g. 0,1 (Kafka's).")
    ] = None,
    time_: Annotated[
        str, typer.Option("--time", help="latest (-1), earliest (-2), max-timestamp (-3), "
                          "earliest-local (-4), or a timestamp (epoch ms or ISO-8601).")
    ] = "latest",
    isolation_level: Annotated[
        IsolationLevel,
        typer.Option("--isolation-level",
                     help="read_committed: 'latest' is the last stable offset."),
    ] = IsolationLevel.read_uncommitted,
    exclude_internal_topics: Annotated[
        bool, typer.Option("--exclude-internal-topics", help="Leave out internal topics.")
    ] = False,
    json_: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
    timeout: AdminTimeout = 30.0,
) -> None:
    """Print each partition's offset at a time (kafka-get-offsets)."""
    items = [*(patterns or []), *(topic_partitions or [])]
    if partitions is not None and topic is None:
        fail("--partitions needs --topic", 2)
    if topic is not None:
        ids = [p.strip() for p in (partitions or "").split(",") if p.strip()]
        if not all(p.isdigit() for p in ids):
            fail(f"bad --partitions '{partitions}': expected partition ids, e.g. 0,1", 2)
        items += [f"{topic}:{p}" for p in ids] or [topic]
    pats = [_Pattern(p) for item in items for p in item.split(",") if p.strip()]
    spec, word = _spec(time_)
    admin = admin_client(bootstrap, timeout)
    md = admin.list_topics(timeout=timeout)
    chosen = _choose(md, pats, exclude_internal_topics)
    level = (_Isolation.READ_COMMITTED if isolation_level is IsolationLevel.read_committed
             else _Isolation.READ_UNCOMMITTED)
    try:
        futures = admin.list_offsets({tp: spec for tp in chosen}, isolation_level=level,
                                     request_timeout=timeout)
    except KafkaException as e:
        raise CliError(str(e)) from None
    rows: list[dict[str, Any]] = []
    for tp in chosen:
        info = result(futures[tp], f"{tp.topic}:{tp.partition}", timeout)
        rows.append({"topic": tp.topic, "partition": tp.partition, "offset": info.offset,
                     "timestamp": info.timestamp})
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    if json_:
        print_json(rows)
        return
    missing = 0
    for r in rows:
        if r["offset"] < 0:
            missing += 1
            continue
        print(f"{r['topic']}:{r['partition']}:{r['offset']}")
    if missing:
        what = f"no record at or after {word}" if word.isdigit() else f"no {word} offset"
        typer.echo(f"spool: {missing} partition{'' if missing == 1 else 's'} with {what} "
                   "not listed", err=True)


def _choose(md: Any, pats: list[_Pattern], exclude_internal: bool) -> list[TopicPartition]:
    """The partitions the patterns name (all topics' without patterns)."""
    def internal(name: str) -> bool:
        return name.startswith("__")

    if not pats:
        return [TopicPartition(name, p) for name, t in sorted(md.topics.items())
                if not (exclude_internal and internal(name)) for p in sorted(t.partitions)]
    chosen: dict[tuple[str, int], TopicPartition] = {}
    for pat in pats:
        t = md.topics.get(pat.topic)
        if t is None or (t.error is not None and not t.partitions):
            raise no_such_topic(pat.topic)
        found = [p for p in sorted(t.partitions) if pat.wants(p)]
        if not found:
            fail(f"'{pat.text}' matches no partition of '{pat.topic}' (it has "
                 f"{len(t.partitions)}) (UNKNOWN_TOPIC_OR_PARTITION)")
        for p in found:
            chosen[(pat.topic, p)] = TopicPartition(pat.topic, p)
    return list(chosen.values())
