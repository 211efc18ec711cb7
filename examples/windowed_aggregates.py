"""Streaming: per-customer windowed order totals from ``orders`` into ``order-totals``.

    python -m examples.windowed_aggregates [--bootstrap-server 127.0.0.1:9092]
        [--source orders] [--sink order-totals] [--checkpoint ./checkpoints/order-totals]
        [--window "1 minute"] [--watermark "1 minute"] [--trigger available-now|SECONDS]
        [--delivery-guarantee auto|exactly-once|at-least-once] [--max-offsets-per-trigger N]

Input records: key = customer id, value = JSON ``{"amount": 12.5, ...}``,
event time = the record's timestamp. Each output record (key = customer)
holds ``{"customer", "window_start", "window_end", "orders", "amount"}``
for one finished window: windows are emitted once the watermark (latest
event time seen minus ``--watermark``) passes their end (append mode), so
each (customer, window) is written once; with ``exactly-once`` a crash and
restart from the checkpoint do not repeat or lose one.
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
)


def order_totals(spark, bootstrap: str, source: str, window: str = "1 minute",
                 watermark: str = "1 minute", max_offsets: int | None = None):
    """The streaming DataFrame of (key, value) output records."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    orders = (
        reader.load()
        .select(
            F.col("key").cast("string").alias("customer"),
            F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double").alias("amount"),
            F.col("timestamp"),
        )
    )
    totals = (
        orders.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window), "customer")
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount"))
    )
    return totals.select(
        F.col("customer").alias("key"),
        F.to_json(
            F.struct(
                "customer",
                F.date_format(F.col("window.start"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                F.date_format(F.col("window.end"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                "orders",
                "amount",
            )
        ).alias("value"),
    )


def start(spark, bootstrap: str, source: str, sink: str, checkpoint: str, guarantee: str,
          trigger: str = "available-now", window: str = "1 minute", watermark: str = "1 minute",
          max_offsets: int | None = None):
    return start_to_spool(
        order_totals(spark, bootstrap, source, window, watermark, max_offsets),
        bootstrap, sink, guarantee, checkpoint, trigger,
    )


PROG = "python -m examples.windowed_aggregates"


def main() -> None:
    p = parser("windowed_aggregates", __doc__.splitlines()[0])
    p.add_argument("--source", default="orders", help="topic of orders to read")
    p.add_argument("--sink", default="order-totals", help="topic the window totals go to")
    p.add_argument("--checkpoint", default="./checkpoints/order-totals", type=local_path, metavar="DIR",
                   help="the query's checkpoint: a re-run continues where this one stopped")
    p.add_argument("--window", default="1 minute", help="event-time window length")
    p.add_argument("--watermark", default="1 minute",
                   help="how late an order may arrive; a window is written once the "
                   "watermark passes its end")
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
    spark = session("order-totals", a.scratch, master=a.master, remote=a.remote)
    stop_requested = on_ctrl_c(PROG, graceful=True)  # from now on: stop between micro-batches
    q = start(spark, a.bootstrap, a.source, a.sink, a.checkpoint,
              delivery_guarantee(a.bootstrap, a.delivery_guarantee), a.trigger, a.window,
              a.watermark, a.max_offsets_per_trigger)
    if not follow(q, stop_requested):
        print(f"{PROG}: stopped; {a.checkpoint} holds the position", flush=True)
        interrupted(PROG)
    if q.exception():
        raise SystemExit(f"{PROG}: query failed: {q.exception()}")
    print(f"done: windows written to {a.sink}")


if __name__ == "__main__":
    run(PROG, main)
