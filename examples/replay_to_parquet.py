"""Batch: replay the whole history of a topic (rewind to day zero) into a Parquet table.

    python -m examples.replay_to_parquet --topic orders --out ./tables/orders
        [--bootstrap-server 127.0.0.1:9092] [--min-partitions 8]

Reads every record from each partition's log start to its end as of the
start of the job (offsets fixed once, so the table is one consistent cut)
and writes Spark's Kafka columns (key/value as binary, headers included)
partitioned by Kafka partition.
"""

from __future__ import annotations

from pathlib import Path

from examples.common import local_path, parser, require_topics, run, session


def replay(spark, bootstrap: str, topic: str, out: str, min_partitions: int | None = None) -> int:
    reader = (
        spark.read.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
    )
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    df = reader.load()
    df.write.mode("overwrite").partitionBy("partition").parquet(out)
    if not any(Path(out).rglob("*.parquet")):  # an empty topic: nothing for Spark to read
        return 0
    return spark.read.parquet(out).count()


PROG = "python -m examples.replay_to_parquet"


def main() -> None:
    p = parser("replay_to_parquet", __doc__.splitlines()[0])
    p.add_argument("--topic", default="orders", help="the topic to replay")
    p.add_argument("--out", default="./tables/orders", type=local_path, metavar="DIR",
                   help="the Parquet table (replaced if it exists)")
    p.add_argument("--min-partitions", type=int, default=None, metavar="N",
                   help="split the read into at least N Spark tasks (default: one per "
                   "Kafka partition)")
    a = p.parse_args()
    require_topics(PROG, a.bootstrap, a.topic)
    n = replay(session("replay", a.scratch, PROG, a.master, a.remote), a.bootstrap, a.topic, a.out, a.min_partitions)
    print(f"{n} records of {a.topic} written to {a.out}")


if __name__ == "__main__":
    run(PROG, main)
