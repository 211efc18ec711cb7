"""kill -9 the active controller again and again; nothing committed may be lost.

    python -m bench.reliability.failover [--kills 20] [--quick] [--out DIR] [--doc PATH]

Starts a 3-node cluster (combined broker,controller nodes on racks a, b, c,
formed with ``spool storage format``; tests/helpers/cluster_proc.py) and
then, ``--kills`` times (``--quick``: 5):

1. through one confluent-kafka AdminClient bootstrapped on every broker
   (for the whole run, as an application keeps one: it must find the new
   controller by itself), creates a topic and sets ``retention.ms`` on the
   run's config topic, both acknowledged;
2. finds the active controller (DescribeQuorum) and kills its process with
   SIGKILL;
3. measures the seconds until a live node leads a newer epoch
   (``elected_s``, DescribeQuorum polled every 50 ms), then records whether
   the new leader still has the killed broker registered (DescribeCluster v2
   with fenced brokers: ``registration_during_outage``), and until a
   CreateTopics of a new topic through that AdminClient is acknowledged
   (``create_ok_s``, one attempt after another with a 3 s timeout; the client refreshes
   its metadata every second, see ``_admin``, else it may wait for the killed node);
4. restarts the killed node on its data and measures, from the restart,
   the seconds until it is back in the quorum as a follower, caught up (the
   leader reports its log end offset at the high watermark:
   ``quorum_rejoin_s``) and until its broker serves Metadata naming the new
   controller (``rejoin_s``: it registered again, which the controller
   refuses with DUPLICATE_BROKER_REGISTRATION, as Kafka does, until the
   killed incarnation's session expired: ``broker.session.timeout.ms``);
5. asks every node for its view (Metadata, DescribeConfigs; each node
   directly) and checks the history (tests/helpers/history.py): every
   acknowledged topic and config and every broker registration on every
   node, nothing from nowhere. Violations are recorded per round.

Writes ``<out>/failover.json`` (every round's figures and violations, the
distribution: min, median, p90, max) and ``docs/CLUSTER-FAILOVER.md``.
Exits 1 when any round lost something or timed out. ``run(base_dir,
kills)`` is the loop itself; tests/cluster/test_kill_loop.py calls it at CI
size and asserts on what it returns, never on its timings.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.reliability.common import REPO, kill_loop_main, percentile
from tests.helpers.cluster_proc import Cluster, ClusterTimeout, QuorumState
from tests.helpers.history import OK, History, check, node_view, wait_converged

DEFAULT_DOC = REPO / "docs" / "CLUSTER-FAILOVER.md"
CONFIG_TOPIC = "failover-configs"
RACKS = ("a", "b", "c")
QUIET = logging.getLogger("failover.librdkafka")
QUIET.setLevel(logging.CRITICAL)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    # librdkafka's admin requests wait for the controller id of its last Metadata response
    # to be connected; it asks for Metadata again only on a new connection or on its periodic
    # refresh (5 min by default, brokers-only at most every 10 s). When the id it holds is
    # the node just killed (a restarted node names itself until it learns the leader, and
    # may win the next election), a client on the defaults waits for that node to come
    # back: "Timed out waiting for controller" (CI, once: 60 s of it). An application that
    # keeps one AdminClient across controller failovers refreshes more often.
    return AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET,
                        "topic.metadata.refresh.interval.ms": 1000})


def _views(cluster: Cluster, history: History) -> list:
    return [node_view(b.node_id, b.bootstrap, history) for b in cluster.brokers]


def _newer_leader(cluster: Cluster, old: QuorumState):
    def probe() -> QuorumState | str:
        s = cluster.active_controller(exclude=[old.leader_id])
        if s is not None and s.leader_epoch > old.leader_epoch:
            return s
        return f"no newer leader yet: {cluster.quorum_states()}"
    return probe


def _rejoined(cluster: Cluster, node: int, broker: bool = True):
    def probe() -> QuorumState | str:
        s = cluster.active_controller()
        if s is None or s.leader_id == node:
            return f"leader: {s}"
        if s.voters.get(node, -1) < s.high_watermark:
            return f"node {node} at {s.voters.get(node)} of {s.high_watermark}"
        if not broker:
            return s
        md = cluster.metadata(node)
        if isinstance(md, str) or md.controller_id != s.leader_id:
            return f"node {node} metadata: {md}"
        return s
    return probe


def one_round(cluster: Cluster, history: History, admin, k: int,
              timeout: float = 60.0) -> dict[str, Any]:
    r: dict[str, Any] = {"round": k}
    pre = history.create_topic_admin(admin, f"failover-{k}-before", partitions=2,
                                     replication_factor=3, timeout=10)
    cfg = history.alter_config_admin(admin, CONFIG_TOPIC, "retention.ms", str(3_600_000 + k),
                                     timeout=10)
    r["acked_before_kill"] = [str(o) for o in (pre, cfg) if o.outcome == OK]
    if pre.outcome != OK or cfg.outcome != OK:
        r["setup_failed"] = [str(pre), str(cfg)]
    old = cluster.wait_until("an active controller", lambda: cluster.active_controller()
                             or f"none: {cluster.quorum_states()}", timeout)
    victim = cluster.nodes[old.leader_id]
    r["killed"], r["epoch_before"] = victim.node_id, old.leader_epoch
    t0 = time.monotonic()
    victim.kill()
    new = cluster.wait_until("a new controller after the kill", _newer_leader(cluster, old),
                             timeout, every=0.05)
    r["elected_s"] = round(time.monotonic() - t0, 3)
    r["new_controller"], r["epoch_after"] = new.leader_id, new.leader_epoch
    reg = cluster.registered_brokers(new.leader_id)
    r["registration_during_outage"] = (
        reg if isinstance(reg, str) else
        "missing" if victim.node_id not in reg else
        f"rack {reg[victim.node_id][0]}, {'fenced' if reg[victim.node_id][1] else 'not fenced'}")
    attempts = 0
    while True:
        attempts += 1
        op = history.create_topic_admin(admin, f"failover-{k}-after-{attempts}", partitions=1,
                                        replication_factor=2, timeout=3)
        if op.outcome == OK:
            break
        if time.monotonic() - t0 > timeout:
            raise ClusterTimeout(f"CreateTopics not acknowledged within {timeout} s of the "
                                 f"kill; last: {op}\n{cluster.logs(2500)}")
    r["create_ok_s"] = round(time.monotonic() - t0, 3)
    r["create_attempts"] = attempts
    t1 = time.monotonic()
    victim.start()
    cluster.wait_until(f"node {victim.node_id} follows, caught up",
                       _rejoined(cluster, victim.node_id, broker=False), timeout)
    r["quorum_rejoin_s"] = round(time.monotonic() - t1, 3)
    cluster.wait_until(f"node {victim.node_id} serves as a broker again",
                       _rejoined(cluster, victim.node_id), timeout)
    r["rejoin_s"] = round(time.monotonic() - t1, 3)
    after = cluster.active_controller()
    r["leader_kept_after_rejoin"] = (after is not None and after.leader_id == new.leader_id
                                     and after.leader_epoch == new.leader_epoch)
    r["violations"] = wait_converged(lambda: _views(cluster, history),
                                     lambda vs: check(history, vs, cluster.expected_racks),
                                     timeout=30)
    return r


def run(base_dir: Path, kills: int, overrides: dict[str, str] | None = None,
        log=print) -> dict[str, Any]:
    """The kill loop on a fresh cluster in ``base_dir``; the result dict (see the module doc)."""
    cluster = Cluster(base_dir, racks=RACKS, overrides=overrides, proxied=False)
    rounds: list[dict[str, Any]] = []
    history = History()
    result: dict[str, Any] = {"kills_asked": kills, "rounds": rounds}
    try:
        t0 = time.monotonic()
        cluster.start()
        cluster.wait_formed()
        result["formed_s"] = round(time.monotonic() - t0, 3)
        admin = _admin(cluster.bootstrap)
        first = history.create_topic_admin(admin, CONFIG_TOPIC, partitions=1, replication_factor=3)
        result["config_topic"] = str(first)
        for k in range(1, kills + 1):
            try:
                rounds.append(one_round(cluster, history, admin, k))
            except ClusterTimeout as e:
                rounds.append({"round": k, "timeout": str(e)[:4000]})
                log(f"round {k}: TIMEOUT {str(e)[:300]}")
                break
            rr = rounds[-1]
            log(f"round {k}: killed {rr['killed']} (epoch {rr['epoch_before']}), "
                f"{rr['new_controller']} leads epoch {rr['epoch_after']} after "
                f"{rr['elected_s']} s, CreateTopics ok after {rr['create_ok_s']} s "
                f"({rr['create_attempts']} attempts), rejoined in {rr['quorum_rejoin_s']} s "
                f"(quorum) / {rr['rejoin_s']} s (broker), "
                f"violations {len(rr['violations'])}")
    finally:
        result["ops"] = len(history.ops)
        result["acked"] = len(history.acked())
        result["tracebacks"] = sum(n.log_tail(10**9).count("Traceback")
                                   for n in cluster.nodes.values())
        cluster.stop()
    done = [r for r in rounds if "elected_s" in r and "rejoin_s" in r]
    result["kills_done"] = len(done)
    result["violations"] = sum(len(r.get("violations", [])) for r in rounds)
    result["timeouts"] = sum(1 for r in rounds if "timeout" in r)
    for key in ("elected_s", "create_ok_s", "quorum_rejoin_s", "rejoin_s"):
        xs = [r[key] for r in done]
        if xs:
            result[key] = {"min": min(xs), "median": round(statistics.median(xs), 3),
                           "p90": percentile(xs, 90), "max": max(xs)}
    return result


def write_doc(r: dict[str, Any], doc: Path) -> None:
    def dist(key: str) -> str:
        d = r.get(key)
        return ("| " + " | ".join(f"{d[s]:.2f}" for s in ("min", "median", "p90", "max")) + " |"
                if d else "| - | - | - | - |")

    ok = r["violations"] == 0 and r["timeouts"] == 0 and r["kills_done"] == r["kills_asked"]
    lines = [
        "# Controller failover: kill -9 of the active controller",
        "",
        "Generated by `python -m bench.reliability.failover` (bench/reliability/failover.py, "
        "whose docstring is the method); do not edit by hand.",
        "",
        f"Measured at commit `{r['commit']}`, finished {r['finished_utc']} UTC, {r['cores']} "
        f"cores shared with other work (1-min load average at the end "
        f"{r['loadavg_at_end']:.1f}).",
        "",
        f"    {r['command']}",
        "",
        f"A 3-node cluster (combined broker,controller nodes, racks a, b, c) formed in "
        f"{r.get('formed_s')} s. The active controller's process was killed with SIGKILL "
        f"**{r['kills_done']} times** (of {r['kills_asked']} asked); {r['acked']} of "
        f"{r['ops']} metadata operations were acknowledged.",
        "",
        f"- Acknowledged topics, configs or broker registrations lost or wrong on any node: "
        f"**{r['violations']}** ({'held' if ok else '**FAILED**'})",
        f"- Rounds where the new leader still had the killed broker registered (DescribeCluster "
        f"v2 with fenced brokers, its rack): "
        f"{sum(1 for x in r['rounds'] if str(x.get('registration_during_outage', '')).startswith('rack'))}"
        f" of {r['kills_done']}",
        f"- Rounds that timed out: **{r['timeouts']}**",
        f"- Rounds where the restarted node disturbed the new leader (another leader or "
        f"epoch once it rejoined): "
        f"{sum(1 for x in r['rounds'] if x.get('leader_kept_after_rejoin') is False)}",
        f"- Lines containing `Traceback` in the nodes' logs: {r['tracebacks']}",
        "",
        "Seconds, over the kills:",
        "",
        "| From the kill until | min | median | p90 | max |",
        "|---|---:|---:|---:|---:|",
        "| a live node leads a newer epoch (DescribeQuorum) " + dist("elected_s"),
        "| a CreateTopics through the run's one AdminClient is acknowledged "
        + dist("create_ok_s"),
        "| (from its restart) the killed node follows the new leader, caught up "
        + dist("quorum_rejoin_s"),
        "| (from its restart) the killed node's broker serves Metadata naming the new "
        "controller (registered again once its old session expired) " + dist("rejoin_s"),
        "",
        "| Round | killed | epoch | new controller | epoch | elected s | CreateTopics ok s "
        "| attempts | quorum rejoin s | broker rejoin s | killed broker while down "
        "| violations |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for x in r["rounds"]:
        if "timeout" in x:
            lines.append(f"| {x['round']} | timeout: {x['timeout'].splitlines()[0][:200]} "
                         "| | | | | | | | | | |")
            continue
        lines.append(f"| {x['round']} | {x['killed']} | {x['epoch_before']} | "
                     f"{x['new_controller']} | {x['epoch_after']} | {x['elected_s']} | "
                     f"{x['create_ok_s']} | {x['create_attempts']} | "
                     f"{x.get('quorum_rejoin_s', '-')} | {x['rejoin_s']} | "
                     f"{x.get('registration_during_outage', '-')} | {len(x['violations'])} |")
    bad = [v for x in r["rounds"] for v in x.get("violations", [])]
    if bad:
        lines += ["", "Violations:", ""] + [f"- {v}" for v in bad[:50]]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    return kill_loop_main(argv, name="failover", doc_default=DEFAULT_DOC, quick_kills=5,
                          description=__doc__.splitlines()[0], run=run, write_doc=write_doc,
                          ok=lambda r, kills: (r["violations"] == 0 and r["timeouts"] == 0
                                           and r["kills_done"] == kills))


if __name__ == "__main__":
    sys.exit(main())
