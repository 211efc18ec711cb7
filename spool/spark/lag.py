"""How far a ``spool`` stream is behind its partitions' ends, from the query's progress.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` in ``SourceProgress.metrics``. A Python source
cannot: Spark asks only sources implementing ``ReportsSourceMetrics`` for
metrics, and the JVM classes PySpark 4.3 wraps Python stream readers in
(``PythonMicroBatchStream``, ``...WithAdmissionControl``,
``...WithTriggerAvailableNow``) do not implement it, nor does the Python
runner have a call for it; ``metrics`` is ``{}`` for the ``spool`` source.

What progress does carry is ``endOffset`` (what the batch read up to) and
``latestOffset`` (what the source saw at the partitions' ends when it planned
the batch: ``SpoolStreamReader.reportLatestOffset``). These functions turn one
``SourceProgress`` (``query.lastProgress.sources[0]``, or one from
``recentProgress`` or a ``StreamingQueryListener``'s ``onQueryProgress``)
into the same figures, with Kafka's definitions: per partition,
``latest - end``; min, max, and mean over the partitions of ``latestOffset``
that the batch's ``endOffset`` covers (a partition discovered after an
``availableNow`` target was frozen is left out). Values are strings, as in
``metrics``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value) if value.strip() not in ("", "null") else {}
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in value.items()}


def partition_lag(progress: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """``{topic: {partition: latest - end}}`` for one source's progress."""
    end = _offsets(progress["endOffset"])
    latest = _offsets(progress["latestOffset"])
    out: dict[str, dict[int, int]] = {}
    for topic, parts in sorted(latest.items()):
        for p, off in sorted(parts.items(), key=lambda kv: int(kv[0])):
            if p in end.get(topic, {}):
                out.setdefault(topic, {})[int(p)] = off - end[topic][p]
    return out


def offsets_behind_latest(progress: Mapping[str, Any]) -> dict[str, str]:
    """Kafka's three lag metrics for one source's progress; ``{}`` when nothing is known."""
    lags = [lag for parts in partition_lag(progress).values() for lag in parts.values()]
    if not lags:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(lags)),
        "maxOffsetsBehindLatest": str(max(lags)),
        "avgOffsetsBehindLatest": str(sum(lags) / len(lags)),
    }
