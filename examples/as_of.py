"""Batch: a topic as of a point in time — the latest value of every key then.

    python -m examples.as_of --topic orders --at "30m ago"
    python -m examples.as_of --topic orders --at 2026-11-25T12:00:00Z
        [--bootstrap-server 127.0.0.1:9092] [--show 20]

``endingTimestamp`` stops each partition at its first record whose
timestamp is >= ``--at``; of what came before, the last record per key
wins (a tombstone — null value — deletes the key), as a compacted topic
would read at that moment.
"""

from __future__ import annotations

import datetime as dt
import re
import time

from examples.common import parser, require_topics, run, session


def as_of(spark, bootstrap: str, topic: str, at_ms: int):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    history = (
        spark.read.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingTimestamp", str(at_ms))
        .load()
    )
    last = Window.partitionBy("key").orderBy(F.col("timestamp").desc(), F.col("offset").desc())
    return (
        history.where(F.col("key").isNotNull())
        .withColumn("rank", F.row_number().over(last))
        .where("rank = 1 AND value IS NOT NULL")
        .select(F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"), "timestamp")
    )


PROG = "python -m examples.as_of"
_AGO = re.compile(r"-(\d+(?:\.\d+)?)([smhd])|(\d+(?:\.\d+)?)\s*([smhd])\s+ago")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_at(text: str, now_ms: int) -> int:
    """``--at``: ISO 8601 (UTC unless it says otherwise), or a time ago: "30m ago", "2h ago",
    "1d ago", "90s ago" (or -30m, written ``--at=-30m``); milliseconds since the epoch."""
    m = _AGO.fullmatch(text.strip())
    if m:
        amount, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return now_ms - int(float(amount) * _UNIT_MS[unit])
    try:
        at = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--at {text!r}: expected ISO 8601 (2026-11-25T12:00:00Z) or a time "
                         "ago (30m ago, 2h ago, 1d ago)") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return int(at.timestamp() * 1000)


def main() -> None:
    p = parser("as_of", __doc__.splitlines()[0])
    p.add_argument("--topic", default="orders", help="the topic to read")
    p.add_argument("--at", required=True, metavar="TIME",
                   help="the moment: ISO 8601 (2026-11-25T12:00:00Z; UTC if no offset) or a "
                   "time ago ('30m ago', '2h ago', '1d ago')")
    p.add_argument("--show", type=int, default=20, metavar="N", help="rows to print")
    a = p.parse_args()
    try:
        at_ms = parse_at(a.at, int(time.time() * 1000))
    except ValueError as e:
        p.error(str(e))
    require_topics(PROG, a.bootstrap, a.topic)
    at = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = as_of(session("as-of", a.scratch, PROG, a.master, a.remote), a.bootstrap, a.topic, at_ms).orderBy("key")
    print(f"{a.topic} as of {at}:")
    rows.show(a.show, truncate=False)


if __name__ == "__main__":
    run(PROG, main)
