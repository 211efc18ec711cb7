"""Offset ranges: the unit of work of one Spark task, and how ranges are cut.

A ``SpoolRange`` is an ``InputPartition`` naming ``topic-partition`` and
``[start, end)``; it pickles (plain fields). ``plan`` makes one range per
topic-partition with data and, when ``minPartitions`` asks for more tasks
than that, splits the ranges in proportion to their sizes (no range is
split into pieces smaller than one record).
"""

from __future__ import annotations

import math

from pyspark.sql.datasource import InputPartition

from spool.spark.options import EARLIEST


class SpoolRange(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"SpoolRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


def plan(
    starts: dict[str, dict[int, int]],
    ends: dict[str, dict[int, int]],
    min_partitions: int | None,
) -> list[SpoolRange]:
    ranges = []
    for topic in sorted(ends):
        for p in sorted(ends[topic]):
            start = starts.get(topic, {}).get(p, EARLIEST)
            end = ends[topic][p]
            if start == EARLIEST or start < end:
                ranges.append(SpoolRange(topic, p, start, end))
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    sized = [r for r in ranges if r.start != EARLIEST]
    total = sum(r.end - r.start for r in sized)
    out = [r for r in ranges if r.start == EARLIEST]
    for r in sized:
        size = r.end - r.start
        pieces = max(1, min(size, math.ceil(min_partitions * size / total)))
        step = math.ceil(size / pieces)
        for s in range(r.start, r.end, step):
            out.append(SpoolRange(r.topic, r.partition, s, min(s + step, r.end)))
    return out
