"""``spark.readStream.format("spool")``: micro-batches over offset ranges.

Offsets are ``{"topic": {"0": 42, "1": 17}}`` with a stable key order
(``cluster.to_json``), because Spark compares them as JSON text.

* ``initialOffset`` resolves ``startingOffsets`` (default ``latest``) or the
  timestamp options once; Spark journals it, so restarts reuse it.
* ``latestOffset(start, limit)`` looks at the partitions the subscription
  covers *now* (new partitions and topics start at their log start), caps
  the ends at the ``availableNow`` target when one is frozen and applies
  ``ReadMaxRows`` (``maxOffsetsPerTrigger``) in proportion to each
  partition's backlog. Partitions that vanished are data loss
  (``failOnDataLoss``).
* ``reportLatestOffset`` gives the ends last seen, for progress reporting.
* ``partitions(start, end)`` -> one ``SpoolRange`` per partition with data;
  ``read`` runs on executors (``fetch.read_range``).
* ``commit`` does nothing: the checkpoint is the source of truth, no
  consumer-group offsets are written (as in Spark's Kafka source).

This object lives in a driver-side Python process that keeps it between
calls of one query run; nothing here relies on ``stop()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spool.spark.cluster import Cluster, Offsets, from_json, to_json
from spool.spark.fetch import data_loss, read_range
from spool.spark.options import SpoolOptions
from spool.spark.ranges import SpoolRange, plan


def rate_limit(begin: Offsets, until: Offsets, max_rows: int) -> Offsets:
    """Move each end toward ``until`` so that at most ``max_rows`` records are admitted."""
    lags = {(t, p): until[t][p] - begin[t][p] for t in until for p in until[t]}
    total = sum(v for v in lags.values() if v > 0)
    if total <= max_rows:
        return until
    share = {tp: (max_rows * lag) // total if lag > 0 else 0 for tp, lag in lags.items()}
    spare = max_rows - sum(share.values())
    for tp in sorted(lags, key=lambda tp: (-(lags[tp] - share[tp]), tp)):
        if spare <= 0:
            break
        if lags[tp] > share[tp]:
            share[tp] += 1
            spare -= 1
    out: Offsets = {}
    for (t, p), lag in lags.items():
        out.setdefault(t, {})[p] = begin[t][p] + share[(t, p)] if lag > 0 else until[t][p]
    return out


class SpoolStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts
        self.target: Offsets | None = None
        self.last_seen: Offsets | None = None

    def _snapshot(self) -> tuple[list[tuple[str, int]], dict]:
        with Cluster(self.opts) as cluster:
            tps = cluster.partitions()
            return tps, cluster.watermarks(tps)

    def initialOffset(self) -> dict:
        with Cluster(self.opts) as cluster:
            tps = cluster.partitions()
            marks = cluster.watermarks(tps)
            return to_json(cluster.resolve(self.opts.starting, tps, marks, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps, marks = self._snapshot()
        target: Offsets = {}
        for t, p in tps:
            target.setdefault(t, {})[p] = marks[(t, p)][1]
        self.target = target

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        current = from_json(start)
        tps, marks = self._snapshot()
        now = set(tps)
        for t, parts in current.items():
            for p in parts:
                if (t, p) not in now:
                    data_loss(f"partition {t}-{p} no longer exists", self.opts.fail_on_data_loss)
        begin: Offsets = {}
        until: Offsets = {}
        seen: Offsets = {}
        for t, p in tps:
            low, high = marks[(t, p)]
            seen.setdefault(t, {})[p] = high
            if self.target is not None and p not in self.target.get(t, {}):
                continue  # appeared after the availableNow target was frozen
            b = current.get(t, {}).get(p, low)
            if b > high:
                data_loss(f"offset {b} of {t}-{p} is past its end {high}", self.opts.fail_on_data_loss)
                b = high
            end = high if self.target is None else min(high, self.target[t][p])
            begin.setdefault(t, {})[p] = b
            until.setdefault(t, {})[p] = max(b, end)
        self.last_seen = seen
        if isinstance(limit, ReadMaxRows):
            until = rate_limit(begin, until, limit.max_rows)
        # Keep partitions Spark already knows even when no longer covered, unless dropped above.
        for t, parts in current.items():
            for p, off in parts.items():
                if (t, p) in now and p not in until.get(t, {}):
                    until.setdefault(t, {})[p] = off
        return to_json(until)

    def reportLatestOffset(self) -> dict | None:
        return None if self.last_seen is None else to_json(self.last_seen)

    def partitions(self, start: dict, end: dict) -> list[SpoolRange]:
        return plan(from_json(start), from_json(end), self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SpoolRange):
            return
        yield from read_range(self.opts, partition.topic, partition.partition, partition.start, partition.end)

    def commit(self, end: dict) -> None:
        return None
