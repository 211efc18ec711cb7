"""The reliability scripts (bench/reliability) at CI size: each one's invariants hold.

Each test runs one script with ``--quick`` in its own process against a real
broker it starts, then asserts on the JSON result it wrote, exactly what
docs/RELIABILITY.md reports for the full runs (``make soak``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_quick(name: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", f"bench.reliability.{name}", "--quick", "--out", str(out), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=240)
    result_file = out / f"{name}.json"
    assert result_file.exists(), f"{name} wrote no result:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(result_file.read_text())


@pytest.mark.timeout(300)
def test_fuzzed_frames_of_every_api_crash_nothing(tmp_path):
    r = run_quick("fuzz", tmp_path)
    assert r["frames"] >= 10_000
    assert r["apis_sent"] == r["apis_total"] == r["apis_in_seeds"]
    assert r["crashes"] == 0, r["crash_details"]
    assert r["hangs"] == 0, r["probes"]
    assert r["tracebacks"] == 0, r["traceback_examples"]
    assert r["broker_alive_at_end"]


@pytest.mark.timeout(300)
def test_idle_connections_do_not_stop_a_working_client(tmp_path):
    r = run_quick("idle", tmp_path)
    assert r["opened"] == r["answered"] == r["connections"] == 1000
    assert r["still_open_at_end"] == 1000
    assert r["client"]["acked"] == r["client"]["read_back_intact"] == r["client"]["records"]
    assert r["fds"]["after_close"] <= r["fds"]["before"] + 20
    assert r["rss_kib_per_connection"] < 64  # was 256 KiB of buffers each on a7338c2
    assert r["broker_alive_at_end"]


@pytest.mark.timeout(300)
def test_kill_9_rounds_lose_and_duplicate_nothing(tmp_path):
    r = run_quick("kill9", tmp_path)
    assert r["rounds"] == 5
    assert r["acked"] > 0
    assert r["acked_lost"] == 0
    assert r["duplicates"] == 0
    assert r["order_violations"] == 0
    assert r["malformed_values"] == 0
    assert r["fatal_producer_errors"] == []


def _can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and Path("/proc/filesystems").read_text().find("tmpfs") >= 0


@pytest.mark.timeout(300)
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="mounting a small tmpfs needs root")
def test_disk_full_and_freed_again_loses_nothing(tmp_path):
    r = run_quick("diskfull", tmp_path)
    assert r["acked"] > 0
    assert r["acked_lost"] == 0
    assert r["broker_crashes"] == 0
    assert all(c["broker_alive_while_full"] for c in r["cycles"])
    assert r["every_cycle_resumed"]
    assert r["broker_alive_at_end"]


@pytest.mark.timeout(300)
def test_partitions_until_refused_others_served_clean_restart(tmp_path):
    r = run_quick("partitions", tmp_path)  # max.broker.partitions=300 in --quick
    assert r["refusal"]["name"] == "POLICY_VIOLATION"
    assert r["partitions_created"] > 0
    assert r["one_million_partitions"]["name"] == "POLICY_VIOLATION"
    assert r["broker_alive_after_refusal"]
    assert r["bystander"]["failed"] == 0
    assert r["bystander"]["acked"] == r["bystander"]["sent"] > 0
    assert r["probes"]["unanswered"] == 0
    assert r["sigterm_exit_code"] == 0
    assert r["restart_after_sigterm"]["all_topics_back"]
    assert r["restart_after_kill9"]["all_topics_back"]
    assert r["bystander_records_read_back"] == r["bystander"]["acked"]
