"""Debian's kcat (1.7.1 on librdkafka 2.0.2, an old client) against a real Spool broker.

librdkafka turns features on from the advertised API ranges, so this old
build is a check on the ApiVersions table as much as on the data path:
MsgVer2 needs Produce>=3 and Fetch>=4, zstd needs Produce>=7 and Fetch>=10,
and gzip/snappy/lz4 stop being compressed (silently) when Produce is not
advertised from v0. Topics are made with kafka-python's admin client; kcat
itself only produces, consumes and lists. kcat is required: .ci/run installs it
with apt-get and fails if it cannot; here a missing kcat fails, never skips.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from collections import defaultdict

import pytest
from kafka.admin import KafkaAdminClient

from tests.compat.expect import CODECS, check_stored_codec, now_ms

KCAT = shutil.which("kcat")


@pytest.fixture(autouse=True)
def _kcat_is_required() -> None:
    """kcat is required, not optional: a missing kcat fails every test here."""
    assert KCAT is not None, "kcat is not installed: apt-get install kcat (.ci/run does)"


PARTITIONS = 3
RECORDS = 2000

def kcat(bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 30.0):
    """Run kcat; returns (stdout, stderr) after checking it exited 0 and reported no error."""
    proc = subprocess.run([KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    for bad in ("ERROR", "Delivery failed", "% Failed"):
        assert bad not in proc.stderr, proc.stderr
    return proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def create(admin, topic: str, partitions: int = PARTITIONS) -> None:
    res = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    assert res["topics"][0]["error_code"] == 0, res


def lines_for(tag: str, n: int) -> list[tuple[str, str]]:
    """(key, value) pairs; keys have no spaces or ':', values are compressible."""
    return [(f"{tag}-key-{i % 37}", f"{tag} value {i} " + "payload " * (i % 23)) for i in range(n)]


def produce(bootstrap: str, topic: str, pairs, *extra: str) -> None:
    stdin = "".join(f"{k}:{v}\n" for k, v in pairs)
    kcat(bootstrap, "-P", "-t", topic, "-K:", *extra, stdin=stdin, timeout=60)


def consume(bootstrap: str, topic: str, fmt: str = "%k %s %p %o\\n", *extra: str) -> list[str]:
    out, _ = kcat(bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q", "-f", fmt, *extra)
    return out.splitlines()


def check_consumed(pairs, lines: list[str], partitions: int) -> None:
    """All back once, key -> CRC32 partition (librdkafka's consistent_random), send order per
    partition, contiguous offsets from 0."""
    assert len(lines) == len(pairs), f"produced {len(pairs)}, consumed {len(lines)}"
    by_part: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for line in lines:
        key, rest = line.split(" ", 1)
        value, p, o = rest.rsplit(" ", 2)
        by_part[int(p)].append((int(o), key, value))
    want: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for k, v in pairs:
        want[zlib.crc32(k.encode()) % partitions].append((k, v))
    assert sorted(by_part) == sorted(want)
    for p, rows in by_part.items():
        rows.sort()
        assert [o for o, _, _ in rows] == list(range(len(rows))), f"partition {p} offsets"
        assert [(k, v) for _, k, v in rows] == want[p], f"partition {p} content or order"


@pytest.mark.timeout(30)
def test_metadata_listing(broker, admin, topic_name):
    create(admin, topic_name)
    out, _ = kcat(broker.bootstrap, "-L", "-t", topic_name)
    assert re.search(rf"broker 0 at {re.escape(broker.bootstrap)}\b.*\(controller\)", out), out
    assert f'topic "{topic_name}" with {PARTITIONS} partitions:' in out
    for p in range(PARTITIONS):
        assert f"partition {p}, leader 0, replicas: 0, isrs: 0" in out
    out, _ = kcat(broker.bootstrap, "-L", "-J")
    meta = json.loads(out)
    assert meta["controllerid"] == 0
    assert meta["brokers"] == [{"id": 0, "name": broker.bootstrap}]
    [t] = [t for t in meta["topics"] if t["topic"] == topic_name]
    assert [(q["partition"], q["leader"], q["replicas"], q["isrs"]) for q in t["partitions"]] == [
        (p, 0, [{"id": 0}], [{"id": 0}]) for p in range(PARTITIONS)]


@pytest.mark.timeout(30)
def test_api_version_negotiation(broker):
    """With ApiVersions (the default, spelled out), librdkafka 2.0.2 enables the v2 message
    format and zstd; an old client's view of our ApiVersions table."""
    _, err = kcat(broker.bootstrap, "-L", "-X", "api.version.request=true", "-d", "feature")
    enabled = set(re.findall(r"Enabling feature (\w+)", err))
    assert {"ApiVersion", "MsgVer2", "ZSTD", "OffsetTime"} <= enabled, err[-3000:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume(broker, admin, topic_name, codec):
    create(admin, topic_name)
    pairs = lines_for(f"kc-{codec}", RECORDS)
    produce(broker.bootstrap, topic_name, pairs, "-z", codec, "-X", "api.version.request=true")
    check_consumed(pairs, consume(broker.bootstrap, topic_name), PARTITIONS)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", [
    c
    for c in CODECS if c != "none"
])
def test_producer_really_compresses(broker, admin, topic_name, codec):
    """``-z`` is only a wish: librdkafka drops it if it thinks the broker can't take the codec."""
    create(admin, topic_name, partitions=1)
    produce(broker.bootstrap, topic_name, lines_for(f"kz-{codec}", 500), "-z", codec)
    check_stored_codec(broker.data_dir, topic_name, codec)


@pytest.mark.timeout(30)
def test_headers_and_timestamps(broker, admin, topic_name):
    create(admin, topic_name, partitions=1)
    pairs = lines_for("kh", 50)
    before = now_ms()
    produce(broker.bootstrap, topic_name, pairs, "-z", "gzip", "-H", "trace=abc-123",
            "-H", "empty=")
    after = now_ms()
    rows = consume(broker.bootstrap, topic_name, "%o|%T|%h|%k\\n")
    assert len(rows) == len(pairs)
    for o, row in enumerate(rows):
        offset, ts, headers, key = row.split("|")
        assert int(offset) == o
        assert before - 1000 <= int(ts) <= after + 1000
        assert headers == "trace=abc-123,empty="
        assert key == pairs[o][0]


@pytest.mark.timeout(30)
def test_consume_from_offset_and_tail(broker, admin, topic_name):
    """``-o <n>`` and ``-o -<n>`` go through ListOffsets and a Fetch at an offset
    inside a compressed batch (the client skips the records before it)."""
    create(admin, topic_name, partitions=1)
    pairs = lines_for("ko", 300)
    produce(broker.bootstrap, topic_name, pairs, "-z", "zstd", "-p", "0")
    rows = kcat(broker.bootstrap, "-C", "-t", topic_name, "-e", "-q", "-o", "123", "-f",
                "%o %k\\n")[0].splitlines()
    assert rows == [f"{o} {pairs[o][0]}" for o in range(123, 300)]
    rows = kcat(broker.bootstrap, "-C", "-t", topic_name, "-e", "-q", "-o", "-10", "-f",
                "%o\\n")[0].splitlines()
    assert rows == [str(o) for o in range(290, 300)]
