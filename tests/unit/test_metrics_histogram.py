"""The broker's plain histograms (spool.broker.metrics): a value on a bucket bound counts
in that bucket (Prometheus's ``le``), and folding a batch (``observe_all``, what the
request metrics do every FOLD_AT requests) counts exactly what observing each would."""

from __future__ import annotations

import random

from spool.broker.metrics import Histogram


def test_bounds_are_inclusive_and_buckets_cumulative() -> None:
    h = Histogram((1.0, 10.0))
    for v in (0.5, 1.0, 1.5, 10.0, 11.0):
        h.observe(v)
    assert h.buckets() == [("1.0", 2), ("10.0", 4), ("+Inf", 5)]
    assert h.sum == 24.0


def test_a_folded_batch_counts_as_observing_each() -> None:
    rng = random.Random(18)
    values = [rng.choice([0.0, 0.1, 0.25, 2.5, 30000.0, 31000.0, rng.expovariate(0.05)])
              for _ in range(3000)]
    one, batched = Histogram(), Histogram()
    for v in values:
        one.observe(v)
    for i in range(0, len(values), 256):
        batched.observe_all(values[i:i + 256])
    assert batched.counts == one.counts
    assert abs(batched.sum - one.sum) < 1e-6
