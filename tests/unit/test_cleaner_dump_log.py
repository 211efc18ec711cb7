"""``spool dump-log``: batches, records, delete horizons, indexes, verification, JSON, damage."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spool.cli.main import app
from spool.records import BatchBuilder, build_control_batch
from spool.storage.cleaner_manager import LogCleaner, log_to_clean
from spool.storage.manager import LogManager
from spool.util.clock import FakeClock

T0 = 1_700_000_000_000
runner = CliRunner()


@pytest.fixture
def seg_dir(tmp_path):
    """A compacted log after one cleaning: tombstones carry a delete horizon."""
    clock = FakeClock(T0)
    mgr = LogManager([str(tmp_path / "d")], {}, clock)
    plog = mgr.create_partition("t", 0, {"cleanup.policy": "compact", "internal.segment.bytes": "3000",
                                         "index.interval.bytes": "100",
                                         "delete.retention.ms": "5000"})
    for i in range(60):
        b = BatchBuilder(0)
        b.append(b"k%d" % (i % 4), None if i % 9 == 8 else b"v%d" % i, timestamp=T0 + i,
                 headers=[("h", b"x")])
        plog.append(b.build())
    plog.append(build_control_batch(5, 0, True, 3, 0, T0))
    LogCleaner(mgr).clean(log_to_clean(plog.tp, plog, None, T0), T0)
    mgr.shutdown()
    return tmp_path / "d" / "t-0"


def run(*args):
    return runner.invoke(app, ["dump-log", *map(str, args)])


def test_dump_batches_and_records(seg_dir):
    first = sorted(seg_dir.glob("*.log"))[0]
    r = run(first, "--print-records")
    assert r.exit_code == 0, r.output
    assert "Log starting offset: 0" in r.output
    assert "deleteHorizonMs: 1700000005000" in r.output  # the cleaning set it
    assert "| offset:" in r.output and "headerKeys: ['h']" in r.output
    assert "isvalid: true" in r.output
    last = sorted(seg_dir.glob("*.log"))[-1]
    r = run(last, "--print-records")
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in r.output


def test_json_lines(seg_dir):
    r = run(sorted(seg_dir.glob("*.log"))[0], "--print-records", "--json")
    assert r.exit_code == 0
    objs = [json.loads(line) for line in r.output.splitlines()]
    assert objs[0]["type"] == "file"
    batches = [o for o in objs if o.get("type") == "batch"]
    records = [o for o in objs if o.get("type") == "record"]
    assert batches and records
    assert sum(b["count"] for b in batches) == len(records)
    # keys k0..k3; every ninth value (i % 9 == 8) a tombstone: JSON null, not "null"
    assert {r["key"] for r in records} <= {"k0", "k1", "k2", "k3"}
    assert None in {r["payload"] for r in records}
    hexed = run(sorted(seg_dir.glob("*.log"))[0], "--print-records", "--json", "-e", "hex")
    hex_records = [o for o in map(json.loads, hexed.output.splitlines())
                   if o.get("type") == "record"]
    assert [(r["key"], r["payload"]) for r in hex_records] == [
        (r["key"].encode().hex(), None if r["payload"] is None else r["payload"].encode().hex())
        for r in records]


def test_verify_index_and_dump_index(seg_dir):
    log = max(seg_dir.glob("*.log"), key=lambda p: p.stat().st_size)
    r = run(log, "--verify-index")
    assert r.exit_code == 0, r.output
    assert "Verified" in r.output
    index = log.with_suffix(".index")
    r = run(index)
    assert r.exit_code == 0 and "position:" in r.output
    data = bytearray(index.read_bytes())
    assert data, "the test needs an index entry"
    data[4:8] = (7).to_bytes(4, "big")  # point the first entry at no batch boundary
    index.write_bytes(bytes(data))
    r = run(log, "--verify-index")
    assert r.exit_code == 1
    assert "Index mismatch" in r.output
    r = run(index, "--verify-index")
    assert r.exit_code == 1


def test_damaged_tail_and_bad_crc(seg_dir):
    log = max(seg_dir.glob("*.log"), key=lambda p: p.stat().st_size)
    data = bytearray(log.read_bytes())
    data[70] ^= 0xFF  # inside the first batch: CRC mismatch
    log.write_bytes(bytes(data) + b"\x00\x00\x00")
    r = run(log)
    assert r.exit_code == 1
    assert "isvalid: false" in r.output
    assert "invalid bytes at the end" in r.output


def test_usage_errors(tmp_path):
    assert run(tmp_path / "missing.log").exit_code == 2
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert run(other).exit_code == 2


def test_json_keeps_text_as_consume_json_writes_it(tmp_path):
    """Non-ASCII text is written as itself (spool consume --json, print_json), not \\u-escaped."""
    mgr = LogManager([str(tmp_path / "d")], {}, FakeClock(T0))
    plog = mgr.create_partition("t", 0, {})
    b = BatchBuilder(0)
    b.append("clé".encode(), "café".encode(), timestamp=T0)
    plog.append(b.build())
    mgr.shutdown()
    r = run(sorted((tmp_path / "d" / "t-0").glob("*.log"))[0], "--print-records", "--json")
    (line,) = [x for x in r.output.splitlines() if '"type": "record"' in x]
    assert '"key": "clé"' in line and '"payload": "café"' in line
