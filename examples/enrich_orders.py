"""Streaming: orders enriched with their customer from a changelog table, into ``enriched-orders``.

    python -m examples.enrich_orders [--bootstrap-server 127.0.0.1:9092]
        [--orders orders] [--customers customers] [--sink enriched-orders]
        [--checkpoint ./checkpoints/enriched-orders] [--watermark "5 minutes"]
        [--join left|inner] [--trigger available-now|SECONDS]
        [--delivery-guarantee auto|exactly-once|at-least-once] [--max-offsets-per-trigger N]

Kafka Streams' KStream-KTable join (``orders.leftJoin(customers, ...)``) on
Spark. Input records:

* ``customers``, a compacted topic read as a changelog table: key = customer
  id, value = the customer's profile (JSON), or null (a tombstone: the
  customer is deleted); event time = the record's timestamp;
* ``orders``: key = order id, value = JSON ``{"customer": "c1", "amount":
  12.5, ...}``; event time = the record's timestamp.

Semantics (a versioned table, as KIP-914's stream-table joins with a
versioned store): an order at time ``t`` is joined with its customer's
value *as of t*, the value of the customer's record with the greatest
timestamp <= t (equal timestamps: the later offset); none, or a tombstone
there, means no profile. Each order is written exactly once, key = order
id, value = ``{"order_id", "order_time", <the order's fields>, "profile"}``
(``profile`` null when the customer has none; ``--join inner`` leaves those
orders out), once the watermark has reached ``t``: the watermark is the
smaller of the two topics' (latest event time read from the topic minus
``--watermark``), so by then every customer record up to ``t`` has been
read unless it came later than ``--watermark``. The state holds orders
waiting for the watermark and, per customer, the value at the watermark
plus the newer ones; older versions are dropped. A record whose time is at
or before the watermark when it is read is late: Spark drops it before the
processor sees it (either topic), so set ``--watermark`` above the
disorder of each topic. A quiet customers topic holds the watermark back, and with it every order:
its producers should write now and then (any key) for results to flow.

Deterministic on replay: Spark records each micro-batch's offsets of BOTH
topics and its watermark in the checkpoint before running it, and the
table is a stream read from those offsets with its state in the checkpoint
(RocksDB, ``RocksDBStateStoreProvider``), so a micro-batch re-run after a
crash reads the same customer records on top of the same state and writes
the same records, which the exactly-once sink needs (it skips the tasks an
earlier attempt committed and redoes the others). A stream-static join
(``spark.read`` of the topic joined to the stream) would not be: each
micro-batch, and each re-run of one, re-reads the topic up to its end at
that moment. Without late data the output does not depend on how the input
was cut into micro-batches either: a run killed and restarted writes what
one uninterrupted run writes. Compaction can remove an old version before
it is read (then orders of that period see the next surviving value);
``min.compaction.lag.ms`` on the customers topic bounds that.
"""

from __future__ import annotations

import datetime as dt
import json

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
from examples.orders_payments import read_topic, stateful_settings

try:  # the processor's base class; pyspark is there whenever the pipeline runs
    from pyspark.sql.streaming import StatefulProcessor
except ImportError:  # pragma: no cover - documentation tools without pyspark
    StatefulProcessor = object  # type: ignore[assignment,misc]

VERSIONS = "ts LONG, partition INT, offset LONG, profile STRING"
PENDING = "ts LONG, partition INT, offset LONG, order_id STRING, value STRING"
OUTPUT = "key STRING, value STRING"


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def as_of(versions: list[tuple], ts: int) -> str | None:
    """The profile of the newest version (sorted oldest first) at or before ``ts``."""
    found = None
    for v in versions:
        if v[0] > ts:
            break
        found = v[3]
    return found


def enriched(order: tuple, profile: str | None) -> dict:
    ts, _partition, _offset, order_id, value = order
    fields = json.loads(value) if value else {}
    return {"order_id": order_id, "order_time": iso(ts),
            **(fields if isinstance(fields, dict) else {"order": fields}),
            "profile": None if profile is None else json.loads(profile)}


class Enricher(StatefulProcessor):
    """Per customer: the versions of its table value still needed, and the orders waiting for
    the watermark. Input rows: ``kind`` ("order" | "customer"), ``ts_ms``, ``partition``,
    ``offset``, ``order_id``, ``value``."""

    def __init__(self, inner: bool = False) -> None:
        self.inner = inner

    def init(self, handle) -> None:
        self.handle = handle
        self.versions = handle.getListState("versions", VERSIONS)
        self.pending = handle.getListState("pending", PENDING)

    def _load(self) -> tuple[list[tuple], list[tuple]]:
        versions = list(self.versions.get()) if self.versions.exists() else []
        pending = list(self.pending.get()) if self.pending.exists() else []
        return versions, pending

    def handleInputRows(self, key, rows, timerValues):
        watermark = timerValues.getCurrentWatermarkInMs()
        versions, pending = self._load()
        for pdf in rows:
            for r in pdf.itertuples(index=False):
                ts, partition, offset = int(r.ts_ms), int(r.partition), int(r.offset)
                value = None if r.value is None or r.value != r.value else str(r.value)  # NaN
                if r.kind == "customer":
                    versions.append((ts, partition, offset, value))
                else:
                    pending.append((ts, partition, offset, str(r.order_id), value))
                if ts > watermark:
                    self.handle.registerTimer(ts)  # fires once the watermark is past ts
        yield from self._flush(watermark, versions, pending)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield from self._flush(timerValues.getCurrentWatermarkInMs(), *self._load())

    def _flush(self, watermark: int, versions: list[tuple], pending: list[tuple]):
        """Write the orders at or before the watermark (a customer record up to then that
        is not here yet will be dropped as late), keep the others; keep only the versions a
        waiting or later order can still need."""
        import pandas as pd

        versions.sort(key=lambda v: v[:3])  # (ts, partition, offset): oldest first
        out, waiting = [], []
        for order in sorted(pending, key=lambda o: o[:3]):
            if order[0] > watermark:
                waiting.append(order)
                continue
            profile = as_of(versions, order[0])
            if profile is None and self.inner:
                continue
            out.append((order[3], json.dumps(enriched(order, profile))))
        before = [v for v in versions if v[0] <= watermark]
        held = [before[-1]] if before and before[-1][3] is not None else []
        held += [v for v in versions if v[0] > watermark]
        for state, values in ((self.versions, held), (self.pending, waiting)):
            if values:
                state.put(values)
            else:
                state.clear()
        if out:
            yield pd.DataFrame(out, columns=["key", "value"])

    def close(self) -> None:
        pass


def enriched_orders(spark, bootstrap: str, orders_topic: str, customers_topic: str,
                    watermark: str = "5 minutes", join: str = "left",
                    max_offsets: int | None = None):
    """The streaming DataFrame of (key, value) output records."""
    import sys

    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    # The processor goes to the Python workers by value: they need not import ``examples``.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    def rows(topic: str, kind: str, customer):
        return (
            read_topic(spark, bootstrap, topic, max_offsets)
            .select(
                customer.alias("customer"),
                F.lit(kind).alias("kind"),
                F.col("timestamp").alias("ts"),
                F.unix_millis("timestamp").alias("ts_ms"),
                "partition",
                "offset",
                (F.col("key").cast("string") if kind == "order" else F.lit(None).cast("string"))
                .alias("order_id"),
                F.col("value").cast("string").alias("value"),
            )
            .withWatermark("ts", watermark)
        )

    orders = rows(orders_topic, "order",
                  F.get_json_object(F.col("value").cast("string"), "$.customer"))
    customers = rows(customers_topic, "customer", F.col("key").cast("string"))
    return (
        orders.unionByName(customers)
        .groupBy("customer")
        .transformWithStateInPandas(Enricher(inner=join == "inner"), OUTPUT, "append",
                                    "EventTime")
    )


def start(spark, bootstrap: str, orders_topic: str, customers_topic: str, sink: str,
          checkpoint: str, guarantee: str, trigger: str = "available-now",
          watermark: str = "5 minutes", join: str = "left", max_offsets: int | None = None):
    stateful_settings(spark)
    return start_to_spool(
        enriched_orders(spark, bootstrap, orders_topic, customers_topic, watermark, join,
                    max_offsets),
        bootstrap, sink, guarantee, checkpoint, trigger,
    )


PROG = "python -m examples.enrich_orders"


def main() -> None:
    p = parser("enrich_orders", __doc__.splitlines()[0])
    p.add_argument("--orders", default="orders", help="topic of orders (key = order id)")
    p.add_argument("--customers", default="customers",
                   help="compacted topic of customer profiles (key = customer id)")
    p.add_argument("--sink", default="enriched-orders", help="topic the enriched orders go to")
    p.add_argument("--checkpoint", default="./checkpoints/enriched-orders", type=local_path, metavar="DIR",
                   help="the query's checkpoint (offsets, watermark, table and waiting "
                   "orders): a re-run continues where this one stopped")
    p.add_argument("--watermark", default="5 minutes",
                   help="how late a record may arrive behind the latest of its topic; an "
                   "order is written once the watermark reaches its time")
    p.add_argument("--join", default="left", choices=("left", "inner"),
                   help="inner: leave out orders whose customer has no profile then")
    p.add_argument("--trigger", default="available-now", metavar="available-now|SECONDS",
                   help="available-now: process what is there, then stop; SECONDS: a "
                   "micro-batch every SECONDS until Ctrl-C")
    p.add_argument("--delivery-guarantee", default="auto",
                   choices=("auto", "exactly-once", "at-least-once"),
                   help="auto: exactly-once when the broker has transactions")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N",
                   help="at most N records of each topic per micro-batch (default: no limit)")
    a = p.parse_args()
    require_topics(PROG, a.bootstrap, a.orders, a.customers)
    spark = session("enriched-orders", a.scratch, master=a.master, remote=a.remote)
    stop_requested = on_ctrl_c(PROG, graceful=True)  # from now on: stop between micro-batches
    q = start(spark, a.bootstrap, a.orders, a.customers, a.sink, a.checkpoint,
              delivery_guarantee(a.bootstrap, a.delivery_guarantee), a.trigger, a.watermark,
              a.join, a.max_offsets_per_trigger)
    if not follow(q, stop_requested):
        print(f"{PROG}: stopped; {a.checkpoint} holds the position", flush=True)
        interrupted(PROG)
    if q.exception():
        raise SystemExit(f"{PROG}: query failed: {q.exception()}")
    print(f"done: enriched orders written to {a.sink}")


if __name__ == "__main__":
    run(PROG, main)
