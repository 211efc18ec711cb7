"""Batch and streaming write: what is written reads back equal; murmur2 placement; guarantees."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from spool.protocol._generated import ApiVersionsResponse
from spool.protocol._generated.api_versions_response import ApiVersion
from tests.helpers.murmur2 import murmur2
from tests.spark.conftest import consume_all, create_topic, produce

HEADERS = "array<struct<key: string, value: binary>>"


def test_batch_write_then_read_back_equals_input(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    rows = [
        (f"k{i}".encode(), f"value-{i}".encode(), [("h", f"{i}".encode())], i % 3 if i % 4 == 0 else None)
        for i in range(60)
    ]
    df = spark.createDataFrame(rows, f"key binary, value binary, headers {HEADERS}, partition int")
    df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", topic_name
    ).mode("append").save()
    back = (
        spark.read.format("spool")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic_name)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    got = {bytes(r.key): (bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers], r.partition) for r in back}
    assert len(back) == 60
    for i, (key, value, headers, part) in enumerate(rows):
        want_part = part if part is not None else (murmur2(key) & 0x7FFFFFFF) % 3
        assert got[key] == (value, headers, want_part), i


def test_topic_column_and_string_values(spark, broker, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    create_topic(broker.bootstrap, a, 1)
    create_topic(broker.bootstrap, b, 1)
    df = spark.createDataFrame(
        [(a if i % 2 else b, None, f"s{i}") for i in range(10)], "topic string, key string, value string"
    )
    df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    assert sorted(m.value() for m in consume_all(broker.bootstrap, a)) == [f"s{i}".encode() for i in (1, 3, 5, 7, 9)]
    assert sorted(m.value() for m in consume_all(broker.bootstrap, b)) == [f"s{i}".encode() for i in (0, 2, 4, 6, 8)]
    assert all(m.key() is None for m in consume_all(broker.bootstrap, a))


def test_write_without_value_or_topic_is_refused(spark, broker):
    df = spark.createDataFrame([(b"k",)], "key binary")
    w = df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    with pytest.raises(Exception, match="value column is required"):
        w.option("topic", "x").save()
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="topic column or the topic option"):
        df.write.format("spool").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()


def _stream_copy(spark, bootstrap, source, sink, checkpoint, guarantee):
    q = (
        spark.readStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("spool")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    if q.exception():
        raise RuntimeError(str(q.exception()))


def test_streaming_at_least_once_copy(spark, broker, topic_name, tmp_path):
    src, dst = topic_name + "-in", topic_name + "-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(40)])
    _stream_copy(spark, broker.bootstrap, src, dst, tmp_path / "cp", "at-least-once")
    produce(broker.bootstrap, src, [{"key": b"late", "value": b"late"}])
    _stream_copy(spark, broker.bootstrap, src, dst, tmp_path / "cp", "at-least-once")
    got = sorted((m.key(), m.value(), m.partition()) for m in consume_all(broker.bootstrap, dst))
    want = sorted(
        (k, v, (murmur2(k) & 0x7FFFFFFF) % 2)
        for k, v in [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)] + [(b"late", b"late")]
    )
    assert got == want


def test_exactly_once_is_refused_without_broker_transactions(spark, broker, topic_name, tmp_path):
    """A sink broker that advertises no transaction APIs: the exactly-once sink refuses.

    Spool always has transactions, so the sink's bootstrap is a stand-in that
    answers ApiVersions (the only request the refusal makes) without them.
    """
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"x"}])
    with NoTransactionsBroker() as sink_bootstrap:
        q = (
            spark.readStream.format("spool")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("spool")
            .option("kafka.bootstrap.servers", sink_bootstrap)
            .option("topic", topic_name + "-out")
            .option("deliveryGuarantee", "exactly-once")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
        )
        with pytest.raises(Exception) as e:
            started = q.start()
            started.awaitTermination(120)
            raise RuntimeError(str(started.exception()))
    assert (
        f"deliveryGuarantee=exactly-once needs Kafka transactions, but the broker at "
        f"{sink_bootstrap} does not support them (no InitProducerId, AddPartitionsToTxn, EndTxn); "
        "set the option deliveryGuarantee=at-least-once to write without them"
    ) in str(e.value)


class NoTransactionsBroker:
    """A stand-in broker that answers ApiVersions v0 with Produce, Fetch, ListOffsets,
    Metadata and ApiVersions only (no InitProducerId, AddPartitionsToTxn, EndTxn)."""

    APIS = ((0, 0, 9), (1, 0, 13), (2, 0, 7), (3, 0, 12), (18, 0, 3))

    def __enter__(self) -> str:
        self._srv = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()
        return f"127.0.0.1:{self._srv.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._srv.close()

    def _serve(self) -> None:
        body = ApiVersionsResponse(
            error_code=0, api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                    for k, lo, hi in self.APIS]
        ).to_bytes(0)
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            with conn:
                try:
                    (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
                    frame = conn.recv(size, socket.MSG_WAITALL)
                    api_key, _, correlation_id = struct.unpack(">hhi", frame[:8])
                    assert api_key == 18, api_key
                    reply = struct.pack(">i", correlation_id) + body
                    conn.sendall(struct.pack(">i", len(reply)) + reply)
                except (OSError, struct.error, AssertionError):
                    continue
