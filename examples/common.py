"""Shared bits of the example pipelines: options, the topic check, progress lines, Ctrl-C.

Every pipeline takes ``--bootstrap-server``/``-b`` (default: ``SPOOL_BOOTSTRAP``, else
``127.0.0.1:9092``), as the ``spool`` command does, and ``--help`` lists every option with
its default. A topic to read is checked before Spark starts: a missing one ends the run
with ``<prog>: topic 'orders' does not exist at 127.0.0.1:9092`` (exit 1), not with a
schema error from the engine. Ctrl-C ends a run with ``<prog>: interrupted`` and exit 130,
no Python or Java stack trace (``on_ctrl_c``); a streaming query is stopped between
micro-batches first, so its checkpoint holds what it wrote.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from spool.spark.capabilities import supports_transactions

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown after each option's text, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False) or "%(default)" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action)


def parser(module: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The pipeline's options so far: ``--bootstrap-server`` and ``--scratch``."""
    p = argparse.ArgumentParser(prog=f"python -m examples.{module}",
                                description=description.replace("``", ""),
                                epilog=epilog, formatter_class=_Help)
    add_bootstrap(p)
    p.add_argument("--scratch", default=None, metavar="DIR",
                   help="Spark's scratch directory (default: a new temporary directory)")
    add_spark(p)
    return p


def local_path(path: str) -> str:
    """An option's directory made absolute: over Spark Connect (``--remote``) the server
    resolves paths, so a relative checkpoint would land in the server's working directory."""
    return os.path.abspath(path)


def add_spark(p: argparse.ArgumentParser) -> None:
    """Where Spark runs: ``--master`` (local or a standalone ``spark://``) or ``--remote``."""
    p.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2]"),
                   metavar="URL", help="Spark master: local[N] or spark://HOST:PORT of a "
                   "standalone cluster (environment SPARK_MASTER)")
    p.add_argument("--remote", default=os.environ.get("SPARK_REMOTE"), metavar="sc://HOST:PORT",
                   help="run through a Spark Connect server (environment SPARK_REMOTE; "
                   "--master is then the server's) (default: none: the driver runs in this "
                   "process)")


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "-b", dest="bootstrap", metavar="HOST:PORT",
                   default=os.environ.get("SPOOL_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help="a broker to start from (comma-separated list allowed; environment "
                   "SPOOL_BOOTSTRAP)")
    p.add_argument("--bootstrap", dest="bootstrap", help=argparse.SUPPRESS)  # older spelling


def require_topics(prog: str, bootstrap: str, *topics: str) -> None:
    """Exit 1 with one line unless the broker answers and has every topic in ``topics``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0,
                         "socket.connection.setup.timeout.ms": 5000})
    try:
        names = admin.list_topics(timeout=10).topics
    except KafkaException as e:
        raise SystemExit(f"{prog}: no broker answers at {bootstrap} "
                         f"({e.args[0].str()})") from None
    for topic in topics:
        if topic not in names:
            raise SystemExit(f"{prog}: topic {topic!r} does not exist at {bootstrap} "
                             "(python -m examples.seed_orders --topic NAME creates one)")


def session(app: str, scratch: str | None = None, prog: str | None = None,
            master: str | None = None, remote: str | None = None):
    """The SparkSession (``master``: local[2] unless given; ``remote``: a Spark Connect
    server); with ``prog``, Ctrl-C then ends the run at once."""
    if remote:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(remote).appName(app).getOrCreate()
        if prog is not None:
            on_ctrl_c(prog)
        return spark
    from spool.spark.session import local_session

    spark = local_session(app, local_dir=scratch, master=master)
    if prog is not None:
        on_ctrl_c(prog)
    return spark


def run(prog: str, main: Callable[[], None]) -> None:
    """``main()``, with a Ctrl-C before Spark started ending the process quietly (130)."""
    try:
        main()
    except KeyboardInterrupt:
        interrupted(prog)


def interrupted(prog: str) -> NoReturn:
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    os._exit(130)  # not sys.exit: Spark's shutdown hooks would log the cancelled jobs


def on_ctrl_c(prog: str, graceful: bool = False) -> Callable[[], bool]:
    """Take SIGINT over from PySpark (call it once the session exists: PySpark's own handler
    calls into the JVM from inside the signal and prints py4j tracebacks). Without
    ``graceful`` a Ctrl-C ends the process at once (exit 130; the JVM follows its driver);
    with it the first one only raises the flag returned (the caller stops its query
    between micro-batches) and a second one ends the process."""
    hit = threading.Event()

    def handler(_sig, _frame) -> None:
        if graceful and not hit.is_set():
            hit.set()
            return
        interrupted(prog)

    signal.signal(signal.SIGINT, handler)
    return hit.is_set


def progress_line(p) -> str:
    """One line for a finished micro-batch (a StreamingQueryProgress)."""
    sources = p.get("sources") or []
    read = sum(int(s.get("numInputRows") or 0) for s in sources)
    rate = float(p.get("processedRowsPerSecond") or 0.0)
    written = (p.get("sink") or {}).get("numOutputRows", -1)
    ms = (p.get("durationMs") or {}).get("triggerExecution", 0)
    ends = "; ".join(str(s.get("endOffset")) for s in sources)
    out = f"batch {p['batchId']}: {read} records read ({rate:.0f}/s)"
    if written is not None and int(written) >= 0:
        out += f", {written} written"
    return out + f" in {ms} ms; offsets now {ends}"


def delivery_guarantee(bootstrap: str, wanted: str) -> str:
    """``auto``: exactly-once when the broker has transactions, else at-least-once (said aloud)."""
    if wanted != "auto":
        return wanted
    if supports_transactions(bootstrap):
        return "exactly-once"
    print("note: the broker has no transactions yet; writing at-least-once")
    return "at-least-once"


ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def use_rocksdb(spark) -> None:
    """The RocksDB state store for the queries started from now on (a checkpoint keeps the
    provider it was started with)."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")


def start_to_spool(df, bootstrap: str, sink: str, guarantee: str, checkpoint: str,
                   trigger: str):
    """Start ``df`` as a streaming query appending to the Spool topic ``sink``
    (``deliveryGuarantee`` ``guarantee``); ``trigger`` is ``available-now`` or SECONDS."""
    writer = (
        df.writeStream.format("spool")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", checkpoint)
    )
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{float(trigger)} seconds")
    return writer.start()


def follow(q, stop_requested=lambda: False, interval_s: float = 0.5) -> bool:
    """Wait for the query to end, printing one line per finished micro-batch; stops it
    when ``stop_requested()`` (Ctrl-C) and returns False then."""
    seen = -1
    while True:
        done = q.awaitTermination(interval_s)
        for p in q.recentProgress:
            if p["batchId"] > seen:
                seen = p["batchId"]
                print(progress_line(p), flush=True)
        if done:
            return True
        if stop_requested():
            q.stop()
            return False
