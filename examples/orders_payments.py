"""Streaming: orders joined with their payments within 10 minutes, into ``paid-orders``.

    python -m examples.orders_payments [--bootstrap-server 127.0.0.1:9092]
        [--orders orders] [--payments payments] [--sink paid-orders]
        [--checkpoint ./checkpoints/paid-orders] [--within "10 minutes"]
        [--watermark "5 minutes"] [--join inner|left-outer]
        [--trigger available-now|SECONDS] [--delivery-guarantee auto|exactly-once|at-least-once]
        [--max-offsets-per-trigger N]

A stream-stream join, as Kafka Streams' ``KStream#join`` with a
``JoinWindows`` of ``--within`` after the order. Input records:

* ``orders``: key = order id, value = JSON ``{"customer": "c1", "amount": 12.5}``;
* ``payments``: key = the order id paid, value = JSON ``{"payment_id": "p1",
  "amount": 12.5}``;

event time = each record's timestamp. An order and a payment of the same
order id join when the payment's time is between the order's time and
``--within`` after it (both ends included). Each output record (key = order
id) is ``{"order_id", "customer", "amount", "order_time", "payment_id",
"paid", "paid_time"}`` (times ISO 8601 in UTC with milliseconds): one per
joined (order, payment) pair, written as soon as both are read. With
``--join left-outer`` (``KStream#leftJoin``) an order that no payment
joined is also written once, with null payment fields, when the watermark
passes its time plus ``--within``.

Watermarks on both streams (``--watermark``: how late a record may arrive,
behind the latest event time read from its own topic); the join's state
keeps an order until the watermark (the smaller of the two) passes its time
plus ``--within``, and a payment until it passes the payment's time. A
record later than that is dropped by the join (Spark's rule), so set
``--watermark`` above the disorder of each topic. State lives in RocksDB
(``RocksDBStateStoreProvider``) under ``--checkpoint``; a run started again
with the same checkpoint continues where the last one stopped, and with
``exactly-once`` (Kafka transactions, read the output with
``isolation.level=read_committed``) a crash and restart neither repeat nor
lose an output record: a re-run micro-batch reads the same offsets with the
same state and watermark, so it produces the same rows.
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

ISO_MS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def stateful_settings(spark) -> None:
    """RocksDB state with changelog checkpointing; times written in UTC. A restarted query
    keeps the provider its checkpoint was started with (Spark records it there)."""
    use_rocksdb(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")


def read_topic(spark, bootstrap: str, topic: str, max_offsets: int | None):
    reader = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def paid_orders(spark, bootstrap: str, orders_topic: str, payments_topic: str,
                within: str = "10 minutes", watermark: str = "5 minutes", join: str = "inner",
                max_offsets: int | None = None):
    """The streaming DataFrame of (key, value) output records."""
    from pyspark.sql import functions as F

    def field(name: str, kind: str = "string"):
        return F.get_json_object(F.col("value").cast("string"), f"$.{name}").cast(kind)

    orders = (
        read_topic(spark, bootstrap, orders_topic, max_offsets)
        .select(
            F.col("key").cast("string").alias("order_id"),
            field("customer").alias("customer"),
            field("amount", "double").alias("amount"),
            F.col("timestamp").alias("order_time"),
        )
        .withWatermark("order_time", watermark)
    )
    payments = (
        read_topic(spark, bootstrap, payments_topic, max_offsets)
        .select(
            F.col("key").cast("string").alias("paid_order_id"),
            field("payment_id").alias("payment_id"),
            field("amount", "double").alias("paid"),
            F.col("timestamp").alias("paid_time"),
        )
        .withWatermark("paid_time", watermark)
    )
    joined = orders.join(
        payments,
        F.expr(f"""paid_order_id = order_id AND paid_time >= order_time
                   AND paid_time <= order_time + interval {within}"""),
        {"inner": "inner", "left-outer": "leftOuter"}[join],
    )
    return joined.select(
        F.col("order_id").alias("key"),
        F.to_json(
            F.struct(
                "order_id",
                "customer",
                "amount",
                F.date_format("order_time", ISO_MS).alias("order_time"),
                "payment_id",
                "paid",
                F.date_format("paid_time", ISO_MS).alias("paid_time"),
            ),
            {"ignoreNullFields": "false"},
        ).alias("value"),
    )


def start(spark, bootstrap: str, orders_topic: str, payments_topic: str, sink: str,
          checkpoint: str, guarantee: str, trigger: str = "available-now",
          within: str = "10 minutes", watermark: str = "5 minutes", join: str = "inner",
          max_offsets: int | None = None):
    stateful_settings(spark)
    return start_to_spool(
        paid_orders(spark, bootstrap, orders_topic, payments_topic, within, watermark, join,
                max_offsets),
        bootstrap, sink, guarantee, checkpoint, trigger,
    )


PROG = "python -m examples.orders_payments"


def main() -> None:
    p = parser("orders_payments", __doc__.splitlines()[0])
    p.add_argument("--orders", default="orders", help="topic of orders (key = order id)")
    p.add_argument("--payments", default="payments",
                   help="topic of payments (key = the order id paid)")
    p.add_argument("--sink", default="paid-orders", help="topic the joined records go to")
    p.add_argument("--checkpoint", default="./checkpoints/paid-orders", type=local_path, metavar="DIR",
                   help="the query's checkpoint (offsets, watermark, join state): a re-run "
                   "continues where this one stopped")
    p.add_argument("--within", default="10 minutes",
                   help="a payment joins an order when paid at most this long after it")
    p.add_argument("--watermark", default="5 minutes",
                   help="how late a record may arrive behind the latest of its topic")
    p.add_argument("--join", default="inner", choices=("inner", "left-outer"),
                   help="left-outer: also write each order no payment joined, once the "
                   "watermark passes its time plus --within")
    p.add_argument("--trigger", default="available-now", metavar="available-now|SECONDS",
                   help="available-now: process what is there, then stop; SECONDS: a "
                   "micro-batch every SECONDS until Ctrl-C")
    p.add_argument("--delivery-guarantee", default="auto",
                   choices=("auto", "exactly-once", "at-least-once"),
                   help="auto: exactly-once when the broker has transactions")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                   help="at most N records of each topic per micro-batch (default: no limit)")
    a = p.parse_args()
    require_topics(PROG, a.bootstrap, a.orders, a.payments)
    spark = session("paid-orders", a.scratch, master=a.master, remote=a.remote)
    stop_requested = on_ctrl_c(PROG, graceful=True)  # from now on: stop between micro-batches
    q = start(spark, a.bootstrap, a.orders, a.payments, a.sink, a.checkpoint,
              delivery_guarantee(a.bootstrap, a.delivery_guarantee), a.trigger, a.within,
              a.watermark, a.join, a.max_offsets_per_trigger)
    if not follow(q, stop_requested):
        print(f"{PROG}: stopped; {a.checkpoint} holds the position", flush=True)
        interrupted(PROG)
    if q.exception():
        raise SystemExit(f"{PROG}: query failed: {q.exception()}")
    print(f"done: joined orders written to {a.sink}")


if __name__ == "__main__":
    run(PROG, main)
