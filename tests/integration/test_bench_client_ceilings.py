"""The client-ceiling tools of bench.compare against librdkafka's own mock cluster.

``bench.mock_cluster.MockCluster`` must create topics with the partitions asked for and
take a real producer's records; ``bench.consumers.ConsumerPool`` must read every record
back with its partitions dealt over processes, also after prefetching; ``bench.report``
must judge issue 22's targets from a results dict as ``bench.compare`` writes it.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from bench import report, workloads
from bench.consumers import ConsumerPool
from bench.mock_cluster import MockCluster


def test_mock_cluster_topic_and_consumer_pool_read_every_record() -> None:
    records, size, partitions = 6_400, 100, 8
    with MockCluster() as mock, ConsumerPool(3) as pool:
        mock.create_topic("ceiling", partitions)
        seconds, cpu = workloads.produce_timed(mock.bootstrap, "ceiling", records, size)
        assert seconds > 0 and cpu > 0
        counts = workloads.watermarks(mock.bootstrap, "ceiling", partitions)
        assert len(counts) == partitions and sum(counts) == records
        c = Consumer({"bootstrap.servers": mock.bootstrap, "group.id": "x"})
        try:
            md = c.list_topics("ceiling", timeout=10).topics["ceiling"]
            assert len(md.partitions) == partitions
            assert c.get_watermark_offsets(TopicPartition("ceiling", 0), 10)[0] == 0
        finally:
            c.close()
        seconds, cpu = pool.consume(mock.bootstrap, "ceiling", partitions, records)
        assert seconds > 0 and cpu > 0
    with MockCluster() as mock, ConsumerPool(2) as fresh:  # as bench.compare: fresh processes
        mock.create_topic("ceiling", partitions)
        workloads.produce(mock.bootstrap, "ceiling", records, size)
        counts = workloads.watermarks(mock.bootstrap, "ceiling", partitions)
        seconds, cpu = fresh.consume(mock.bootstrap, "ceiling", partitions, records,
                                     prefetch=counts, size=size)
        assert seconds > 0


def _w(size: int, partitions: int, spool: dict, tansu: dict, ceiling: float) -> dict:
    def med(d: dict) -> dict:
        return {k: {"median": v, "min": v, "max": v} for k, v in d.items()}

    return {"size": size, "partitions": partitions, "spool": med(spool), "tansu": med(tansu),
            "client": med({"ceiling_produce_mock": ceiling})}


def test_verdicts_judge_each_target() -> None:
    fast = {"produce": 900, "consume": 500, "produce_cpu": 0.2, "consume_cpu": 0.05}
    slow = {"produce": 500, "consume": 400, "produce_cpu": 0.5, "consume_cpu": 0.3}
    r = {"throughput": {"c 1k": _w(1024, 6, fast, slow, 1000),
                        "d 100": _w(100, 64, {**fast, "produce_cpu": 0.3}, slow, 1100)}}
    v = {(x["workload"], x["target"]): x["met"] for x in report.verdicts(r)}
    assert v == {
        ("c 1k", "produce >= 1.5x Tansu"): True,
        ("c 1k", "broker CPU, produce <= 0.5x Tansu's"): True,
        ("c 1k", "broker CPU, consume <= 0.5x Tansu's"): True,
        ("d 100", "broker CPU, produce <= 0.5x Tansu's"): False,
        ("d 100", "broker CPU, consume <= 0.5x Tansu's"): True,
        ("d 100", "100 B produce >= 90% of the client's ceiling"): False,
    }
    assert "4 of 6 met" in report.verdict_text(report.verdicts(r))
