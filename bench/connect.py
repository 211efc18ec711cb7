"""Kafka Connect's throughput: CDC rows/s PostgreSQL -> Spool, and sink rows/s Spool ->
PostgreSQL.

    python -m bench.connect [--rows 50000] [--runs 3] [--no-write]

One Spool broker (``bench.brokers.spool_broker``), one PostgreSQL server
(``tests.helpers.postgres``, wal_level=logical, fsync off as in the tests) with a source and
a sink database, and one ``spool connect`` worker (distributed, a group of its own; JSON
converters with schemas; offsets flushed every second). Each run, on a new table and topic:

* CDC: Debezium's PostgresConnector on the (empty) table, ``snapshot.mode=initial``; once
  its replication slot exists, ``--rows`` rows of the end-to-end tests' 15 column types
  (tests/helpers/pg_changes.py) are inserted with COPY, 1,000 a transaction; the clock
  runs from the first insert until the topic's high watermark holds every row. The
  inserts take a fraction of that time (reported): what is measured is decoding pgoutput,
  building the Debezium envelopes, converting to JSON and producing.
* Sink: the JDBC sink connector (upsert by record key) created on that topic; the clock
  runs from the create request until the sink's table holds every row (its consumer's
  group join included: under a second with the broker's initial rebalance delay at 0).

Reported: rows/s, median of the runs (min-max), and the CPU seconds the worker, the broker
and PostgreSQL (the postmaster and its backends) spent in each phase; in
``docs/bench-connect.json`` and the section between ``<!-- connect:begin -->`` and
``<!-- connect:end -->`` of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

from bench.brokers import CLK_TCK, spool_broker
from bench.compare import stats
from bench.reliability.common import commit
from bench.report import write_section
from tests.helpers.connect_proc import ConnectProcess, distributed_props, wait_until
from tests.helpers.pg_changes import ChangeGenerator
from tests.helpers.postgres import PostgresServer

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- connect:begin -->"
END = "<!-- connect:end -->"
JSON = "org.apache.kafka.connect.json.JsonConverter"
SCHEMAS = {"key.converter": JSON, "value.converter": JSON,
           "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}


class Watermarks:
    """The sum of a topic's high watermarks, asked of one long-lived consumer (a consumer per
    question would cost more CPU than the worker under test on a small machine)."""

    def __init__(self, bootstrap: str) -> None:
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-connect",
                           "log_level": 3})

    def __call__(self, topic: str) -> int:
        md = self.c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(self.c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in md.partitions)

    def close(self) -> None:
        self.c.close()


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and every live process under it, with what
    their exited children used (PostgreSQL's backends are the postmaster's children)."""
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            stats[int(entry)] = raw.rsplit(")", 1)[1].split()
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(p for p, f in stats.items() if int(f[1]) == pid and p not in tree)
    return sum(sum(int(x) for x in stats[p][11:15]) for p in tree if p in stats) / CLK_TCK


class Cpu:
    """CPU seconds so far of the worker, the broker and PostgreSQL."""

    def __init__(self, worker: int, broker: int, postgres: int) -> None:
        self.pids = {"worker": worker, "broker": broker, "postgres": postgres}

    def __call__(self) -> dict[str, float]:
        return {k: tree_cpu(p) for k, p in self.pids.items()}

    @staticmethod
    def spent(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {k: b[k] - a[k] for k in a}


def count(dsn: str, table: str) -> int:
    try:
        with psycopg.connect(dsn) as conn:
            return conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    except psycopg.errors.UndefinedTable:
        return 0


def slot_exists(dsn: str, slot: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (slot,)).fetchone() is not None


def one_run(pg: PostgresServer, worker: ConnectProcess, hw: Watermarks, cpu: Cpu, rows: int,
            run: int) -> dict:
    uid = uuid.uuid4().hex[:8]
    src_db = pg.create_database(f"bench_src_{uid}")
    sink_db = pg.create_database(f"bench_sink_{uid}")
    src, sink = pg.dsn(src_db), pg.dsn(sink_db)
    prefix = f"bench{uid}"
    topic, table = f"{prefix}.public.items", f"{prefix}_public_items"
    gen = ChangeGenerator(seed=run, table="items")
    gen.create(src)
    a = worker.call("POST", "/connectors", {"name": f"src-{uid}", "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1", "database.hostname": pg.host, "database.port": str(pg.port),
        "database.user": "postgres", "database.password": "", "database.dbname": src_db,
        "topic.prefix": prefix, "table.include.list": "public.items",
        "plugin.name": "pgoutput", "slot.name": f"slot_{uid}", "publication.name": f"pub_{uid}",
        "snapshot.mode": "initial", **SCHEMAS}})
    if a.status != 201:
        raise RuntimeError(f"creating the source: {a.status} {a.text}")
    worker.wait_running(f"src-{uid}", 1, timeout=120)
    wait_until(lambda: slot_exists(src, f"slot_{uid}"), 60, what="the replication slot")

    cpu0 = cpu()
    t0 = time.perf_counter()
    gen.bulk_insert(src, rows, per_txn=1000)
    inserted = time.perf_counter() - t0
    wait_until(lambda: hw(topic) >= rows, 1800, interval=0.1,
               what=f"{rows} records in {topic}")
    cdc = time.perf_counter() - t0
    cpu1 = cpu()
    worker.call("DELETE", f"/connectors/src-{uid}")

    t0 = time.perf_counter()
    a = worker.call("POST", "/connectors", {"name": f"sink-{uid}", "config": {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics": topic, "connection.url": pg.url(sink_db), "connection.username": "postgres",
        "connection.password": "", "insert.mode": "upsert", "primary.key.mode": "record_key",
        "delete.enabled": "true", "schema.evolution": "basic", **SCHEMAS}})
    if a.status != 201:
        raise RuntimeError(f"creating the sink: {a.status} {a.text}")
    wait_until(lambda: count(sink, table) >= rows, 1800, interval=0.1,
               what=f"{rows} rows in {table}")
    sunk = time.perf_counter() - t0
    cpu2 = cpu()
    worker.call("DELETE", f"/connectors/sink-{uid}")
    with psycopg.connect(src, autocommit=True) as conn:
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s AND active",
            (f"slot_{uid}",)).fetchone()[0] == 0, 60, what="the slot released")
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s", (f"slot_{uid}",))
    return {"cdc_rows_s": rows / cdc, "insert_rows_s": rows / inserted,
            "sink_rows_s": rows / sunk,
            **{f"cdc_cpu_{k}": v for k, v in Cpu.spent(cpu0, cpu1).items()},
            **{f"sink_cpu_{k}": v for k, v in Cpu.spent(cpu1, cpu2).items()}}


def run(rows: int, runs: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    pg = PostgresServer.in_temp_dir().start()
    results = []
    try:
        with spool_broker(tmp) as b:
            worker = ConnectProcess(tmp / "worker", distributed_props(
                b.bootstrap, "bench-connect", **{"offset.flush.interval.ms": "1000"}),
                name="worker").start()
            hw = Watermarks(b.bootstrap)
            try:
                for i in range(runs):
                    cpu = Cpu(worker.proc.pid, b.pid, pg.proc.pid)
                    results.append(one_run(pg, worker, hw, cpu, rows, i))
                    print(f"run {i + 1}/{runs}: {results[-1]}", flush=True)
            finally:
                hw.close()
                worker.stop()
    finally:
        pg.stop()
        shutil.rmtree(pg.base_dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return {"rows": rows, "runs": runs, "commit": commit(), "cpus": os.cpu_count(),
            "load_average_15m": os.getloadavg()[2],
            **{k: stats([r[k] for r in results]) for k in results[0]}}


def section(r: dict) -> str:
    def rate(s: dict) -> str:
        return f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f})"
    return "\n".join([
        "## Kafka Connect: PostgreSQL CDC and sink (`python -m bench.connect`)",
        "",
        f"One `spool connect` worker, one Spool broker, one PostgreSQL server (fsync off), "
        f"{r['cpus']} CPUs (15-minute load average {r['load_average_15m']:.1f} at the end: "
        f"other work shared them); {r['rows']:,} rows of 15 column types (the end-to-end test's "
        f"table), JSON converters with schemas; median of {r['runs']} runs (min-max); "
        f"commit {r['commit']}.",
        "",
        "| phase | rows/s | CPU s: worker | broker | PostgreSQL |",
        "|---|---|---|---|---|",
        *(f"| {label} | {rate(r[f'{ph}_rows_s'])} | "
          + " | ".join(f"{r[f'{ph}_cpu_{k}']['median']:.1f}"
                       for k in ("worker", "broker", "postgres")) + " |"
          for ph, label in (("cdc", "CDC: PostgreSQL (pgoutput) -> Spool, Debezium envelopes"),
                            ("sink", "sink: Spool -> PostgreSQL, upsert by key"))),
        "",
        "Per CPU second of the worker (steadier than rows/s on a shared machine): CDC "
        f"{r['rows'] / r['cdc_cpu_worker']['median']:,.0f} rows, sink "
        f"{r['rows'] / r['sink_cpu_worker']['median']:,.0f} rows.",
        "",
        f"The CDC phase's inserts (COPY, 1,000 rows a transaction) ran at "
        f"{rate(r['insert_rows_s'])} rows/s, ahead of the CDC: its rate is the pipeline's.",
        "",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    r = run(args.rows, args.runs)
    text = section(r)
    print(text)
    if not args.no_write:
        (DOCS / "bench-connect.json").write_text(json.dumps(r, indent=2) + "\n")
        write_section(DOCS / "BENCHMARKS.md", BEGIN, END, text)


if __name__ == "__main__":
    main()
