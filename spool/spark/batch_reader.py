"""``spark.read.format("spool")``: exact offset ranges, one task per range.

``partitions()`` (driver) fixes the ranges once: starting/ending offsets
resolved against the partitions the subscription covers now. ``read()``
(executors) streams each range as Arrow record batches (``fetch.read_range``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spool.spark.cluster import Cluster
from spool.spark.fetch import data_loss, read_range
from spool.spark.options import SpoolOptions
from spool.spark.ranges import SpoolRange, plan


class SpoolBatchReader(DataSourceReader):
    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[SpoolRange]:
        with Cluster(self.opts) as cluster:
            tps = cluster.partitions()
            marks = cluster.watermarks(tps)
            starts = cluster.resolve(self.opts.starting, tps, marks, starting=True)
            ends = cluster.resolve(self.opts.ending, tps, marks, starting=False)
        for t, parts in starts.items():
            for p, off in parts.items():
                if off < marks[(t, p)][0]:
                    data_loss(f"starting offset {off} of {t}-{p} is below the log start", self.opts.fail_on_data_loss)
                if off > ends[t][p]:
                    raise ValueError(
                        f"starting offset {off} of {t}-{p} is after its ending offset {ends[t][p]}"
                    )
        return plan(starts, ends, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SpoolRange):  # Spark's stand-in for "no partitions"
            return
        yield from read_range(self.opts, partition.topic, partition.partition, partition.start, partition.end)
