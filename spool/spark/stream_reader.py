"""``spark.readStream.format("spool")``: micro-batches over offset ranges.

Offsets are ``{"topic": {"0": 42, "1": 17}}`` with a stable key order
(``cluster.to_json``), because Spark compares them as JSON text.

* ``initialOffset`` resolves ``startingOffsets`` (default ``latest``) or the
  timestamp options once; Spark journals it, so restarts reuse it.
* ``latestOffset(start, limit)`` looks at the partitions the subscription
  covers *now* (new partitions and topics start at their log start), caps
  the ends at the ``availableNow`` target when one is frozen, then applies
  admission control (below). Partitions that vanished are data loss
  (``failOnDataLoss``).
* ``reportLatestOffset`` gives the ends last seen, for progress reporting.
* ``partitions(start, end)`` -> one ``SpoolRange`` per partition with data;
  ``read`` runs on executors (``fetch.read_range``).
* ``commit`` does nothing: the checkpoint is the source of truth, no
  consumer-group offsets are written (as in Spark's Kafka source).

This object lives in a driver-side Python process that keeps it between
calls of one query run; nothing here relies on ``stop()``.

Admission control (Spark's Kafka source, ``KafkaMicroBatchStream``, unless said):

* ``minOffsetsPerTrigger`` n with ``maxTriggerDelay`` d (default 15m): a
  trigger admits nothing (returns ``start``: Spark runs no batch) while fewer
  than n offsets are waiting in total, unless d has passed since the last
  trigger that admitted (or the reader's first trigger: the clock starts at
  0, so the first trigger of every run admits whatever is there). The clock
  is this reader's memory, so it restarts with the query, as Kafka's does.
  Under ``availableNow`` the minimum is NOT applied: Spark ends an
  availableNow run at the first trigger that admits nothing, so Kafka's
  source can end such a run with up to n-1 offsets of the target unread;
  here the run always reaches its target (PySpark's ``ReadMinRows`` leaves
  this case to the source).
* ``maxOffsetsPerTrigger`` n: at most n offsets, shared in proportion to
  each partition's backlog (``rate_limit``: exact total n, remainders by
  largest backlog left; Kafka's rounds each share down, or up below 1).
* ``maxBytesPerTrigger`` b (no Kafka equivalent; Delta's and the file
  source's name): a soft cap. Each partition's bytes per offset is
  estimated (``log_sizes``: its log's size on the leader over its offset
  span); the backlog's estimated bytes B, and when B > b the trigger admits
  ``max(1, floor(backlog offsets * b / B))`` offsets, shared as above: the
  same fraction of every partition's backlog, so the estimated bytes
  admitted are about b (over by at most one record per partition; a single
  record larger than b is still admitted, one at a time, so the query moves).
  With ``maxOffsetsPerTrigger`` too, the smaller count wins.
* ``ReadAllAvailable`` (``Trigger.Once``, or no option set) admits everything
  and wins over every option, as in Kafka's source.

PySpark 4.3 carries one ReadLimit between the JVM and this reader as JSON
(``python_streaming_source_runner``: its registry has ReadAllAvailable,
ReadMinRows (no delay field), ReadMaxRows, ReadMaxFiles, ReadMaxBytes, no
CompositeReadLimit); the JVM (``PythonMicroBatchStreamWithAdmissionControl``)
hands the default limit back untouched, or ``ReadAllAvailable`` under
``Trigger.Once``. So ``getDefaultReadLimit`` names the main limit (max rows,
else min rows, else max bytes) for Spark's logs, and ``latestOffset`` applies
every option itself unless it receives ``ReadAllAvailable``.

Lag: Spark fills ``SourceProgress.metrics`` only for sources implementing
``ReportsSourceMetrics``, and PySpark 4.3's JVM stream classes for Python
sources (``PythonMicroBatchStream*``) do not, so ``metrics`` stays ``{}``.
``reportLatestOffset`` gives ``SourceProgress.latestOffset``, from which
``spool.spark.lag.offsets_behind_latest(progress)`` computes Kafka's
``minOffsetsBehindLatest``/``maxOffsetsBehindLatest``/``avgOffsetsBehindLatest``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spool.spark.cluster import Cluster, Offsets, from_json, to_json
from spool.spark.fetch import data_loss, read_range
from spool.spark.log_sizes import bytes_per_offset
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


def backlog(begin: Offsets, until: Offsets) -> int:
    """Offsets waiting between ``begin`` and ``until``, all partitions together."""
    return sum(max(0, off - begin[t][p]) for t in until for p, off in until[t].items())


def byte_limit(begin: Offsets, until: Offsets, per_offset: dict[tuple[str, int], float],
               max_bytes: int) -> int | None:
    """How many offsets fit in ``max_bytes`` (module docstring); None when all of them do."""
    lags = {(t, p): off - begin[t][p] for t in until for p, off in until[t].items()}
    total = sum(lag * per_offset.get(tp, 0.0) for tp, lag in lags.items() if lag > 0)
    if total <= max_bytes:
        return None
    return max(1, math.floor(backlog(begin, until) * max_bytes / total))


class SpoolStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SpoolOptions) -> None:
        self.opts = opts
        self.target: Offsets | None = None
        self.last_seen: Offsets | None = None
        self.last_trigger_ms = 0.0  # Kafka's lastTriggerMillis: 0, so a run's first trigger admits

    def _snapshot(self) -> tuple[list[tuple[str, int]], dict]:
        with Cluster(self.opts) as cluster:
            tps = cluster.partitions()
            return tps, cluster.watermarks(tps)

    def _sizes(self, marks: dict) -> dict[tuple[str, int], float]:
        with Cluster(self.opts) as cluster:
            return bytes_per_offset(self.opts, cluster, marks)

    def _delay(self, begin: Offsets, until: Offsets) -> bool:
        """minOffsetsPerTrigger/maxTriggerDelay: whether this trigger admits nothing."""
        now = time.time() * 1000
        if now - self.last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self.last_trigger_ms = now
            return False
        if backlog(begin, until) < self.opts.min_offsets_per_trigger:
            return True
        self.last_trigger_ms = now
        return False

    def _admit(self, begin: Offsets, until: Offsets, marks: dict) -> Offsets | None:
        """The ends this trigger admits, or None to admit nothing (module docstring)."""
        o = self.opts
        if o.min_offsets_per_trigger and self.target is None and self._delay(begin, until):
            return None
        rows = o.max_offsets_per_trigger
        if o.max_bytes_per_trigger and backlog(begin, until):
            waiting = {(t, p): marks[(t, p)] for t in until for p in until[t]}
            fit = byte_limit(begin, until, self._sizes(waiting), o.max_bytes_per_trigger)
            if fit is not None:
                rows = fit if rows is None else min(rows, fit)
        return until if rows is None else rate_limit(begin, until, rows)

    def initialOffset(self) -> dict:
        with Cluster(self.opts) as cluster:
            tps = cluster.partitions()
            marks = cluster.watermarks(tps)
            return to_json(cluster.resolve(self.opts.starting, tps, marks, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_offsets_per_trigger:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger:
            return ReadMinRows(o.min_offsets_per_trigger)
        if o.max_bytes_per_trigger:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

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
        if not isinstance(limit, ReadAllAvailable):
            admitted = self._admit(begin, until, marks)
            if admitted is None:
                return to_json(current)
            until = admitted
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
