"""Spark benchmark: records/s from Spool into Spark beside Spark reading the same records from Parquet.

    python -m bench.spark [--cases 1000000x100,200000x1024] [--partitions 2] [--runs 3]
                          [--bootstrap HOST:PORT] [--conf KEY=VALUE ...] [--option KEY=VALUE ...]
                          [--profile DIR]

Without ``--bootstrap`` a broker is started on a temp dir. For each case
(records x value bytes) a topic gets the records; Spark (local[2]) reads
them all through ``format("spool")`` into the ``noop`` sink (every column
materialized, nothing written), then the same rows are written once to
Parquet and read back the same way. Spool and Parquet take turns, ``--runs``
times each; the figures are the medians (min-max beside them). ``--conf``
sets Spark confs on the session, ``--option`` options of the spool reader.

Where the time goes: each run also counts the CPU seconds (``/proc``, user +
system, children reaped included) of the Spark JVM, of its Python workers
and of the broker (when started here); under a loaded machine the CPU
seconds are steadier than the wall clock. ``--profile DIR`` adds one Spool
run per case under ``py-spy record --nonblocking`` on the Python workers
(``DIR/<case>.txt``: collapsed stacks) and prints the functions that take
the most samples. Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
         "queue.buffering.max.messages": 1_000_000, "compression.type": "none"}
    )
    value = os.urandom(size)
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def timed(action) -> float:
    t = time.perf_counter()
    action()
    return time.perf_counter() - t


def _proc_cpu(pid: int) -> tuple[float, str, int]:
    """(CPU seconds incl. reaped children, command line, parent pid) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK"), cmd, int(fields[1])


def cpu_by_role(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far: the Spark JVM (a child of this process), its Python workers
    (every process under it), the broker."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                procs[int(entry)] = _proc_cpu(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    out = {"jvm": 0.0, "python workers": 0.0, "broker": 0.0}
    jvms = {pid for pid, (_, cmd, ppid) in procs.items()
            if ppid == os.getpid() and "java" in cmd}
    for pid, (cpu, _, ppid) in procs.items():
        if pid in jvms:
            out["jvm"] += cpu
            continue
        p = ppid
        while p in procs and p not in jvms:
            p = procs[p][2]
        if p in jvms:
            out["python workers"] += cpu
    if broker_pid is not None and broker_pid in procs:
        out["broker"] = procs[broker_pid][0]
    return out


def measured(action, broker_pid: int | None) -> tuple[float, dict[str, float]]:
    before = cpu_by_role(broker_pid)
    took = timed(action)
    after = cpu_by_role(broker_pid)
    return took, {k: after[k] - before[k] for k in after}


def profile(action, out: Path) -> dict[str, list[tuple[str, float]]]:
    """One run of ``action`` profiled: py-spy (CPU samples, ``--nonblocking``) on every
    Python process under the Spark JVM, Java Flight Recorder on the JVM. The top frames by
    share of samples (self time) of each, and the raw files under ``out``."""
    import collections
    import shutil
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    java_bin = Path(os.path.realpath(shutil.which("java") or "java")).parent
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    jvm = next(pid for pid in pids
               if _safe_parent(pid) == os.getpid() and "java" in _safe_cmd(pid))
    workers = [pid for pid in pids if "pyspark" in _safe_cmd(pid) and _under(pid, jvm)
               and _safe_parent(pid) != jvm]  # (not the daemon that forks the workers)
    spies = [subprocess.Popen([spy, "record", "--nonblocking", "--rate", "250", "--format",
                               "raw", "-o", str(out / f"py-{pid}.txt"), "--pid", str(pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for pid in workers]
    jfr = out / "jvm.jfr"
    subprocess.run([str(java_bin / "jcmd"), str(jvm), "JFR.start", "name=bench",
                    "settings=profile", f"filename={jfr}"], capture_output=True, check=True)
    time.sleep(1.0)  # the profilers attach
    action()
    subprocess.run([str(java_bin / "jcmd"), str(jvm), "JFR.stop", "name=bench"],
                   capture_output=True, check=True)
    for sp in spies:
        sp.send_signal(2)
    for sp in spies:
        sp.wait(30)
    py: collections.Counter = collections.Counter()
    for pid in workers:
        path = out / f"py-{pid}.txt"
        for line in path.read_text().splitlines() if path.exists() else ():
            stack, _, n = line.rpartition(" ")
            if n.isdigit() and stack:
                py[stack.split(";")[-1]] += int(n)
    java: collections.Counter = collections.Counter()
    printed = subprocess.run([str(java_bin / "jfr"), "print", "--events", "jdk.ExecutionSample",
                              str(jfr)], capture_output=True, text=True).stdout
    top_next = False
    for line in printed.splitlines():
        if "stackTrace = [" in line:
            top_next = True
        elif top_next:
            java[line.strip().split("(")[0] or "?"] += 1
            top_next = False

    def top(c: collections.Counter) -> list[tuple[str, float]]:
        total = sum(c.values())
        return [(f, n / total) for f, n in c.most_common(12)] if total else []

    return {"python workers": top(py), "jvm": top(java)}


def _under(pid: int, root: int) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        pid = _safe_parent(pid)
        if pid == root:
            return True
        seen += 1
    return False


def _safe_parent(pid: int) -> int:
    try:
        return _proc_cpu(pid)[2]
    except (OSError, IndexError, ValueError):
        return -1


def _safe_cmd(pid: int) -> str:
    try:
        return _proc_cpu(pid)[1]
    except (OSError, IndexError, ValueError):
        return ""


def _pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="1000000x100,200000x1024")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--option", action="append", default=[])
    ap.add_argument("--profile", type=Path, default=None)
    a = ap.parse_args()
    cases = [tuple(int(x) for x in c.split("x")) for c in a.cases.split(",")]

    work = Path(tempfile.mkdtemp(prefix="spool-bench-spark-"))
    broker = None
    bootstrap = a.bootstrap
    if bootstrap is None:
        from tests.helpers.broker_proc import BrokerProcess

        broker = BrokerProcess(work / "data").start()
        bootstrap = broker.bootstrap
    spark = None
    try:
        from spool.spark.session import local_session

        spark = local_session("bench-spark", local_dir=work / "spark")
        for key, value in _pairs(a.conf).items():
            spark.conf.set(key, value)
        rows = []
        for records, size in cases:
            topic = f"bench-spark-{os.getpid()}-{size}"
            took = fill(bootstrap, topic, records, size, a.partitions)
            print(f"produced {records:,} x {size} B in {took:.1f} s "
                  f"({records / took:,.0f} rec/s)", flush=True)
            reader = (spark.read.format("spool").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", topic))
            for key, value in _pairs(a.option).items():
                reader = reader.option(key, value)
            spool_df = reader.load()
            parquet = str(work / f"table-{size}.parquet")
            spool_df.write.mode("overwrite").parquet(parquet)  # also warms up the Python workers
            parquet_df = spark.read.parquet(parquet)
            assert parquet_df.count() == records

            def noop(df):
                return lambda: df.write.format("noop").mode("overwrite").save()

            broker_pid = broker.proc.pid if broker is not None else None
            spool_s, parquet_s, spool_cpu, parquet_cpu = [], [], [], []
            for _ in range(a.runs):
                took, cpu = measured(noop(spool_df), broker_pid)
                spool_s.append(took)
                spool_cpu.append(cpu)
                took, cpu = measured(noop(parquet_df), broker_pid)
                parquet_s.append(took)
                parquet_cpu.append(cpu)
            s, p = statistics.median(spool_s), statistics.median(parquet_s)
            rows.append((records, size, s, p, spool_s, parquet_s))
            for name, cpus in (("spool", spool_cpu), ("parquet", parquet_cpu)):
                print(f"  {name} CPU s (median): " + ", ".join(
                    f"{k} {statistics.median(c[k] for c in cpus):.2f}" for k in cpus[0]),
                    flush=True)
            if a.profile is not None:
                a.profile.mkdir(parents=True, exist_ok=True)
                tops = profile(noop(spool_df), a.profile / f"{records}x{size}")
                for who, top in tops.items():
                    print(f"  profile of the Spool run, {who}, self time:")
                    for frame, share in top:
                        print(f"    {share:6.1%}  {frame}")
            print(f"  spool   -> spark: {s:6.2f} s  {records / s / 1e6:5.2f} M rec/s  "
                  f"(runs {', '.join(f'{x:.2f}' for x in spool_s)} s)", flush=True)
            print(f"  parquet -> spark: {p:6.2f} s  {records / p / 1e6:5.2f} M rec/s  "
                  f"(runs {', '.join(f'{x:.2f}' for x in parquet_s)} s)", flush=True)
        print("\n| case | Spool | Parquet | Spool / Parquet |\n|---|---|---|---|")
        for records, size, s, p, spool_s, parquet_s in rows:
            print(f"| {records:,} x {size} B | {s:.2f} s, {records / s / 1e6:.2f} M rec/s "
                  f"({min(spool_s):.2f}-{max(spool_s):.2f} s) | {p:.2f} s, "
                  f"{records / p / 1e6:.2f} M rec/s ({min(parquet_s):.2f}-{max(parquet_s):.2f} s)"
                  f" | {p / s:.2f} |")
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)  # the broker's data, Parquet, Spark scratch


if __name__ == "__main__":
    main()
