"""kill -9 the leader of a replicated partition again and again under acks=all writes; no
acknowledged record may be lost, duplicated or reordered, and the replicas must agree.

    python -m bench.reliability.replication [--kills 20] [--quick] [--out DIR] [--doc PATH]

Starts a 3-node cluster (combined broker,controller nodes on racks a, b, c;
tests/helpers/cluster_proc.py) with small timeouts (``broker.session.timeout.ms``
3000, ``replica.lag.time.max.ms`` 3000), creates a topic of 3 partitions
with replication factor 3 and ``min.insync.replicas=2``, and starts one
writer: an idempotent confluent-kafka producer (``acks=all``) bootstrapped on
every broker that sends keyed records (16 keys, values of ~100 bytes naming
each attempt, ``RATE`` per second) for the whole run, each attempt and its
outcome recorded in a ``RecordHistory`` (tests/helpers/history.py). Then,
``--kills`` times (``--quick``: 3):

1. waits until every partition's ISR holds all 3 replicas on every broker's
   Metadata (a kill then leaves 2: acks=all can go on);
2. kills with SIGKILL the broker leading partition ``k % 3``, noting whether it was
   the active controller too (``killed_controller``; DescribeQuorum just before);
3. measures the seconds from the kill until Metadata names another leader
   for it (``elected_s``) and until the first acknowledgement of a record of
   that partition sent after the kill (``failover_s``: kill to first
   successful produce);
4. restarts the killed node on its data and measures, from the restart,
   the seconds until every ISR is full again (``isr_rejoin_s``: it
   registered, truncated, caught up and was added back by AlterPartition).

Afterwards the writer stops (flushing every record it sent) and, once the ISRs
are full, the judge reads each partition up to its high watermark (the
leader's, from ListOffsets) twice over: through a confluent-kafka consumer,
and from every replica's segment files offline (tests/helpers/replica_logs.py,
as ``spool dump-log`` reads them). ``check_records`` reports, for each read,
acknowledged records lost, records duplicated, acknowledged records reordered
(per partition and key), misplaced (not at the acknowledged offset) or
unexpected; the replicas' batches below the high watermark must be
byte-identical (``diverging``). Reads are retried until they pass or 60 s go
by: a follower may still be fetching the last records.

Writes ``<out>/replication.json`` and docs/REPLICATION-FAILOVER.md. Exits 1 when
anything was lost, duplicated, reordered, misplaced or diverged, when a round
timed out, or when the producer hit a fatal error. ``run(base_dir, kills)`` is
the loop; tests/cluster/test_replication_failover.py calls it at CI size and
asserts on what it returns, never on its timings.
"""

from __future__ import annotations

import logging
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.reliability.common import REPO, kill_loop_main, percentile
from tests.helpers.cluster_proc import Cluster, ClusterTimeout, PartitionState
from tests.helpers.history import (
    ACKED,
    Consumed,
    Read,
    RecordHistory,
    check_records,
    record_value,
)
from tests.helpers.replica_logs import diverging, read_replica

DEFAULT_DOC = REPO / "docs" / "REPLICATION-FAILOVER.md"
RACKS = ("a", "b", "c")
TOPIC = "replicated"
PARTITIONS = 3
KEYS = [f"key-{i}".encode() for i in range(16)]
RATE = 200  # records per second offered by the writer
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}
QUIET = logging.getLogger("replication.librdkafka")
QUIET.setLevel(logging.CRITICAL)


def full_isr(cluster: Cluster, topic: str, partitions: int):
    """A probe: every live broker shows every partition with a leader and its ISR = replicas;
    returns the states as the first live broker shows them."""
    def probe() -> dict[int, PartitionState] | str:
        first = None
        for b in cluster.brokers:
            if not b.alive:
                continue
            parts = cluster.partitions(b.node_id, topic)
            if isinstance(parts, str):
                return parts
            if len(parts) != partitions:
                return f"node {b.node_id}: {len(parts)} partitions"
            for p, s in parts.items():
                if s.leader < 0 or set(s.isr) != set(s.replicas):
                    return f"node {b.node_id}: {topic}-{p}: {s}"
            first = first or parts
        return first or "no live broker"
    return probe


class Writer:
    """The idempotent acks=all producer thread (see the module doc)."""

    def __init__(self, bootstrap: str, history: RecordHistory, topic: str = TOPIC,
                 rate: float = RATE, writer: int = 0, pad: int = 100) -> None:
        from confluent_kafka import Producer

        self.history, self.topic, self.rate, self.writer, self.pad = \
            history, topic, rate, writer, pad
        self.fatal: str | None = None
        self.errors: list[str] = []
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 300_000, "logger": QUIET,
            "error_cb": self._error})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replication-writer", daemon=True)

    def _error(self, err) -> None:
        if err.fatal():
            self.fatal = f"{err.name()}: {err.str()}"
        elif len(self.errors) < 100:
            self.errors.append(f"{err.name()}: {err.str()}")

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        t0 = time.monotonic()
        while not self._stop.is_set() and self.fatal is None:
            key = KEYS[i % len(KEYS)]
            a = self.history.begin(self.writer, self.topic, key)
            while True:
                try:
                    self.producer.produce(self.topic, key=key,
                                          value=record_value(a.writer, a.seq, self.pad),
                                          on_delivery=self.history.confluent_callback(a))
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except Exception as e:  # noqa: BLE001  (fatal: the producer refuses everything)
                    self.history.end(a, "failed", error=f"produce(): {e}")
                    self.fatal = self.fatal or f"produce(): {e}"
                    return
            i += 1
            self.producer.poll(0)
            delay = t0 + i / self.rate - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def stop(self, flush_timeout: float = 120.0) -> int:
        """Stop sending; wait for every outcome; the number still without one."""
        self._stop.set()
        self._thread.join(30)
        return self.producer.flush(flush_timeout)


def first_ack_after(history: RecordHistory, topic: str, partition: int, t0: float
                    ) -> float | None:
    done = [a.done for a in history.acked()
            if a.topic == topic and a.partition == partition and a.sent >= t0]
    return min(done) if done else None


def one_round(cluster: Cluster, history: RecordHistory, k: int, timeout: float = 90.0
              ) -> dict[str, Any]:
    r: dict[str, Any] = {"round": k}
    parts = cluster.wait_until("every ISR full", full_isr(cluster, TOPIC, PARTITIONS), timeout)
    p = k % PARTITIONS
    victim = cluster.nodes[parts[p].leader]
    r["partition"], r["killed"], r["epoch_before"] = p, victim.node_id, parts[p].leader_epoch
    ctrl = cluster.active_controller()  # combined nodes: the leader may be the controller too
    r["killed_controller"] = ctrl is not None and ctrl.leader_id == victim.node_id
    t0 = time.monotonic()
    victim.kill()

    def new_leader() -> PartitionState | str:
        for b in cluster.brokers:
            if b.alive:
                got = cluster.partitions(b.node_id, TOPIC)
                if not isinstance(got, str) and got[p].leader not in (-1, victim.node_id):
                    return got[p]
        return "no new leader yet"

    s = cluster.wait_until(f"{TOPIC}-{p} led by another broker", new_leader, timeout, every=0.05)
    r["elected_s"] = round(time.monotonic() - t0, 3)
    r["new_leader"], r["epoch_after"], r["isr_after"] = s.leader, s.leader_epoch, list(s.isr)
    acked = cluster.wait_until(f"a record of {TOPIC}-{p} sent after the kill acknowledged",
                               lambda: first_ack_after(history, TOPIC, p, t0)
                               or "none yet", timeout, every=0.05)
    r["failover_s"] = round(acked - t0, 3)
    t1 = time.monotonic()
    victim.start()
    cluster.wait_until("every ISR full after the restart", full_isr(cluster, TOPIC, PARTITIONS),
                       timeout)
    r["isr_rejoin_s"] = round(time.monotonic() - t1, 3)
    return r


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-judge",
                  "logger": QUIET})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def consume(bootstrap: str, topic: str, hw: dict[int, int], timeout: float = 120.0) -> Read:
    """Every record of ``topic`` below ``hw`` through a confluent-kafka consumer."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    read = Read("consumer", ends={(topic, p): e for p, e in hw.items()})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-judge",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_uncommitted", "logger": QUIET})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in hw])
        left = {p for p, e in hw.items() if e > 0}
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"consumer: {m.error()}")
                continue
            if m.offset() < hw[m.partition()]:
                read.records.append(Consumed(topic, m.partition(), m.offset(), m.key(),
                                             m.value()))
            if m.offset() + 1 >= hw[m.partition()]:
                left.discard(m.partition())
        if left:
            raise ClusterTimeout(f"consumer: partitions {sorted(left)} not read up to "
                                 f"{hw} within {timeout} s")
    finally:
        c.close()
    return read


def judge(cluster: Cluster, history: RecordHistory, topic: str = TOPIC,
          partitions: int = PARTITIONS, timeout: float = 60.0) -> dict[str, Any]:
    """Read every partition through a consumer and from every replica's files; the
    violations of each read and the replicas' divergences (see the module doc)."""
    parts = cluster.wait_until("every ISR full before the judge",
                               full_isr(cluster, topic, partitions), timeout)
    hw = high_watermarks(cluster.bootstrap, topic, partitions)
    out: dict[str, Any] = {"high_watermarks": hw}
    deadline = time.monotonic() + timeout
    while True:
        reads = [consume(cluster.bootstrap, topic, hw)]
        replicas = sorted({n for s in parts.values() for n in s.replicas})
        for n in replicas:
            mine = [p for p, s in parts.items() if n in s.replicas]
            reads.append(read_replica(f"replica {n}", cluster.nodes[n].data_dir, topic, mine, hw))
        reports = {rd.source: check_records(history, rd, {topic}) for rd in reads}
        diverged = [d for p, s in parts.items() for d in diverging(
            {n: cluster.nodes[n].data_dir for n in s.replicas}, topic, p, hw[p])]
        if (not any(reports.values()) and not diverged) or time.monotonic() > deadline:
            break
        time.sleep(2)
    out["records_read"] = {rd.source: len(rd.records) for rd in reads}
    for kind in ("lost", "duplicated", "reordered", "misplaced", "unexpected"):
        out[kind] = {src: len(getattr(rep, kind)) for src, rep in reports.items()}
    out["violations"] = [v for rep in reports.values() for v in rep.violations]
    out["diverged"] = diverged
    return out


def run(base_dir: Path, kills: int, log=print, rate: float = RATE) -> dict[str, Any]:
    """The kill loop on a fresh cluster in ``base_dir``; the result dict (see the module doc)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(base_dir, racks=RACKS, overrides=OVERRIDES, proxied=False)
    history = RecordHistory()
    rounds: list[dict[str, Any]] = []
    result: dict[str, Any] = {"kills_asked": kills, "rounds": rounds, "rate": rate,
                              "overrides": OVERRIDES}
    writer: Writer | None = None
    try:
        t0 = time.monotonic()
        cluster.start()
        cluster.wait_formed()
        result["formed_s"] = round(time.monotonic() - t0, 3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": QUIET})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "min.insync.replicas": "2"})])[TOPIC].result(timeout=30)
        cluster.wait_until("every ISR full", full_isr(cluster, TOPIC, PARTITIONS), 60)
        writer = Writer(cluster.bootstrap, history, rate=rate).start()
        for k in range(1, kills + 1):
            try:
                rounds.append(one_round(cluster, history, k))
            except ClusterTimeout as e:
                rounds.append({"round": k, "timeout": str(e)[:4000]})
                log(f"round {k}: TIMEOUT {str(e)[:300]}")
                break
            x = rounds[-1]
            log(f"round {k}: killed {x['killed']} (leader of {TOPIC}-{x['partition']}, epoch "
                f"{x['epoch_before']}), {x['new_leader']} leads epoch {x['epoch_after']} after "
                f"{x['elected_s']} s, first ack after {x['failover_s']} s, ISR full again "
                f"{x['isr_rejoin_s']} s after the restart; {history.counts()}")
        result["unfinished_after_flush"] = writer.stop()
        result["producer_fatal"] = writer.fatal
        result["producer_errors"] = writer.errors[:20]
        result["counts"] = history.counts()
        result["acked"] = len(history.acked())
        try:
            result["judge"] = judge(cluster, history)
        except ClusterTimeout as e:
            result["judge"] = {"timeout": str(e)[:4000]}
    finally:
        if writer is not None and not writer._stop.is_set():
            writer.stop(10)
        result["tracebacks"] = 0
        result["traceback_excerpts"] = []
        for n in cluster.nodes.values():
            text = n.log_tail(10**9)
            result["tracebacks"] += text.count("Traceback")
            for part in text.split("Traceback")[1:3]:
                result["traceback_excerpts"].append(f"node {n.node_id}: Traceback{part[:600]}")
        cluster.stop()
    done = [x for x in rounds if "isr_rejoin_s" in x]
    result["kills_done"] = len(done)
    result["timeouts"] = sum(1 for x in rounds if "timeout" in x)
    for key in ("elected_s", "failover_s", "isr_rejoin_s"):
        xs = [x[key] for x in done]
        if xs:
            result[key] = {"min": min(xs), "median": round(statistics.median(xs), 3),
                           "p90": percentile(xs, 90), "max": max(xs)}
    j = result.get("judge", {})
    result["ok"] = bool(
        result["kills_done"] == kills and result["timeouts"] == 0
        and not result.get("producer_fatal") and "timeout" not in j
        and not j.get("violations") and not j.get("diverged")
        and result.get("unfinished_after_flush") == 0)
    return result


def write_doc(r: dict[str, Any], doc: Path) -> None:
    def dist(key: str) -> str:
        d = r.get(key)
        return ("| " + " | ".join(f"{d[s]:.2f}" for s in ("min", "median", "p90", "max")) + " |"
                if d else "| - | - | - | - |")

    j = r.get("judge", {})
    counts = r.get("counts", {})

    def total(kind: str) -> str:
        if kind not in j:
            return "not judged"
        by = j[kind]
        return f"**{sum(by.values())}** (" + ", ".join(f"{s}: {n}" for s, n in by.items()) + ")"

    lines = [
        "# Replication failover: kill -9 of a partition leader under acks=all",
        "",
        "Generated by `python -m bench.reliability.replication` "
        "(bench/reliability/replication.py, whose docstring is the method); do not edit by hand.",
        "",
        f"Measured at commit `{r['commit']}`, finished {r['finished_utc']} UTC, {r['cores']} "
        f"cores shared with other work (1-min load average at the end "
        f"{r['loadavg_at_end']:.1f}).",
        "",
        f"    {r['command']}",
        "",
        f"A 3-node cluster (combined broker,controller nodes, racks a, b, c; "
        f"{', '.join(f'{k}={v}' for k, v in r['overrides'].items())}) formed in "
        f"{r.get('formed_s')} s; topic `{TOPIC}`: {PARTITIONS} partitions, replication factor "
        f"3, min.insync.replicas=2. One idempotent acks=all producer offered {r['rate']} "
        f"records/s throughout. The leader of a partition was killed with SIGKILL "
        f"**{r['kills_done']} times** (of {r['kills_asked']} asked) and restarted each time.",
        "",
        f"- Verdict: **{'held' if r['ok'] else 'FAILED'}**",
        f"- Records sent: {sum(counts.values())}; acknowledged: **{counts.get(ACKED, 0)}**; "
        f"outcome unknown: {counts.get('unknown', 0)}; without an outcome after the flush: "
        f"{r.get('unfinished_after_flush')}",
        f"- Acknowledged records lost: {total('lost')}",
        f"- Records duplicated: {total('duplicated')}",
        f"- Acknowledged records reordered (per partition and key): {total('reordered')}",
        f"- Acknowledged records not at their acknowledged offset: {total('misplaced')}; "
        f"records nobody sent: {total('unexpected')}",
        f"- Replicas whose batches below the high watermark differ: "
        f"**{len(j.get('diverged', []))}** (high watermarks {j.get('high_watermarks')})",
        f"- Producer fatal error: {r.get('producer_fatal') or 'none'}; rounds that timed out: "
        f"**{r['timeouts']}**; lines containing `Traceback` in the nodes' logs: "
        f"{r['tracebacks']}",
        "",
        "Seconds, over the kills:",
        "",
        "| From the kill until | min | median | p90 | max |",
        "|---|---:|---:|---:|---:|",
        "| Metadata names a new leader of the partition " + dist("elected_s"),
        "| **failover**: the first record of the partition sent after the kill is "
        "acknowledged " + dist("failover_s"),
        "| (from its restart) every ISR holds the killed broker again " + dist("isr_rejoin_s"),
        "",
        "| Round | partition | killed | epoch | new leader | epoch | ISR after | elected s "
        "| failover s | ISR rejoin s |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for x in r["rounds"]:
        if "timeout" in x:
            lines.append(f"| {x['round']} | timeout: {x['timeout'].splitlines()[0][:200]} "
                         "| | | | | | | | |")
            continue
        lines.append(f"| {x['round']} | {x['partition']} | {x['killed']} | {x['epoch_before']} "
                     f"| {x['new_leader']} | {x['epoch_after']} | {x['isr_after']} | "
                     f"{x['elected_s']} | {x['failover_s']} | {x['isr_rejoin_s']} |")
    bad = j.get("violations", []) + j.get("diverged", [])
    if "timeout" in j:
        bad.append(f"judge: {j['timeout'].splitlines()[0]}")
    if bad:
        lines += ["", "Violations:", ""] + [f"- {v}" for v in bad[:50]]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    return kill_loop_main(argv, name="replication", doc_default=DEFAULT_DOC, quick_kills=3,
                          description=__doc__.splitlines()[0], run=run, write_doc=write_doc,
                          ok=lambda r, kills: r["ok"])


if __name__ == "__main__":
    sys.exit(main())
