"""kafka-python 3.0.12 against a real Spool broker: producer, consumer, admin client.

Consumer groups are not implemented in the broker yet, so consumers run with
``group_id=None`` and manual assignment. kafka-python 3 makes producers
idempotent by default (InitProducerId); most producers here say
``enable_idempotence=False``, and the default producer has its own test.
"""

from __future__ import annotations

import threading
import time

import kafka.errors as Errors
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, KafkaAdminClient, OffsetSpec

from tests.compat.expect import (
    CODECS,
    LOG_APPEND_TIME,
    Got,
    check_roundtrip,
    check_stored_codec,
    make_records,
    now_ms,
)

PARTITIONS = 3
RECORDS = 700  # per (codec, acks): ~2,100 per codec


@pytest.fixture
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def _create(admin, topic: str, partitions: int = PARTITIONS, configs: dict | None = None) -> None:
    res = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                       "configs": configs or {}}})
    assert res["topics"][0]["error_code"] == 0, res


def _producer(bootstrap: str, **kw) -> KafkaProducer:
    kw.setdefault("enable_idempotence", False)
    kw.setdefault("linger_ms", 5)
    return KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000, **kw)


def _consumer(bootstrap: str, **kw) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         request_timeout_ms=10_000, **kw)


def _to_got(m) -> Got:
    return Got(m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp,
               m.timestamp_type)


def consume(bootstrap: str, topic: str, partitions: int, expected: int,
            timeout: float = 30.0, **kw) -> list[Got]:
    """Everything from the beginning of each partition; waits until ``expected`` arrived."""
    c = _consumer(bootstrap, **kw)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for _tp, msgs in sorted(c.poll(timeout_ms=500).items()):
                got.extend(_to_got(m) for m in msgs)
        # Nothing extra behind them (duplicates would show up here).
        for _tp, msgs in c.poll(timeout_ms=200).items():
            got.extend(_to_got(m) for m in msgs)
        return got
    finally:
        c.close()


def _send_all(p: KafkaProducer, topic: str, records) -> list:
    futs = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                   timestamp_ms=r.timestamp) for r in records]
    p.flush(timeout=30)
    return futs


@pytest.mark.timeout(60)
@pytest.mark.parametrize("acks", [0, 1, "all"], ids=lambda a: f"acks{a}")
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, admin, topic_name, codec, acks):
    _create(admin, topic_name)
    records = make_records(f"kp-{codec}-{acks}", RECORDS)
    p = _producer(broker.bootstrap, acks=acks,
                  compression_type=None if codec == "none" else codec)
    try:
        futs = _send_all(p, topic_name, records)
    finally:
        p.close(timeout=10)
    got = consume(broker.bootstrap, topic_name, PARTITIONS, len(records))
    check_roundtrip(records, got, PARTITIONS)
    if acks != 0:
        # Each acknowledged send reports the partition and offset the consumer then saw it at.
        at = {(g.partition, g.offset): g for g in got}
        for r, f in zip(records, futs, strict=True):
            md = f.get(timeout=1)
            assert at[(md.partition, md.offset)].key == r.key
            assert at[(md.partition, md.offset)].headers == r.headers
    check_stored_codec(broker.data_dir, topic_name, codec)


@pytest.mark.timeout(30)
def test_edge_records(broker, admin, topic_name):
    """Null key, null value (tombstone), empty value and key, repeated headers, a 300 KB value.

    (kafka-python refuses null header values client-side.)
    """
    _create(admin, topic_name, partitions=1)
    ts = now_ms() - 1000
    cases = [
        (None, b"no key", [("h", b"1")]),
        (b"tomb", None, []),
        (b"empty", b"", [("", b""), ("dup", b"1"), ("dup", b"2")]),
        (b"\x00\xff\x80", bytes(range(256)) * 1200, [("big", b"x" * 1000)]),
        (b"", b"empty key", []),
    ]
    p = _producer(broker.bootstrap, acks=1, compression_type="gzip", max_request_size=2 << 20)
    try:
        for i, (k, v, h) in enumerate(cases):
            p.send(topic_name, key=k, value=v, headers=h, partition=0, timestamp_ms=ts + i)
        p.flush(timeout=10)
    finally:
        p.close(timeout=10)
    # Tiny fetch limits: the broker still hands out whole batches, at least one (KIP-74).
    got = consume(broker.bootstrap, topic_name, 1, len(cases), max_partition_fetch_bytes=1024,
                  fetch_max_bytes=1024, isolation_level="read_committed")
    assert [(g.key, g.value, list(g.headers), g.timestamp) for g in got] == [
        (k, v, h, ts + i) for i, (k, v, h) in enumerate(cases)
    ]
    assert [g.offset for g in got] == list(range(len(cases)))


@pytest.mark.timeout(30)
def test_auto_created_topic(broker, topic_name):
    """Producing to a topic nobody created: Metadata auto-creates it (num.partitions)."""
    p = _producer(broker.bootstrap, acks=1)
    try:
        md = p.send(topic_name, key=b"k", value=b"auto").get(timeout=15)
    finally:
        p.close(timeout=10)
    assert md.offset == 0
    got = consume(broker.bootstrap, topic_name, md.partition + 1, 1)
    assert [(g.partition, g.key, g.value) for g in got] == [(md.partition, b"k", b"auto")]


@pytest.mark.timeout(30)
def test_default_producer_is_idempotent(broker, admin, topic_name):
    _create(admin, topic_name, partitions=1)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        md = p.send(topic_name, key=b"k", value=b"v").get(timeout=15)
    finally:
        p.close(timeout=5)
    assert md.offset == 0
    assert consume(broker.bootstrap, topic_name, 1, 1)[0].value == b"v"


@pytest.mark.timeout(30)
def test_offsets_for_times_and_watermarks(broker, admin, topic_name):
    _create(admin, topic_name)
    base = now_ms() - 3_600_000
    # Per partition, timestamps rise 10 ms a record (send order); partition = murmur2(key).
    records = make_records("kp-times", 300, base_ts=base)
    records = [type(r)(r.key, r.value, r.headers, base + 10 * i) for i, r in enumerate(records)]
    p = _producer(broker.bootstrap, acks=1, compression_type="lz4")
    try:
        futs = _send_all(p, topic_name, records)
        placed = [f.get(timeout=1) for f in futs]
    finally:
        p.close(timeout=10)
    by_part: dict[int, list[tuple[int, int]]] = {q: [] for q in range(PARTITIONS)}
    for r, md in zip(records, placed, strict=True):
        by_part[md.partition].append((md.offset, r.timestamp))

    def expect(target: int):
        out = {}
        for q, rows in by_part.items():
            hit = next(((o, t) for o, t in rows if t >= target), None)
            out[TopicPartition(topic_name, q)] = hit
        return out

    c = _consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic_name, q) for q in range(PARTITIONS)]
        for target in (0, base, base + 5, base + 1500, base + 1505, base + 2990, base + 2991,
                       base + 10**7):
            found = c.offsets_for_times({tp: target for tp in tps})
            got = {tp: (v.offset, v.timestamp) if v else None for tp, v in found.items()}
            assert got == expect(target), f"target {target - base:+d} ms"
        assert c.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert c.end_offsets(tps) == {TopicPartition(topic_name, q): len(rows)
                                      for q, rows in by_part.items()}
    finally:
        c.close()


@pytest.mark.timeout(30)
def test_offset_lookups_inside_one_batch(broker, admin, topic_name):
    """Out-of-order CreateTimes in one compressed batch: by-timestamp lookups scan its records;
    MAX_TIMESTAMP (-3, ListOffsets v7) finds the newest one."""
    _create(admin, topic_name, partitions=1)
    base = now_ms() - 600_000
    deltas = [1000, 5000, 3000, 9000, 2000, 7000]
    p = _producer(broker.bootstrap, acks=1, compression_type="gzip", linger_ms=200)
    try:
        for i, d in enumerate(deltas):
            p.send(topic_name, value=b"v%d" % i + b" padding" * 20, timestamp_ms=base + d,
                   partition=0)
        p.flush(timeout=10)
    finally:
        p.close(timeout=10)
    tp = TopicPartition(topic_name, 0)

    def lookup(spec):
        r = admin.list_partition_offsets({tp: spec})[tp]
        return r.offset, r.timestamp

    assert lookup(OffsetSpec.EARLIEST)[0] == 0
    assert lookup(OffsetSpec.LATEST)[0] == len(deltas)
    assert lookup(OffsetSpec.MAX_TIMESTAMP) == (3, base + 9000)
    assert lookup(base + 4000) == (1, base + 5000)
    assert lookup(base + 6000) == (3, base + 9000)
    assert lookup(base + 9001)[0] == -1
    c = _consumer(broker.bootstrap)
    try:
        found = c.offsets_for_times({tp: base + 2500})[tp]
        assert (found.offset, found.timestamp) == (1, base + 5000)
    finally:
        c.close()


@pytest.mark.timeout(30)
def test_log_append_time_and_timestamp_bounds(broker, admin, topic_name):
    lat = topic_name + "-lat"
    _create(admin, lat, partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    _create(admin, topic_name, partitions=1,
            configs={"message.timestamp.before.max.ms": "3600000"})
    p = _producer(broker.bootstrap, acks=1, compression_type="zstd", retries=0)
    try:
        before = now_ms()
        futs = [p.send(lat, key=b"k%d" % i, value=b"v", timestamp_ms=1_500_000_000_000)
                for i in range(50)]
        mds = [f.get(timeout=10) for f in futs]
        after = now_ms()
        # The broker's append time comes back in the produce response.
        assert all(before - 5 <= md.timestamp <= after + 5 for md in mds), mds[0]
        # A CreateTime record two hours old on a topic allowing one hour: INVALID_TIMESTAMP (32).
        old = p.send(topic_name, value=b"old", timestamp_ms=now_ms() - 7_200_000)
        with pytest.raises(Errors.InvalidTimestampError):
            old.get(timeout=10)
        assert p.send(topic_name, value=b"fresh").get(timeout=10).offset == 0
    finally:
        p.close(timeout=10)
    got = consume(broker.bootstrap, lat, 1, 50)
    assert len(got) == 50
    assert {g.timestamp_type for g in got} == {LOG_APPEND_TIME}
    assert all(g.timestamp == mds[0].timestamp for g in got)
    assert [g.value for g in consume(broker.bootstrap, topic_name, 1, 1)] == [b"fresh"]


@pytest.mark.timeout(30)
def test_oversized_record_is_rejected(broker, admin, topic_name):
    _create(admin, topic_name, partitions=1, configs={"max.message.bytes": "10000"})
    p = _producer(broker.bootstrap, acks=1, retries=0)
    try:
        big = p.send(topic_name, value=b"x" * 50_000)
        with pytest.raises(Errors.MessageSizeTooLargeError):
            big.get(timeout=10)
        assert p.send(topic_name, value=b"small").get(timeout=10).offset == 0
    finally:
        p.close(timeout=10)


@pytest.mark.timeout(30)
def test_long_poll_wakes_on_append(broker, admin, topic_name):
    """A consumer parked in a 5 s Fetch gets a new record as soon as it is appended."""
    _create(admin, topic_name, partitions=1)
    c = _consumer(broker.bootstrap, fetch_max_wait_ms=5000)
    p = _producer(broker.bootstrap, acks=1)
    try:
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.poll(timeout_ms=300) == {}
        sent_at: list[float] = []

        def produce_later():
            time.sleep(0.5)
            sent_at.append(time.monotonic())
            p.send(topic_name, value=b"wake").get(timeout=10)

        t = threading.Thread(target=produce_later)
        t.start()
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got = [m for msgs in c.poll(timeout_ms=500).values() for m in msgs]
        received_at = time.monotonic()
        t.join()
        assert [m.value for m in got] == [b"wake"]
        assert received_at - sent_at[0] < 2.5, "the parked Fetch was not woken by the append"
    finally:
        c.close()
        p.close(timeout=10)


@pytest.mark.timeout(30)
def test_admin_topic_lifecycle(broker, admin, topic_name):
    res = admin.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1,
                                            "configs": {"retention.ms": "3600000"}}})
    [t] = res["topics"]
    assert (t["name"], t["error_code"], t["num_partitions"], t["replication_factor"]) == (
        topic_name, 0, 2, 1)
    assert t["configs"]["retention.ms"]["value"] == "3600000"
    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({topic_name: {"num_partitions": 1}})
    assert topic_name in admin.list_topics()
    [d] = admin.describe_topics([topic_name])
    assert d["error_code"] == 0
    assert [(q["partition_index"], q["leader_id"], q["replica_nodes"], q["isr_nodes"])
            for q in d["partitions"]] == [(0, 0, [0], [0]), (1, 0, [0], [0])]
    cluster = admin.describe_cluster()
    assert [b["broker_id"] for b in cluster["brokers"]] == [0]
    assert cluster["controller_id"] == 0

    admin.create_partitions({topic_name: 5})
    [d] = admin.describe_topics([topic_name])
    assert len(d["partitions"]) == 5
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({topic_name: 3})

    # validate_only creates nothing.
    admin.create_topics({topic_name + "-v": {"num_partitions": 1}}, validate_only=True)
    assert topic_name + "-v" not in admin.list_topics()

    admin.delete_topics([topic_name])
    assert topic_name not in admin.list_topics()
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name])


@pytest.mark.timeout(30)
def test_admin_configs(broker, admin, topic_name):
    _create(admin, topic_name, partitions=1, configs={"retention.ms": "3600000"})
    res = ConfigResource("TOPIC", topic_name)
    modified = admin.describe_configs([res])["topic"][topic_name]
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "3600000"}
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    everything = admin.describe_configs([res], config_filter="all")["topic"][topic_name]
    assert everything["cleanup.policy"]["value"] == "delete"
    assert everything["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert everything["max.message.bytes"]["config_type"] == "INT"

    # IncrementalAlterConfigs: SET one key, DELETE another (back to its default).
    out = admin.alter_configs([ConfigResource("TOPIC", topic_name, {
        "max.message.bytes": "2000000", "retention.ms": (AlterConfigOp.DELETE, None)})])
    assert out == {"topic": {topic_name: "OK"}}
    modified = admin.describe_configs([res])["topic"][topic_name]
    assert {k: v["value"] for k, v in modified.items()} == {"max.message.bytes": "2000000"}
    everything = admin.describe_configs([res], config_filter="all")["topic"][topic_name]
    assert everything["retention.ms"]["value"] == "604800000"

    # Legacy AlterConfigs replaces the whole set; the client re-sends the modified keys.
    out = admin.alter_configs([ConfigResource("TOPIC", topic_name, {"segment.ms": "7200000"})],
                              incremental=False)
    assert out == {"topic": {topic_name: "OK"}}
    modified = admin.describe_configs([res])["topic"][topic_name]
    assert {k: v["value"] for k, v in modified.items()} == {
        "max.message.bytes": "2000000", "segment.ms": "7200000"}

    bad = admin.alter_configs([ConfigResource("TOPIC", topic_name, {"retention.ms": "soon"})],
                              raise_on_unknown=False)
    error = bad["topic"][topic_name]  # "[Error 40] InvalidConfigurationError: <message>"
    assert error.startswith("[Error 40] InvalidConfigurationError: "), error
    assert "retention.ms" in error and "soon" in error, error
    broker_cfg = admin.describe_configs([ConfigResource("BROKER", "0")], config_filter="all")
    broker_cfg = broker_cfg["broker"]["0"]
    assert broker_cfg["broker.id"]["value"] == "0"
    assert broker_cfg["log.retention.ms"]["config_type"] == "LONG"


@pytest.mark.timeout(30)
def test_admin_delete_records(broker, admin, topic_name):
    _create(admin, topic_name, partitions=2)
    p = _producer(broker.bootstrap, acks=1, compression_type="gzip")
    try:
        for i in range(100):
            p.send(topic_name, value=b"r%d" % i, partition=i % 2)
        p.flush(timeout=10)
    finally:
        p.close(timeout=10)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    out = admin.delete_records({tp0: 20, tp1: 50})
    assert out[tp0]["low_watermark"] == 20
    assert out[tp1]["low_watermark"] == 50
    with pytest.raises(Errors.OffsetOutOfRangeError):
        admin.delete_records({tp0: 1000})
    got = consume(broker.bootstrap, topic_name, 2, 30)
    assert sorted((g.partition, g.offset) for g in got) == [(0, o) for o in range(20, 50)]
    assert [g.value for g in got if g.partition == 0] == [b"r%d" % (2 * o) for o in range(20, 50)]
    c = _consumer(broker.bootstrap)
    try:
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 20, tp1: 50}
        assert c.end_offsets([tp0, tp1]) == {tp0: 50, tp1: 50}
    finally:
        c.close()


@pytest.mark.timeout(30)
def test_dynamic_broker_config_is_reported_as_such(fresh_broker):
    fresh_broker.start()
    a = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap, request_timeout_ms=10_000)
    try:
        out = a.alter_configs([ConfigResource("BROKER", "0", {"log.retention.ms": "1234567"})])
        assert out == {"broker": {"0": "OK"}}
        _create(a, "cfg-topic", partitions=1)
        topic = a.describe_configs([ConfigResource("TOPIC", "cfg-topic")], config_filter="all",
                                   include_synonyms=True)["topic"]["cfg-topic"]["retention.ms"]
        assert (topic["value"], topic["config_source"]) == ("1234567", "DYNAMIC_BROKER_CONFIG")
        broker = a.describe_configs([ConfigResource("BROKER", "0")])["broker"]["0"]
        assert "log.retention.ms" in broker, "the changed broker config is not listed as modified"
        assert broker["log.retention.ms"]["value"] == "1234567"
        assert broker["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    finally:
        a.close()
