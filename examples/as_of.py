"""Batch: a topic as of a point in time — the latest value of every key then.

    python -m examples.as_of --topic orders --at 2026-11-25T12:00:00Z
        [--bootstrap 127.0.0.1:9092] [--show 20]

``endingTimestamp`` stops each partition at its first record whose
timestamp is >= ``--at``; of what came before, the last record per key
wins (a tombstone — null value — deletes the key), as a compacted topic
would read at that moment.
"""

from __future__ import annotations

import datetime as dt

from examples.common import parser, session


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


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--topic", default="orders")
    p.add_argument("--at", required=True, help="ISO 8601 time, e.g. 2026-11-25T12:00:00Z")
    p.add_argument("--show", type=int, default=20)
    a = p.parse_args()
    at = dt.datetime.fromisoformat(a.at.replace("Z", "+00:00"))
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    as_of(session("as-of", a.scratch), a.bootstrap, a.topic, int(at.timestamp() * 1000)).orderBy("key").show(
        a.show, truncate=False
    )


if __name__ == "__main__":
    main()
