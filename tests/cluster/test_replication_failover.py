"""kill -9 the leader of a replicated partition again and again while an idempotent acks=all
producer writes keyed records (issue 14): every acknowledged record is then present exactly
once, in order per partition and key, at its acknowledged offset, through a consumer and in
every replica's segment files, and the replicas' logs are byte-identical up to the high
watermark (bench/reliability/replication.py's loop, at CI size).

SPOOL_REPLICATION_KILLS sets the number of kills (default 3); ``make soak`` runs 20 and writes
the failover times to docs/REPLICATION-FAILOVER.md. Timings are never asserted.
"""

from __future__ import annotations

import os

import pytest

from bench.reliability.replication import run

KILLS = int(os.environ.get("SPOOL_REPLICATION_KILLS", "3"))


@pytest.mark.timeout(240 + 120 * KILLS)
def test_killing_partition_leaders_loses_no_acknowledged_record(tmp_path):
    r = run(tmp_path / "cluster", KILLS)
    timeouts = [x["timeout"] for x in r["rounds"] if "timeout" in x]
    assert timeouts == [], timeouts[0]
    assert r["kills_done"] == KILLS
    for x in r["rounds"]:
        # an ISR member took over in a newer epoch; the killed broker left the ISR
        assert x["new_leader"] != x["killed"] and x["epoch_after"] > x["epoch_before"], x
        assert x["killed"] not in x["isr_after"] and len(x["isr_after"]) == 2, x
    assert r["producer_fatal"] is None
    assert r["unfinished_after_flush"] == 0  # every record sent has its outcome
    assert r["acked"] > 0, r["counts"]
    j = r["judge"]
    assert "timeout" not in j, j.get("timeout")
    # one consumer read and one read of each replica's files, all judged
    assert sorted(j["records_read"]) == ["consumer", "replica 1", "replica 2", "replica 3"]
    assert j["violations"] == [], "\n".join(j["violations"][:30])
    assert j["diverged"] == [], "\n".join(j["diverged"])
    assert r["tracebacks"] == 0, "\n".join(r["traceback_excerpts"])
    print(f"{r['counts']}; read {j['records_read']}; failover s {r['failover_s']}")
