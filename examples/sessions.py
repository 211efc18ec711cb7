"""Streaming: per-user sessions from ``clicks`` into ``sessions``, one record per closed session.

    python -m examples.sessions [--bootstrap-server 127.0.0.1:9092]
        [--source clicks] [--sink sessions] [--checkpoint ./checkpoints/sessions]
        [--gap "1 minute"] [--watermark "2 minutes"] [--trigger available-now|SECONDS]
        [--delivery-guarantee auto|exactly-once|at-least-once] [--max-offsets-per-trigger N]

Input records: key = user id, event time = the record's timestamp (the value
is not read). A user's session is a run of their events in which each
follows the one before by at most ``--gap`` of event time; it is closed by
``--gap`` of inactivity. Each closed session is one output record (key =
user) holding ``{"user", "start", "end", "events"}`` (start and end: the
first and last event's times, ISO 8601 UTC with milliseconds).

This is ``transformWithStateInPandas`` with **event-time** timers: each open
session has a timer at its last event + ``--gap``, which fires once the
watermark (the latest event time seen minus ``--watermark``) reaches it.
Event time, not processing time, because then the sessions are a function
of the input alone: the same records give the same sessions whether they
are read in one micro-batch or ten, and whether the job ran through or was
killed and restarted from its checkpoint. A processing-time timer would close
a session after ``--gap`` of wall-clock quiet, so a slow micro-batch or a
restart (a Spark driver takes 10-20 s to come back) would split sessions
differently on every run. The price of event time: a session closes only
once later events (of any user) move the watermark past it, and an event
that arrives behind the watermark (later than ``--watermark``) is dropped
as late. The last sessions stay open until newer events come.

The open sessions live in the RocksDB state store (which
``transformWithState`` requires), checkpointed with the query. With
``exactly-once`` (the default where the broker has transactions) each
closed session is in the sink exactly once for a reader with
``isolation.level=read_committed``, whatever the crashes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

from examples.common import (
    delivery_guarantee,
    follow,
    interrupted,
    local_path,
    on_ctrl_c,
    parser,
    require_topics,
    run,
    session,
    start_to_spool,
    use_rocksdb,
)

try:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
except ImportError:  # pyspark missing: --help still works; a run fails when Spark starts
    StatefulProcessor = object  # type: ignore[assignment,misc]

OUTPUT = "user string, start long, end long, events long"  # start, end: epoch milliseconds
STATE = "start long, end long, events long"


def merge(sessions: list[tuple[int, int, int]], times: list[int],
          gap_ms: int) -> list[tuple[int, int, int]]:
    """Open sessions ``(start, end, events)`` with event times added: sessions whose events
    are at most ``gap_ms`` apart become one; sorted by start."""
    spans = sorted([*sessions, *((t, t, 1) for t in times)])
    out: list[tuple[int, int, int]] = []
    for start, end, events in spans:
        if out and start <= out[-1][1] + gap_ms:
            s, e, n = out[-1]
            out[-1] = (s, max(e, end), n + events)
        else:
            out.append((start, end, events))
    return out


class Sessionizer(StatefulProcessor):
    """Per user (the grouping key): the open sessions in a list state, one event-time timer
    per open session at its end + gap; an expired timer emits and forgets its session."""

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = gap_ms

    def init(self, handle) -> None:
        self.handle = handle
        self.open = handle.getListState("open", STATE)

    def handleInputRows(self, key, rows, timerValues) -> Iterator:
        watermark = timerValues.getCurrentWatermarkInMs()
        times = [int(t) for pdf in rows for t in pdf["ts"] if t > watermark]  # late: dropped
        before = list(self.open.get()) if self.open.exists() else []
        after = merge(before, times, self.gap_ms)
        ends_before = {end for _, end, _ in before}
        ends_after = {end for _, end, _ in after}
        for end in ends_before - ends_after:
            self.handle.deleteTimer(end + self.gap_ms)
        for end in ends_after - ends_before:
            self.handle.registerTimer(end + self.gap_ms)
        self.open.put(after)
        return iter(())  # nothing closes on input: only a timer closes a session

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
        import pandas as pd

        expiry = expiredTimerInfo.getExpiryTimeInMs()
        sessions = list(self.open.get()) if self.open.exists() else []
        closed = [s for s in sessions if s[1] + self.gap_ms == expiry]
        still = [s for s in sessions if s[1] + self.gap_ms != expiry]
        if still:
            self.open.put(still)
        else:
            self.open.clear()
        yield pd.DataFrame({"user": [key[0]] * len(closed), "start": [s[0] for s in closed],
                            "end": [s[1] for s in closed], "events": [s[2] for s in closed]})

    def close(self) -> None:
        pass


_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000,
             "day": 86_400_000}


def interval_ms(text: str) -> int:
    """``"1 minute"``, ``"90 seconds"``, ``"1.5 hours"`` as milliseconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*", text.lower())
    if m is None or m[2] not in _UNITS_MS:
        raise ValueError(f"not an interval: {text!r} (say e.g. '1 minute' or '30 seconds')")
    return int(float(m[1]) * _UNITS_MS[m[2]])


def sessions(spark, bootstrap: str, source: str, gap: str = "1 minute",
             watermark: str = "2 minutes", max_offsets: int | None = None):
    """The streaming DataFrame of (key, value) records: one per closed session."""
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    # The processor travels by value: workers need not have examples/ on their path.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    reader = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    clicks = reader.load().select(
        F.col("key").cast("string").alias("user"),
        F.unix_millis("timestamp").alias("ts"),
        "timestamp",
    )
    closed = (
        clicks.withWatermark("timestamp", watermark)
        .groupBy("user")
        .transformWithStateInPandas(Sessionizer(interval_ms(gap)), OUTPUT, "Append",
                                    "EventTime")
    )
    iso = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    return closed.select(
        F.col("user").alias("key"),
        F.to_json(F.struct(
            "user",
            F.date_format(F.timestamp_millis("start"), iso).alias("start"),
            F.date_format(F.timestamp_millis("end"), iso).alias("end"),
            "events",
        )).alias("value"),
    )


def start(spark, bootstrap: str, source: str, sink: str, checkpoint: str, guarantee: str,
          trigger: str = "available-now", gap: str = "1 minute", watermark: str = "2 minutes",
          max_offsets: int | None = None):
    use_rocksdb(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # date_format above writes UTC
    return start_to_spool(
        sessions(spark, bootstrap, source, gap, watermark, max_offsets),
        bootstrap, sink, guarantee, checkpoint, trigger,
    )


PROG = "python -m examples.sessions"


def main() -> None:

    p = parser("sessions", __doc__.splitlines()[0])
    p.add_argument("--source", default="clicks", help="topic of user events (key = user)")
    p.add_argument("--sink", default="sessions", help="topic the closed sessions go to")
    p.add_argument("--checkpoint", default="./checkpoints/sessions", type=local_path, metavar="DIR",
                   help="the query's checkpoint: a re-run continues where this one stopped")
    p.add_argument("--gap", default="1 minute",
                   help="inactivity (event time) that closes a user's session")
    p.add_argument("--watermark", default="2 minutes",
                   help="how late an event may arrive; a session is written once the "
                   "watermark passes its end + gap")
    p.add_argument("--trigger", default="available-now", metavar="available-now|SECONDS",
                   help="available-now: process what is there, then stop; SECONDS: a "
                   "micro-batch every SECONDS until Ctrl-C")
    p.add_argument("--delivery-guarantee", default="auto",
                   choices=("auto", "exactly-once", "at-least-once"),
                   help="auto: exactly-once when the broker has transactions")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                   help="at most N records per micro-batch (default: no limit)")
    a = p.parse_args()
    try:
        interval_ms(a.gap)
    except ValueError as e:
        p.error(f"--gap: {e}")
    require_topics(PROG, a.bootstrap, a.source)
    spark = session("sessions", a.scratch, master=a.master, remote=a.remote)
    stop_requested = on_ctrl_c(PROG, graceful=True)  # from now on: stop between micro-batches
    q = start(spark, a.bootstrap, a.source, a.sink, a.checkpoint,
              delivery_guarantee(a.bootstrap, a.delivery_guarantee), a.trigger, a.gap,
              a.watermark, a.max_offsets_per_trigger)
    if not follow(q, stop_requested):
        print(f"{PROG}: stopped; {a.checkpoint} holds the position", flush=True)
        interrupted(PROG)
    if q.exception():
        raise SystemExit(f"{PROG}: query failed: {q.exception()}")
    print(f"done: closed sessions written to {a.sink}")


if __name__ == "__main__":
    run(PROG, main)
