"""The executors' read path against a 3-broker cluster: the leader of the partition being read
is killed (-9) mid-read, and the read still yields every record of the range exactly once.

``read_range`` is what a Spark task runs for one partition; it is driven here directly (no
Spark session needed to reach it), with a small ``kafka.max.partition.fetch.bytes`` so the range
takes many Fetch requests and the kill falls between two of them.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.spark.fetch import read_range
from spool.spark.options import parse_options
from tests.helpers.cluster_proc import Cluster

RECORDS = 20_000
# a dead broker is fenced, and its partitions led by another, within ~3 s
FAST_FAILOVER = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                 "replica.lag.time.max.ms": "3000"}


def test_the_leader_dies_mid_read_and_every_record_comes_once(tmp_path):
    cluster = Cluster(tmp_path / "cluster", racks=("a", "b", "c"),
                      overrides=FAST_FAILOVER).start()
    try:
        controller = cluster.wait_formed().leader_id
        topic = f"failover-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)

        def in_sync():
            ps = cluster.partitions(controller, topic)
            if isinstance(ps, str) or not all(s.leader >= 1 and len(s.isr) == 3
                                              for s in ps.values()):
                return str(ps)
            return ps

        leaders = cluster.wait_until("every partition has a leader and 3 in sync", in_sync)
        # the partition whose leader is not the active controller: only the broker dies
        partition = next((p for p, s in leaders.items() if s.leader != controller), 0)
        victim = cluster.nodes[leaders[partition].leader]

        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                      "batch.size": 8192})
        for i in range(RECORDS):
            p.produce(topic, key=str(i).encode(), value=b"v%07d" % i, partition=partition)
        assert p.flush(60) == 0

        opts = parse_options({
            "kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic,
            "kafka.max.partition.fetch.bytes": "16384"}, for_read=True)
        batches = read_range(opts, topic, partition, 0, RECORDS)
        got = [next(batches)]
        assert got[0].num_rows < RECORDS  # the read is really under way, not done
        victim.kill()
        got.extend(batches)

        table = pa.Table.from_batches(got)
        assert table.column("offset").to_pylist() == list(range(RECORDS))
        assert table.column("value").to_pylist() == [b"v%07d" % i for i in range(RECORDS)]
        assert set(table.column("partition").to_pylist()) == {partition}
    finally:
        cluster.stop()
