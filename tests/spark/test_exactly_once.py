"""Exactly-once streaming sink: kill -9 the whole driver tree at random moments, restart, compare.

The job is ``examples.windowed_aggregates`` reading ``events`` and writing
per-(key, window) counts to ``counts`` with ``deliveryGuarantee=exactly-once``
and a small ``maxOffsetsPerTrigger`` (many micro-batches to crash in). After
several kills and a final ``availableNow`` run, ``counts`` read with
read_committed must hold every closed window exactly once with the count
computed directly from ``events``.

Transactions are required of the broker: no capability check, so a broker
that stops advertising them fails this test instead of skipping it.
"""

from __future__ import annotations

import calendar
import collections
import json
import random
import subprocess
import time
from pathlib import Path

from tests.spark.conftest import consume_all, create_topic, produce
from tests.spark.drivers import kill_tree, start_driver

T0 = 1_800_000_000_000


def job(bootstrap: str, src: str, dst: str, checkpoint: Path, scratch: Path, trigger: str,
        guarantee: str = "exactly-once") -> subprocess.Popen:
    return start_driver("examples.windowed_aggregates", [
        "--bootstrap", bootstrap, "--source", src, "--sink", dst, "--checkpoint",
        str(checkpoint), "--scratch", str(scratch), "--trigger", trigger,
        "--delivery-guarantee", guarantee, "--max-offsets-per-trigger", "150",
    ], scratch / "job.log")


def test_kill_9_driver_repeatedly_leaves_every_count_exactly_once(broker, topic_name, tmp_path):
    bootstrap = broker.bootstrap
    src, dst = topic_name + "-events", topic_name + "-counts"
    create_topic(bootstrap, src, 3)
    create_topic(bootstrap, dst, 2)
    rng = random.Random(8)
    events = [
        {"key": f"k{rng.randrange(7)}".encode(), "value": b'{"amount": 1}', "timestamp": T0 + i * 700}
        for i in range(1500)
    ]
    cp, scratch = tmp_path / "cp", tmp_path / "scratch"
    scratch.mkdir()
    for chunk in range(3):
        produce(bootstrap, src, events[chunk * 500 : (chunk + 1) * 500])
        proc = job(bootstrap, src, dst, cp, scratch, "0.5")
        time.sleep(rng.uniform(20, 40))  # a job needs ~15-20 s before its first batch
        kill_tree(proc)
    produce(bootstrap, src, [{"key": b"tick", "value": b'{"amount": 0}', "timestamp": T0 + 10_000_000}])
    proc = job(bootstrap, src, dst, cp, scratch, "available-now")
    assert proc.wait(300) == 0, (scratch / "job.log").read_text()[-3000:]

    want = collections.Counter()
    for e in events:
        window = (e["timestamp"] - T0) // 60_000
        want[(e["key"].decode(), window)] += 1
    got: collections.Counter = collections.Counter()
    copies: collections.Counter = collections.Counter()
    for m in consume_all(bootstrap, dst, isolation="read_committed"):
        v = json.loads(m.value())
        start = calendar.timegm(time.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ")) * 1000
        window = (v["customer"], (start - T0) // 60_000)
        got[window] += v["orders"]
        copies[window] += 1
    assert {w: n for w, n in copies.items() if n != 1} == {}  # no duplicates
    assert dict(got) == dict(want)  # none missing, none wrong
