"""kill -9 the active controller again and again: a new one is elected each time, CreateTopics
works again, the killed node rejoins, and no acknowledged topic, config or broker registration
is ever lost (bench/reliability/failover.py's loop, at CI size).

SPOOL_FAILOVER_KILLS sets the number of kills (default 5); ``make soak`` runs 20 and writes
the timings to docs/CLUSTER-FAILOVER.md. Timings are never asserted.
"""

from __future__ import annotations

import os

import pytest

from bench.reliability.failover import run

KILLS = int(os.environ.get("SPOOL_FAILOVER_KILLS", "5"))


@pytest.mark.timeout(120 + 60 * KILLS)
def test_killing_the_controller_again_and_again_loses_nothing_committed(tmp_path):
    r = run(tmp_path / "cluster", KILLS)
    timeouts = [x["timeout"] for x in r["rounds"] if "timeout" in x]
    assert timeouts == [], timeouts[0]
    assert r["kills_done"] == KILLS
    for x in r["rounds"]:
        assert x["killed"] != x["new_controller"] and x["epoch_after"] > x["epoch_before"], x
        assert x["violations"] == [], (x["round"], x["violations"])
        # The killed broker's registration outlives its process (fenced or not, same rack).
        assert x["registration_during_outage"].startswith(f"rack {'abc'[x['killed'] - 1]}, "), x
        assert x["leader_kept_after_rejoin"], x  # the rejoining node did not depose the leader
    assert r["tracebacks"] == 0
