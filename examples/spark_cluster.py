"""A Spark standalone cluster (and a Spark Connect server) on this machine, from the pyspark wheel.

    python -m examples.spark_cluster up --dir ./spark-cluster [--workers 2]
        [--worker-cores 1] [--worker-memory 1g] [--executor-memory 640m] [--no-connect]
    python -m examples.spark_cluster status --dir ./spark-cluster
    python -m examples.spark_cluster down --dir ./spark-cluster

``up`` starts a master and ``--workers`` workers (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker`` of the
installed pyspark; Java 17 is the only other thing needed), then a Spark
Connect server on that master (``sbin/start-connect-server.sh``), every
process on 127.0.0.1, free ports, all files under ``--dir``; it prints the
urls and the environment a pipeline needs, e.g.

    SPARK_MASTER=spark://127.0.0.1:PORT SPARK_CONF_DIR=DIR/conf \\
        python -m examples.windowed_aggregates
    SPARK_REMOTE=sc://127.0.0.1:PORT python -m examples.windowed_aggregates

and returns, leaving the cluster running. ``down`` stops every process it
started (executors and Python workers with them). See docs/SPARK.md.
"""

from __future__ import annotations

import argparse
import sys

from examples.common import run

PROG = "python -m examples.spark_cluster"


def up(a: argparse.Namespace) -> None:
    from spool.spark.standalone import SparkClusterError, StandaloneCluster

    try:
        old = StandaloneCluster.load(a.dir)
    except SparkClusterError:
        old = None
    if old is not None and any(old.running().values()):
        raise SystemExit(f"{PROG}: a cluster is already running in {a.dir} "
                         f"({old.master_url}); '{PROG} down --dir {a.dir}' stops it")
    cluster = StandaloneCluster(a.dir, workers=a.workers, worker_cores=a.worker_cores,
                                worker_memory=a.worker_memory,
                                executor_memory=a.executor_memory)
    try:
        cluster.start()
        print(f"master:  {cluster.master_url}  (web UI {cluster.webui_url})", flush=True)
        if a.connect:
            print(f"connect: {cluster.start_connect()}", flush=True)
    except SparkClusterError as e:
        raise SystemExit(f"{PROG}: {e}") from None
    except KeyboardInterrupt:
        cluster.stop()
        raise
    print(f"\nrun a pipeline on it:\n  SPARK_MASTER={cluster.master_url} "
          f"SPARK_CONF_DIR={cluster.conf_dir} python -m examples.windowed_aggregates")
    if a.connect:
        print(f"or through Spark Connect:\n  SPARK_REMOTE={cluster.connect_url} "
              "python -m examples.windowed_aggregates")
    print(f"logs: {cluster.log_dir}; stop it: {PROG} down --dir {a.dir}")


def status(a: argparse.Namespace) -> None:
    from spool.spark.standalone import SparkClusterError, StandaloneCluster

    try:
        cluster = StandaloneCluster.load(a.dir)
    except SparkClusterError as e:
        raise SystemExit(f"{PROG}: {e}") from None
    for name, alive in cluster.running().items():
        print(f"{name}: {'running' if alive else 'not running'}")
    print(f"master:  {cluster.master_url}  (web UI {cluster.webui_url})")
    if cluster.connect_port:
        print(f"connect: {cluster.connect_url}")


def down(a: argparse.Namespace) -> None:
    from spool.spark.standalone import SparkClusterError, StandaloneCluster

    try:
        cluster = StandaloneCluster.load(a.dir)
    except SparkClusterError as e:
        raise SystemExit(f"{PROG}: {e}") from None
    names = [n for n, alive in cluster.running().items() if alive]
    cluster.stop()
    print(f"stopped: {', '.join(names) or 'nothing was running'}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    u = sub.add_parser("up", help="start the cluster and return",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    u.add_argument("--workers", type=int, default=2, help="worker processes")
    u.add_argument("--worker-cores", type=int, default=1, help="cores each worker offers")
    u.add_argument("--worker-memory", default="1g", help="memory each worker offers")
    u.add_argument("--executor-memory", default="640m",
                   help="spark.executor.memory of the drivers given SPARK_CONF_DIR, and of "
                   "the Connect server")
    u.add_argument("--no-connect", dest="connect", action="store_false",
                   help="no Spark Connect server")
    for name, helptext in (("status", "what is running"), ("down", "stop everything")):
        sub.add_parser(name, help=helptext)
    for s in sub.choices.values():
        s.add_argument("--dir", required=True, metavar="DIR",
                       help="where the cluster keeps its state, logs and work dirs")
    a = p.parse_args(argv)
    {"up": up, "status": status, "down": down}[a.command](a)


if __name__ == "__main__":
    run(PROG, lambda: main(sys.argv[1:]))
