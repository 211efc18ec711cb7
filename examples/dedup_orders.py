"""Streaming: drop repeated orders (same ``order_id``) from ``orders`` into ``orders-deduped``.

    python -m examples.dedup_orders [--bootstrap-server 127.0.0.1:9092]
        [--source orders] [--sink orders-deduped] [--checkpoint ./checkpoints/orders-deduped]
        [--within "10 minutes"] [--trigger available-now|SECONDS]
        [--delivery-guarantee auto|exactly-once|at-least-once] [--max-offsets-per-trigger N]

Input records: value = JSON ``{"order_id": 17, ...}`` (as ``examples.seed_orders``
writes them), event time = the record's timestamp. An upstream producer that
retries, or a job that replays, sends the same order twice: this pipeline
writes the first copy of each ``order_id`` to the sink, key and value
unchanged, and drops every copy that follows within ``--within`` of event
time (``dropDuplicatesWithinWatermark``: Spark keeps an order id in its state
until the watermark, the latest event time seen minus ``--within``, passes
the first copy's time plus ``--within``). Records whose event time is
already behind the watermark when they arrive are dropped as late, and
records without an ``order_id`` are dropped too.

The state lives in the RocksDB state store, checkpointed with the query:
after a crash, a restart from ``--checkpoint`` remembers the order ids seen
before it. With ``exactly-once`` (the default where the broker has
transactions) each first copy is in the sink exactly once for a reader
with ``isolation.level=read_committed``, whatever the crashes.
"""

from __future__ import annotations

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


def first_orders(spark, bootstrap: str, source: str, within: str = "10 minutes",
                 max_offsets: int | None = None):
    """The streaming DataFrame of (key, value) records: the first copy of each order."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    orders = reader.load().select(
        "key", "value", "timestamp",
        F.get_json_object(F.col("value").cast("string"), "$.order_id").alias("order_id"),
    )
    return (
        orders.where(F.col("order_id").isNotNull())
        .withWatermark("timestamp", within)
        .dropDuplicatesWithinWatermark(["order_id"])
        .select("key", "value")
    )


def start(spark, bootstrap: str, source: str, sink: str, checkpoint: str, guarantee: str,
          trigger: str = "available-now", within: str = "10 minutes",
          max_offsets: int | None = None):
    use_rocksdb(spark)
    return start_to_spool(
        first_orders(spark, bootstrap, source, within, max_offsets),
        bootstrap, sink, guarantee, checkpoint, trigger,
    )


PROG = "python -m examples.dedup_orders"


def main() -> None:

    p = parser("dedup_orders", __doc__.splitlines()[0])
    p.add_argument("--source", default="orders", help="topic of orders to read")
    p.add_argument("--sink", default="orders-deduped", help="topic the first copies go to")
    p.add_argument("--checkpoint", default="./checkpoints/orders-deduped", type=local_path, metavar="DIR",
                   help="the query's checkpoint: a re-run continues where this one stopped")
    p.add_argument("--within", default="10 minutes",
                   help="how much later (event time) a repeated order may come and still be "
                   "dropped; also how late an order may arrive")
    p.add_argument("--trigger", default="available-now", metavar="available-now|SECONDS",
                   help="available-now: process what is there, then stop; SECONDS: a "
                   "micro-batch every SECONDS until Ctrl-C")
    p.add_argument("--delivery-guarantee", default="auto",
                   choices=("auto", "exactly-once", "at-least-once"),
                   help="auto: exactly-once when the broker has transactions")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                   help="at most N records per micro-batch (default: no limit)")
    a = p.parse_args()
    require_topics(PROG, a.bootstrap, a.source)
    spark = session("orders-dedup", a.scratch, master=a.master, remote=a.remote)
    stop_requested = on_ctrl_c(PROG, graceful=True)  # from now on: stop between micro-batches
    q = start(spark, a.bootstrap, a.source, a.sink, a.checkpoint,
              delivery_guarantee(a.bootstrap, a.delivery_guarantee), a.trigger, a.within,
              a.max_offsets_per_trigger)
    if not follow(q, stop_requested):
        print(f"{PROG}: stopped; {a.checkpoint} holds the position", flush=True)
        interrupted(PROG)
    if q.exception():
        raise SystemExit(f"{PROG}: query failed: {q.exception()}")
    print(f"done: first copies written to {a.sink}")


if __name__ == "__main__":
    run(PROG, main)
